"""Reproduction, written anew for ddpdemo's tests (no line copied), of
chapter 5's fix as YOLOv5 ships it: ultralytics/yolov5, train.py with
utils/dataloaders.py and utils/torch_utils.py, commit
5081342f04fb287fc2e5f2b5a4e06752b7937b1c, where the validation loader
is built on rank 0 with rank=-1.

The builder is followed with rank -1, so its first-leader barriers are
never reached: the check must stay silent. The same file with the
process's rank is yolov5_val_loader_before.py.
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
        val = build_loader(folder + "/val", 2 * batch, rank=-1)
    return train, val
