"""Averages and metrics across ranks, done right. Chapter 4, "reduce_mean",
and chapter 10, "Evaluation".

    loss = reduce_mean(loss)                        # any dtype
    count, total = all_reduce_sum(count, total)     # exact global sums
    keep = ~padding_mask(sampler)                   # drop padded samples

Why each exists: `tensor /= world_size` fails on integer tensors, averaging
per-rank accuracies is wrong when ranks hold different amounts of data, and
DistributedSampler repeats samples so every rank gets the same count.
"""
import torch
import torch.distributed as dist

from .runtime.devices import current_device


def mean_dtype(dtype):
    """The dtype a mean of `dtype` values comes back in: floating and
    complex dtypes keep theirs; integers and bool become float64, which
    holds every int up to 2**53 exactly."""
    if dtype.is_floating_point or dtype.is_complex:
        return dtype
    return torch.float64


def reduce_mean(tensor, group=None):
    """The element-wise mean of `tensor` over the ranks of `group`.

    Returns a new tensor (the input is left alone), in `mean_dtype`: an
    int64 tensor gives a float64 mean instead of raising, as
    `tensor /= world_size` does, or truncating, as `//=` does.
    """
    out = tensor.detach().to(mean_dtype(tensor.dtype), copy=True)
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    out /= dist.get_world_size(group)
    return out


def all_reduce_sum(*values, group=None, device=None):
    """Sum plain numbers (or 0-d tensors) over the ranks, in one float64
    all_reduce; returns them as Python floats. E.g. a metric's
    [count, total], summed before dividing, is exact however unevenly the
    data is spread. device: where the packed tensor lives (default: this
    rank's device, cuda:LOCAL_RANK under NCCL)."""
    packed = torch.tensor([float(v) for v in values], dtype=torch.float64,
                          device=device or current_device())
    dist.all_reduce(packed, op=dist.ReduceOp.SUM, group=group)
    return packed.tolist()


def padding_mask(sampler):
    """True where this rank's sample from a DistributedSampler is padding.

    Without drop_last the sampler repeats the first samples until the
    length divides evenly; this rank's i-th sample sits at position
    i * num_replicas + rank of the padded list, so it is padding exactly
    when that position is past the dataset's end (shuffled or not).
    """
    i = torch.arange(sampler.num_samples)
    position = i * sampler.num_replicas + sampler.rank
    return position >= len(sampler.dataset)
