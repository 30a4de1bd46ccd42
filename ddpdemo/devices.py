"""Which device a rank uses and which network interface gloo binds to, in
one place for the engines (ddpdemo.engine) and for torchrun scripts
(ddpdemo.launch). Chapter 0 ("How the live cluster works") and chapter 1.

Rank r of a host uses cuda:LOCAL_RANK under NCCL and the CPU under gloo,
so one notebook or script serves both backends.
"""
import os
import socket


def gpu_count():
    """GPUs this process can see; 0 on a CPU-only build of torch."""
    import torch
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def loopback_interface():
    """Name of the loopback interface: `lo` on Linux, `lo0` on macOS."""
    for _, name in socket.if_nameindex():
        if name.startswith("lo"):
            return name
    return "lo"


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
