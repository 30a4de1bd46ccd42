"""Reproduction, written anew for ddpdemo's tests (no line copied), of
the shape chapter 5 teaches, as YOLOv5's train.py would have it with
the validation loader given this process's rank: ultralytics/yolov5,
train.py with utils/dataloaders.py and utils/torch_utils.py, commit
5081342f04fb287fc2e5f2b5a4e06752b7937b1c (where the shipped code passes
rank=-1 instead; see yolov5_val_loader_after.py).

Rank 0 alone builds the validation loader; the loader's builder lets
the local leader prepare the data first, so it enters a barrier that
no other rank enters. Run by tests/test_check.py; each
`# expect: rule` comment names the finding the check must give on the
line below it, and no other.
"""
import os
from contextlib import contextmanager

import torch.distributed as dist

LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "-1"))
RANK = int(os.environ.get("RANK", "-1"))


@contextmanager
def leader_prepares_first(rank):
    """The others wait while the leader (rank 0) prepares; then the
    leader waits for them."""
    if rank > 0:
        dist.barrier()
    yield
    if rank == 0:
        dist.barrier()


def build_loader(folder, batch, rank=-1):
    with leader_prepares_first(rank):
        items = sorted(os.listdir(folder))
    return [items[i:i + batch] for i in range(0, len(items), batch)]


def main(folder, batch):
    train = build_loader(folder + "/train", batch, rank=LOCAL_RANK)
    val = None
    if RANK in {-1, 0}:
        # expect: collective-on-some-ranks
        val = build_loader(folder + "/val", 2 * batch, rank=LOCAL_RANK)
    return train, val
