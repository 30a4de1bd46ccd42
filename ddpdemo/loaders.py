"""A small stand-in for YOLOv5's `create_dataloader`, on made-up data in
memory (no downloads). Chapter 10 (Evaluation) uses it to reproduce the
val_dataloader deadlock; the torchrun example val_dataloader_deadlock.py
too.

    train_loader, _ = create_dataloader(rank, n=64)
    if rank in [-1, 0]:
        val_loader, _ = create_dataloader(rank, n=32)    # deadlocks
        val_loader, _ = create_dataloader(-1, n=32)      # the fix

Like YOLOv5's, it builds the dataset inside torch_distributed_zero_first
(rank 0 builds the label cache, the others then read it) and shards it
with a DistributedSampler unless rank is -1.
"""
import os

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from .ordering import torch_distributed_zero_first


class ToyDataset(Dataset):
    """n made-up "images" (3 numbers each) and integer labels, from a
    seed. With `cache_path`, the labels are read from that file if it
    exists, else computed and written there: like YOLOv5's labels cache,
    which rank 0 must write before the others read it.
    """

    def __init__(self, n, seed=0, cache_path=None, num_classes=4):
        g = torch.Generator().manual_seed(seed)
        self.images = torch.randn(n, 3, generator=g)          # (n, 3)
        self.from_cache = bool(cache_path) and os.path.exists(cache_path)
        if self.from_cache:
            self.labels = torch.load(cache_path)
        else:
            self.labels = torch.randint(num_classes, (n,), generator=g)
            if cache_path:
                torch.save(self.labels, cache_path)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


def create_dataloader(rank, n=64, batch_size=8, seed=0, cache_path=None,
                      shuffle=False):
    """(loader, dataset), as YOLOv5's `create_dataloader` returns them.

    rank: this process's rank, or -1 for "not distributed": then no
    barrier is taken and no sampler shards the data, so it is safe to call
    on one rank alone. Any other rank must be called on every rank.
    """
    with torch_distributed_zero_first(rank):
        dataset = ToyDataset(n, seed=seed, cache_path=cache_path)
    sampler = (None if rank == -1
               else DistributedSampler(dataset, shuffle=shuffle))
    # num_workers=0: worker processes would only add noise to the lesson.
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler,
                        shuffle=shuffle and sampler is None, num_workers=0)
    return loader, dataset
