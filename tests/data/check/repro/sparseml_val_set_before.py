"""Reproduction, written anew for ddpdemo's tests (no line copied), of
the bug neuralmagic/sparseml's PR #29 fixed in scripts/pytorch_vision.py
(with torch_distributed_zero_first of
src/sparseml/pytorch/utils/helpers.py), before its fix: the parent of
commit b0fc81576f69c5211e1a1659f278d97c5a004de4.

Every rank but the main process returns before the validation set is
built; the main process then builds it inside a rank-0-first context
whose closing barrier waits for ranks that have already left. Run by
tests/test_check.py; each `# expect: rule` comment names the finding
the check must give on the line below it, and no other.
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


def make_val_set(args, open_images):
    if args.only_sensitivity or not args.is_main_process:
        return None
    # expect: collective-on-some-ranks
    with local_zero_first(args.local_rank):
        images = open_images(args.data_root, train=False)
    return images
