"""Reproduction, written anew for ddpdemo's tests (no line copied), of
neuralmagic/sparseml's PR #29 fix in scripts/pytorch_vision.py, commit
b0fc81576f69c5211e1a1659f278d97c5a004de4: the main process builds the
validation set alone, with no rank-0-first context around it, so no
barrier waits for the ranks that returned. The check must be silent.
The unfixed shape is sparseml_val_set_before.py.
"""
from contextlib import contextmanager

import torch


@contextmanager
def local_zero_first(local_rank):
    """Non-zero local ranks wait until local rank 0 has done the work."""
    if local_rank not in (-1, 0):
        torch.distributed.barrier()
    yield
    if local_rank == 0:
        torch.distributed.barrier()


def make_train_set(args, open_images):
    with local_zero_first(args.local_rank):
        images = open_images(args.data_root, train=True)
    return images


def make_val_set(args, open_images):
    if args.only_sensitivity or not args.is_main_process:
        return None
    return open_images(args.data_root, train=False)
