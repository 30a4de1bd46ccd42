"""Which device a rank uses and which network interface gloo binds to, in
one place for the engines (ddpdemo.runtime.engine) and for torchrun scripts
(ddpdemo.launch). Chapter 0 ("How the live cluster works") and chapter 1.

Rank r of a host uses cuda:LOCAL_RANK under NCCL and the CPU under gloo,
so one notebook or script serves both backends. On one machine gloo is
pinned to loopback; across hosts each rank picks the interface that owns
the address it reaches rank 0 from (`gloo_interface`), so a host with
several networks uses the one its peers can reach, and never `lo`.
"""
import os
import socket


def gpu_count():
    """GPUs this process can see; 0 on a CPU-only build of torch."""
    import torch
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def auto_backend(ranks):
    """What backend="auto" means, decided here only: "nccl" when every
    rank can have a GPU of its own (the rank with LOCAL_RANK r uses
    cuda:r), else "gloo". `ranks`: (GPUs the rank sees, its LOCAL_RANK)
    for each rank deciding together. Chapter 0 (Cluster), the torchrun
    scripts (ddpdemo.launch, examples/train_ddp.py)."""
    return "nccl" if all(gpus > lr for gpus, lr in ranks) else "gloo"


def loopback_interface():
    """Name of the loopback interface: `lo` on Linux, `lo0` on macOS."""
    for _, name in socket.if_nameindex():
        if name.startswith("lo"):
            return name
    return "lo"


def address_toward(host):
    """This host's own address on the route to `host` (an IP address).
    A UDP connect only looks the route up: no packet is sent. Toward one
    of this host's own addresses, it is that address."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((host, 9))
        return probe.getsockname()[0]


def interface_of(address):
    """Name of the interface that owns `address` on this host."""
    import psutil
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address == address for a in addresses):
            return name
    raise LookupError(f"no interface on {socket.gethostname()} has the "
                      f"address {address}")


def gloo_interface(master_addr):
    """The interface gloo should bind to on this host: the one that owns
    the address this host reaches `master_addr` from (on rank 0's own
    host, the one that owns master_addr). For GLOO_SOCKET_IFNAME."""
    return interface_of(address_toward(master_addr))


def controller_address():
    """Inside an ipyparallel engine: the controller's IP address, from
    the url the engine registered at; None elsewhere."""
    from ipyparallel.engine.app import IPEngine
    if not IPEngine.initialized():
        return None
    url = IPEngine.instance().registration_url   # tcp://10.0.0.1:port
    return url.split("://", 1)[-1].rsplit(":", 1)[0] or None


def reachable_address():
    """This rank's address for a rendezvous across hosts: the one it
    reaches the controller from, which the other hosts reach too (they
    all reach the controller). Falls back on the hostname's address."""
    controller = controller_address()
    if controller:
        return address_toward(controller)
    return socket.gethostbyname(socket.gethostname())


def nccl_device(local_rank):
    """Make cuda:local_rank this process's current device and return it:
    NCCL needs one GPU per rank, and `device_id` tells
    init_process_group which one up front."""
    import torch
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    return device


def current_device():
    """The device this rank's tensors belong on: cuda:LOCAL_RANK under
    NCCL, the CPU under gloo. Chapter 1 uses it so one notebook serves both.
    """
    import torch
    import torch.distributed as dist
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    return torch.device("cpu")
