"""Seeding every random number generator a training script uses, in the
spirit of YOLOv5's `init_seeds`. Chapter 6 ("Seeds across ranks").

    init_seeds(0)              # every rank the same: the bug of chapter 7
    init_seeds(1 + rank)       # YOLOv5's fix; later `seed + 1 + RANK`

A script seeds Python's `random`, numpy's global generator and torch's
(`torch.manual_seed` seeds the CPU generator and every CUDA device's).
Under DDP every rank runs the same script, so the same seed on every rank
makes every rank draw the same "random" augmentations. `WorkerSeeds`
shows what torch does for DataLoader workers.
"""
import os
import random

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info


def init_seeds(seed=0, deterministic=False):
    """Seed random, numpy and torch with `seed`; set the determinism flags.

    deterministic=True trades speed for reproducibility: cuDNN may only
    use deterministic convolution algorithms and may not benchmark
    candidates (`cudnn.benchmark` off), and every torch op must be
    deterministic or raise (`torch.use_deterministic_algorithms`).
    deterministic=False turns both checks off and leaves
    `cudnn.benchmark` as the script set it (torch's default: off).
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)         # CPU and every CUDA device
    torch.backends.cudnn.deterministic = deterministic
    # Set only on a change: the setter's first call imports torch._dynamo
    # (1 to 2 s per process), which init_seeds(0) on every rank need not pay.
    if (torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled()) != (
            deterministic, False):
        torch.use_deterministic_algorithms(deterministic)
    if deterministic:
        torch.backends.cudnn.benchmark = False
        # cuBLAS needs a fixed workspace to be deterministic on CUDA >= 10.2
        # (read when CUDA first initialises, so set it before that).
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        # Only processes started after this (e.g. spawned DataLoader
        # workers) see it; this interpreter's hash seed is already fixed.
        os.environ["PYTHONHASHSEED"] = str(seed)


def flags():
    """The determinism settings now in force, for printing and asserts."""
    return {"cudnn.deterministic": torch.backends.cudnn.deterministic,
            "cudnn.benchmark": torch.backends.cudnn.benchmark,
            "deterministic_algorithms":
                torch.are_deterministic_algorithms_enabled()}


class WorkerSeeds(Dataset):
    """Reports, for each item, the DataLoader worker that loaded it, the
    seed torch gave that worker, and the first draw of each generator the
    worker owns (drawn once, at the worker's first item)."""

    def __init__(self, n=4):
        self.n = n
        self.first = None

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        info = get_worker_info()
        if self.first is None:   # each worker has its own copy of self
            self.first = (random.random(), float(np.random.random()),
                          torch.rand(()).item(), torch.initial_seed())
        return {"index": index, "worker": info.id if info else -1,
                "seed": info.seed if info else None, "random": self.first[0],
                "numpy": self.first[1], "torch": self.first[2],
                "torch_initial_seed": self.first[3]}
