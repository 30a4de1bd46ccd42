"""What runs inside each rank's engine process.

The notebook kernel never runs torch.distributed itself: every rank is an
ipyparallel engine, a separate Python process, and the functions here are
what `ddpdemo.Cluster` sends to it (chapter 0, "How the live cluster
works"). They set the rank's environment, arm a stack dump for hang
diagnosis, form the process group and call the reader's code. The guard
that ends an engine with its kernel is in ddpdemo.runtime.guard; devices
are in ddpdemo.runtime.devices.
"""
import ast
import datetime
import faulthandler
import os
import signal
import socket
import sys

from .devices import (current_device, gpu_count, nccl_device,
                      reachable_address)
from .rendezvous import TCPRendezvous

# Objects that must live as long as the engine: the open stack-dump file
# (faulthandler writes to its descriptor from a signal handler) and, on the
# TCP path, rank 0's store, whose server dies with the object.
_keep = {}


# Where an engine's rank is found: ours (local, ssh), then the rank that
# Open MPI, MPICH (PMI) or Slurm's srun gave its task (ddpdemo.runtime.batch).
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")


def identify():
    """(the rank this engine was launched with, or -1 if none; its host):
    how the client maps engines to ranks and counts ranks per host."""
    # An empty value is no rank: how a launcher's engines are told to
    # skip a RANK they inherited from the kernel (placement.py).
    found = [os.environ[v] for v in RANK_VARIABLES if os.environ.get(v)]
    return int(found[0]) if found else -1, socket.gethostname()


def prepare(rank, local_rank, world_size, env, dump_path):
    """Set the rank's environment (before torch is imported) and arm dumps.

    SIGUSR1 makes faulthandler write every thread's Python stack to
    `dump_path` from C, which works while the main thread is stuck inside
    a collective. Returns facts the client needs: pid, host, GPU count.
    """
    os.environ.update({k: str(v) for k, v in env.items()})
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(local_rank),
                      WORLD_SIZE=str(world_size))
    if dump_path and hasattr(signal, "SIGUSR1"):
        # Open while the engine lives: faulthandler writes to its fd.
        _keep["dump"] = open(dump_path, "w")  # noqa: SIM115 (kept open)
        faulthandler.register(signal.SIGUSR1, file=_keep["dump"],
                              all_threads=True)
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "rank": rank, "gpus": gpu_count()}


def open_tcp_store(world_size, master_addr, timeout_s):
    """Rank 0 opens the TCP rendezvous on port 0; the OS picks a free port.

    Port 0 means no fixed port and no race between choosing a port and
    binding it. Returns the TCPRendezvous the other ranks meet at.
    """
    import torch.distributed as dist
    addr = master_addr or reachable_address()
    store = dist.TCPStore(addr, 0, world_size, is_master=True,
                          timeout=datetime.timedelta(seconds=timeout_s),
                          wait_for_workers=False)
    _keep["store"] = store
    return TCPRendezvous(addr, store.port)


def user_namespace():
    """The engine's interactive namespace: where `%%ranks` cells run and
    where functions sent by `Cluster.run` find their globals."""
    from IPython import get_ipython
    shell = get_ipython()
    return shell.user_ns if shell is not None else globals()


def init_group(backend, rank, world_size, timeout_s, rendezvous, arm=False):
    """Form the process group on this rank and seed the user namespace.

    `rendezvous`: where the ranks meet (ddpdemo.runtime.rendezvous: a
    FileStore in a private directory, or rank 0's TCPStore). `arm`: then
    start the Flight Recorder responder on the same store (flight.arm),
    in this call rather than a round trip of its own.
    """
    import torch
    import torch.distributed as dist
    timeout = datetime.timedelta(seconds=timeout_s)
    interface = rendezvous.gloo_interface()
    if interface is not None and "GLOO_SOCKET_IFNAME" not in os.environ:
        os.environ["GLOO_SOCKET_IFNAME"] = interface
    # Rank 0 of a TCP rendezvous holds the store's master already.
    store = _keep.get("store") if rank == 0 else None
    if store is None:
        store = rendezvous.store(timeout_s, world_size)
    _keep["client_store"] = store
    kwargs = {}
    if backend == "nccl":
        kwargs["device_id"] = nccl_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group(backend, store=store, rank=rank,
                            world_size=world_size, timeout=timeout, **kwargs)
    user_namespace().update(torch=torch, dist=dist, rank=rank,
                            local_rank=int(os.environ["LOCAL_RANK"]),
                            world_size=world_size, device=current_device())
    if arm:
        from . import flight
        flight.arm(rank, rendezvous)
    return dist.get_backend()


def to_cpu(value):
    """Move tensors in a result to the CPU so the notebook kernel, which
    may have no GPU, can unpickle them."""
    import torch
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(to_cpu(v) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: to_cpu(v) for k, v in value.items()}
    return value


def call(fn, args, kwargs):
    """Run the reader's function on this rank. The name `call` is what a
    stack dump shows just below the reader's own frames."""
    return to_cpu(fn(*args, **kwargs))


def run_source(source, filename):
    """Run a notebook cell's source on this rank, IPython-style: statements
    are executed, and a final expression's value is returned as its repr.
    """
    namespace = user_namespace()
    tree = ast.parse(source, filename)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, filename, "exec"), namespace)
    if last is None:
        return None
    value = eval(compile(last, filename, "eval"), namespace)
    sys.stdout.flush()
    return None if value is None else repr(to_cpu(value))


def barrier():
    """The health check of a group a failed rank may have poisoned."""
    import torch.distributed as dist
    dist.barrier()
