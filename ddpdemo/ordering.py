"""Rank 0 first: one rank does a step (download, build a cache) while the
others wait, then all go on. Chapters 4 and 5.

    with torch_distributed_zero_first(rank):
        dataset = build_dataset()    # rank 0 first, then every other rank

`torch_distributed_zero_first` is the context manager as the source post
wrote it (current YOLOv5 takes `local_rank` and passes `device_ids` to its
barriers; chapter 4). Ranks other than 0 wait in a barrier *before* the
block, rank 0 enters a barrier *after* it, and the two barriers meet.
`rank = -1` means "not distributed" and takes no barrier at all. Every rank of the group must
enter the `with` block, or rank 0 waits after it forever (chapter 5).

If rank 0 raises inside the block, its barrier is never reached and the
others wait forever (chapter 4). `torch_distributed_zero_first_safe` sends
rank 0's outcome to the others instead, so they fail too, at once.
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
    """Raised on the waiting ranks when rank 0 failed inside the block."""


@contextmanager
def torch_distributed_zero_first_safe(rank):
    """Like `torch_distributed_zero_first`, but if rank 0 raises inside
    the block, every other rank raises RankZeroFailed instead of waiting.

    Rank 0 broadcasts one flag (1: done, 0: failed) where the original
    had a barrier; a broadcast waits for every rank just as a barrier
    does, and it carries the outcome. Rank 0 is the group's rank 0.
    """
    if rank == -1:
        yield
        return
    # The flag lives where the backend can send it: CPU for gloo, this
    # rank's GPU for NCCL.
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    flag = torch.ones(1, dtype=torch.int32, device=device)
    if rank != 0:
        dist.broadcast(flag, src=0)
        if flag.item() == 0:
            raise RankZeroFailed("rank 0 failed inside "
                                 "torch_distributed_zero_first_safe")
        yield
        return
    try:
        yield
    except BaseException:
        flag.zero_()
        dist.broadcast(flag, src=0)   # tell the others, then re-raise
        raise
    dist.broadcast(flag, src=0)
