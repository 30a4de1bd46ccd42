"""Rank 0 first: one rank does a step (download, build a cache) while the
others wait, then all go on. Chapters 4 and 5.

    with torch_distributed_zero_first(rank):
        dataset = build_dataset()    # rank 0 first, then every other rank

`torch_distributed_zero_first` is the context manager as the source post
wrote it (current YOLOv5 takes `local_rank` and passes `device_ids` to its
barriers; chapter 4). Ranks other than 0 wait in a barrier *before* the
block, rank 0 enters a barrier *after* it, and the two barriers meet.
`rank = -1` means "not distributed" and takes no barrier at all. Every
rank of the group must enter the `with` block, or rank 0 waits after it
forever (chapter 5).

If rank 0 raises inside the block, its barrier is never reached: while
rank 0's process lives on (it catches the error, or it is a notebook's
engine), the others wait in theirs until the group's timeout; once it
ends (an uncaught exception in a script), gloo fails their barrier at
once, "Connection closed by peer" (chapter 4).
`torch_distributed_zero_first_safe` all-reduces every rank 0's outcome
instead, so the others fail too, at once, whether rank 0's process lives
on or not. Zero first by `LOCAL_RANK` (chapter 4, node-local storage) and
there is one rank 0 per node: each rank waits for all of them.
"""
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


@contextmanager
def torch_distributed_zero_first_safe(rank):
    """Like `torch_distributed_zero_first`, but if rank 0 raises inside
    the block, every other rank raises RankZeroFailed instead of waiting.

    Where the original has barriers, every rank puts a flag (1: done,
    0: failed) into one all_reduce with MIN: ranks other than 0 before
    the block, rank 0 after it. An all_reduce needs every rank's flag,
    so no rank leaves it before every rank 0 (one per node, by
    LOCAL_RANK) has finished its block, and the MIN says whether one
    failed. A broadcast from rank 0 would not do: gloo sends it along a
    tree, and a rank waits only for the ranks it receives from and
    sends to (chapter 4); with 4 ranks, rank 3 receives through rank 1
    and would read before node 1's rank 0, rank 2, has written.
    """
    if rank == -1:
        yield
        return
    # The flag lives where the backend can send it: CPU for gloo, this
    # rank's GPU for NCCL.
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    flag = torch.ones(1, dtype=torch.int32, device=device)
    if rank != 0:
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        if flag.item() == 0:
            raise RankZeroFailed("rank 0 failed inside "
                                 "torch_distributed_zero_first_safe")
        yield
        return
    try:
        yield
    except BaseException:
        flag.zero_()
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)   # tell the others
        raise
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    if flag.item() == 0:    # another node's rank 0 failed
        raise RankZeroFailed("another rank 0 failed inside "
                             "torch_distributed_zero_first_safe")
