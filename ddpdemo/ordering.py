"""Rank 0 first: one rank does a step (download, build a cache) while the
others wait, then all go on. Chapters 6 (Rank 0 first) and 10
(Evaluation).

    with torch_distributed_zero_first(rank):
        dataset = build_dataset()    # rank 0 first, then every other rank

`torch_distributed_zero_first` is the context manager as the source post
wrote it (current YOLOv5 takes `local_rank` and passes `device_ids` to its
barriers; chapter 6). Ranks other than 0 wait in a barrier *before* the
block, rank 0 enters a barrier *after* it, and the two barriers meet.
`rank = -1` means "not distributed" and takes no barrier at all. Every
rank of the group must enter the `with` block, or rank 0 waits after it
forever (chapter 10).

If rank 0 raises inside the block, its barrier is never reached: while
rank 0's process lives on (it catches the error, or it is a notebook's
engine), the others wait in theirs until the group's timeout; once it
ends (an uncaught exception in a script), gloo fails their barrier at
once, "Connection closed by peer" (or "reset by peer"; chapter 6).
`torch_distributed_zero_first_safe` all-reduces every rank 0's outcome
instead, so the others fail too, at once, and their error names the
global rank that failed. Shown on gloo, where the all_reduce has
finished when rank 0 re-raises; on NCCL it is only queued then, and a
process that ends at once may not deliver it (not run here: no GPUs).
Zero first by `LOCAL_RANK` (chapter 6, node-local storage) and there is
one rank 0 per node: each rank waits for all of them. On NCCL its flags
live on the current CUDA device: call `torch.cuda.set_device(local_rank)`
first.
"""
import os
from contextlib import contextmanager

import torch
import torch.distributed as dist


@contextmanager
def torch_distributed_zero_first(rank):
    """Make every rank wait while rank 0 runs the block first.

    As the source post wrote it. `rank` is this process's rank, or
    -1 when not distributed. Not exception-safe: see the module docstring.
    """
    if rank not in [-1, 0]:
        dist.barrier()
    yield
    if rank == 0:
        dist.barrier()


class RankZeroFailed(RuntimeError):
    """Raised on every other rank when a rank 0 failed inside the
    block."""


def _flag_device():
    """Where the flags go: the CPU for gloo; for NCCL, this process's
    *current* CUDA device, so call torch.cuda.set_device(local_rank)
    first. Refused where that call is plainly missing (several GPUs,
    LOCAL_RANK not 0, yet cuda:0 current): every rank's flags would land
    on GPU 0, which NCCL refuses to share between ranks."""
    if dist.get_backend() != "nccl":
        return torch.device("cpu")
    current = torch.cuda.current_device()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.device_count() > 1 and current == 0 and local_rank != 0:
        raise RuntimeError(
            f"torch_distributed_zero_first_safe: LOCAL_RANK is {local_rank} "
            "but the current CUDA device is cuda:0; call "
            "torch.cuda.set_device(local_rank) before it")
    return torch.device("cuda", current)


def _failed(flags):
    """The global ranks whose flag says their block failed."""
    ranks = (flags == 0).nonzero().flatten().tolist()
    return (f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranks}")


@contextmanager
def torch_distributed_zero_first_safe(rank):
    """Like `torch_distributed_zero_first`, but if a rank 0 raises inside
    the block, every other rank raises RankZeroFailed instead of waiting.

    Where the original has barriers, every rank puts a flag (1: done,
    0: failed) into one all_reduce with MIN: ranks other than 0 before
    the block, rank 0 after it. An all_reduce needs every rank's flag,
    so no rank leaves it before every rank 0 (one per node, by
    LOCAL_RANK) has finished its block, and the MIN says whether one
    failed. The flags are one per global rank, so the error names the
    rank that failed: global rank 0, or a node's local rank 0 (rank 2
    of two nodes of two, say). A broadcast from rank 0 would not do:
    gloo sends it along a tree, and a rank waits only for the ranks it
    receives from and sends to (chapter 6); with 4 ranks, rank 3
    receives through rank 1 and would read before node 1's rank 0,
    rank 2, has written.

    On NCCL the flags go on the current CUDA device: call
    torch.cuda.set_device(local_rank) first (refused where it is
    plainly missing, see _flag_device).
    """
    if rank == -1:
        yield
        return
    flags = torch.ones(dist.get_world_size(), dtype=torch.int32,
                       device=_flag_device())
    if rank != 0:
        dist.all_reduce(flags, op=dist.ReduceOp.MIN)
        if not flags.all():
            raise RankZeroFailed(f"{_failed(flags)} failed inside "
                                 "torch_distributed_zero_first_safe")
        yield
        return
    try:
        yield
    except BaseException:
        flags[dist.get_rank()] = 0
        dist.all_reduce(flags, op=dist.ReduceOp.MIN)   # tell the others
        raise
    dist.all_reduce(flags, op=dist.ReduceOp.MIN)
    if not flags.all():    # another node's rank 0 failed
        raise RankZeroFailed(f"{_failed(flags)} failed inside "
                             "torch_distributed_zero_first_safe")
