"""ddpdemo.metrics on a real 2-rank gloo group (reduce_mean, all_reduce_sum)
and single-process (padding_mask against DistributedSampler itself), and
chapter 4's script, ddpdemo.examples.reduce_mean_metrics, under torchrun."""
import collections

import pytest
import torch
from torch.utils.data import DistributedSampler

from ddpdemo.metrics import mean_dtype, padding_mask

CLUSTER = dict(timeout=30)


def rank_values(rank, dtype):
    return (torch.tensor([1, 2, 7]) + 3 * rank).to(dtype)


def mean_on_ranks(dtype):
    import torch.distributed as dist
    from ddpdemo.metrics import reduce_mean
    x = rank_values(dist.get_rank(), dtype)
    before = x.clone()
    mean = reduce_mean(x)
    return mean, torch.equal(x, before)


def sums_on_ranks(per_rank):
    import torch.distributed as dist
    from ddpdemo.metrics import all_reduce_sum
    return all_reduce_sum(*per_rank[dist.get_rank()])




@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool,
                                   torch.float32, torch.float64,
                                   torch.complex64])
def test_reduce_mean_any_dtype_matches_single_process_mean(cluster, dtype):
    results = cluster.run(mean_on_ranks, dtype)
    stacked = torch.stack([rank_values(r, dtype) for r in range(2)])
    reference = stacked.to(mean_dtype(dtype)).sum(0) / 2
    for mean, untouched in results:
        assert untouched
        assert mean.dtype == mean_dtype(dtype)
        torch.testing.assert_close(mean, reference)


def test_int64_mean_is_not_truncated(cluster):
    mean, _ = cluster.run(mean_on_ranks, torch.int64)[0]
    # [1, 2, 7] and [4, 5, 10]: 2.5, 3.5, 8.5, where // would give 2, 3, 8
    assert mean.tolist() == [2.5, 3.5, 8.5]


def test_mean_dtype():
    assert mean_dtype(torch.int64) == torch.float64
    assert mean_dtype(torch.bool) == torch.float64
    assert mean_dtype(torch.float16) == torch.float16
    assert mean_dtype(torch.complex128) == torch.complex128


def test_all_reduce_sum_gives_exact_accuracy_with_unequal_data(cluster):
    per_rank = [(10, 9), (2, 0)]     # (count, correct) on each rank
    results = cluster.run(sums_on_ranks, per_rank)
    assert results == [[12.0, 9.0], [12.0, 9.0]]
    count, total = results[0]
    mean_of_accuracies = (9 / 10 + 0 / 2) / 2
    assert total / count == pytest.approx(0.75)
    assert mean_of_accuracies != pytest.approx(total / count)


@pytest.mark.parametrize("n", [1, 2, 5, 10, 11, 12, 13])
@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("shuffle", [False, True])
def test_padding_mask_keeps_every_sample_exactly_once(n, world_size,
                                                      shuffle):
    kept = collections.Counter()
    padded = 0
    for rank in range(world_size):
        sampler = DistributedSampler(range(n), num_replicas=world_size,
                                     rank=rank, shuffle=shuffle, seed=3)
        indices = list(sampler)
        mask = padding_mask(sampler)
        assert mask.shape == (len(indices),)
        kept.update(i for i, pad in zip(indices, mask.tolist(), strict=True)
                    if not pad)
        padded += int(mask.sum())
    assert kept == collections.Counter(range(n))
    assert padded == sampler.total_size - n


def test_padding_mask_with_drop_last_is_all_false():
    sampler = DistributedSampler(range(11), num_replicas=2, rank=1,
                                 shuffle=False, drop_last=True)
    assert not padding_mask(sampler).any()
    assert len(list(sampler)) == 5


def test_reduce_mean_metrics_under_torchrun(torchrun):
    proc = torchrun("-m", "ddpdemo.examples.reduce_mean_metrics")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 8
    prefixes = [ln.split("]")[0] + "]" for ln in lines]
    assert prefixes == ["[rank 0]"] * 4 + ["[rank 1]"] * 4
    # Rank 1's last sample is sample 0 again: one padded sample in all.
    assert lines[0] == "[rank 0] samples [0, 2, 4, 6, 8, 10], padding 0"
    assert lines[4] == "[rank 1] samples [1, 3, 5, 7, 9, 0], padding 1"
    assert all(ln.endswith("reduce_mean of rank + 1: 1.5")
               for ln in (lines[1], lines[5]))
    assert "/11 correct" in lines[3]
