"""Chapter 4's program (reduce_mean) as a script: a mean across ranks,
and an accuracy that counts every sample exactly once.

    torchrun --standalone --nproc-per-node 2 \\
        -m ddpdemo.examples.reduce_mean_metrics

or, the classic way (`--local-rank` as an argument), from this folder:

    python -m torch.distributed.launch --nproc_per_node 2 \
        reduce_mean_metrics.py

gloo on CPU, NCCL when every rank has a GPU. A validation set of 11 samples
is split by DistributedSampler, which pads it so each rank gets the same
count; the padded repeats are dropped before [count, correct] is summed
with all_reduce. Output comes in rank order.
"""
import math

import torch
from torch.utils.data import DistributedSampler

from ddpdemo import launch
from ddpdemo.metrics import all_reduce_sum, padding_mask, reduce_mean

N_SAMPLES = 11


def validation_set():
    """Labels and a fixed "model"'s predictions, the same on every rank."""
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 2, (N_SAMPLES,), generator=g)
    predictions = torch.randint(0, 2, (N_SAMPLES,), generator=g)
    return labels, predictions


def main():
    rank, _, device = launch.init()
    labels, predictions = validation_set()
    sampler = DistributedSampler(range(N_SAMPLES), shuffle=False)
    idx = torch.tensor(list(sampler))
    correct = (predictions[idx] == labels[idx]).to(device)
    keep = ~padding_mask(sampler).to(device)

    loss = reduce_mean(torch.tensor(float(rank + 1), device=device))
    naive = all_reduce_sum(len(idx), correct.sum())
    count, total = all_reduce_sum(keep.sum(), correct[keep].sum())
    exact = (predictions == labels).double().mean().item()
    assert math.isclose(total / count, exact), (total, count, exact)
    launch.print_ranked(
        f"samples {idx.tolist()}, padding {(~keep).sum().item()}",
        f"reduce_mean of rank + 1: {loss.item():g}",
        f"with padding:  {naive[1]:g}/{naive[0]:g} correct",
        f"padding dropped: {total:g}/{count:g} correct "
        f"= {total / count:.4f} (one process: {exact:.4f})")
    launch.finish()


if __name__ == "__main__":
    main()
