"""What a torchrun script needs, in one place: its rank, its group, and
printing in rank order. Used by every script in ddpdemo.examples (each
chapter shows the one for its topic).

    torchrun --standalone --nproc-per-node 2 -m ddpdemo.examples.all_reduce_sums

`--standalone` makes torchrun pick a free port itself: no fixed port. The
classic form from older posts also works:

    python -m torch.distributed.launch --nproc_per_node 2 --use-env main.py

torch.distributed.launch passes `--local-rank` (older versions
`--local_rank`) as an argument; torchrun sets the LOCAL_RANK variable.
`local_rank()` accepts both, so old and new scripts run unchanged.
"""
import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist

from .devices import gpu_count, loopback_interface, nccl_device


def local_rank(argv=None):
    """LOCAL_RANK from `--local-rank`/`--local_rank` or the environment."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--local-rank", "--local_rank", type=int,
                        dest="local_rank", default=None)
    args, _ = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if args.local_rank is not None:
        return args.local_rank
    return int(os.environ.get("LOCAL_RANK", 0))


def init(backend="auto", timeout_s=60.0, argv=None):
    """Form the group from torchrun's environment; returns (rank,
    world_size, device). NCCL when this rank has a GPU of its own, else gloo.
    The group timeout bounds every collective, so a deadlocked script ends.
    """
    lr = local_rank(argv)
    os.environ.setdefault("LOCAL_RANK", str(lr))
    if os.environ.get("MASTER_ADDR", "127.0.0.1") in ("127.0.0.1", "localhost"):
        # Single machine: keep gloo's sockets on loopback.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", loopback_interface())
    if backend == "auto":
        backend = "nccl" if gpu_count() > lr else "gloo"
    kwargs = {}
    device = torch.device("cpu")
    if backend == "nccl":
        device = kwargs["device_id"] = nccl_device(lr)
    dist.init_process_group(backend, timeout=datetime.timedelta(
        seconds=timeout_s), **kwargs)
    return dist.get_rank(), dist.get_world_size(), device


def print_ranked(*lines):
    """Print each rank's lines on rank 0, in rank order, prefixed with the
    rank: output from several processes never interleaves. Collective: every
    rank must call it."""
    text = [str(line) for line in lines]
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, text)
    if dist.get_rank() == 0:
        for rank, rank_lines in enumerate(gathered):
            for line in rank_lines:
                print(f"[rank {rank}] {line}", flush=True)


def finish():
    """Leave the group cleanly (torch warns if a script does not)."""
    if dist.is_initialized():
        dist.destroy_process_group()
