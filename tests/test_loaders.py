"""ddpdemo.loaders on real gloo groups: sharding against a single-process
reference, the label cache written by rank 0 first, the val_dataloader
deadlock (bounded) and its rank=-1 fix."""
import os

import pytest
import torch

import ddpdemo
from ddpdemo.loaders import ToyDataset, create_dataloader


N, SEED = 20, 3


def reference(n=N, seed=SEED):
    """The made-up data, computed here without the package's code path."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, generator=g), torch.randint(4, (n,), generator=g)


def loader_items(loader):
    images, labels = zip(*loader, strict=True)
    return torch.cat(images), torch.cat(labels)


def train_shard():
    import torch.distributed as dist
    loader, _ = create_dataloader(dist.get_rank(), n=N, batch_size=4,
                                  seed=SEED)
    return loader_items(loader)


def build_with_cache(path):
    import torch.distributed as dist
    _, dataset = create_dataloader(dist.get_rank(), n=N, seed=SEED,
                                   cache_path=path)
    return dataset.from_cache, dataset.labels


def val_loader_on_rank_0(val_rank):
    """YOLOv5's train.py: a train loader everywhere, a val loader on rank 0
    alone, built with `val_rank` (the bug: rank; the fix: -1)."""
    import torch.distributed as dist
    rank = dist.get_rank()
    train_loader, _ = create_dataloader(rank, n=N, seed=SEED)
    val = None
    if rank in [-1, 0]:
        val_loader, _ = create_dataloader(
            rank if val_rank == "rank" else val_rank, n=N, seed=SEED + 1)
        val = loader_items(val_loader)
    return len(train_loader.sampler), val




def test_not_distributed_loader_matches_reference_without_a_group():
    import torch.distributed as dist
    assert not dist.is_initialized()
    images, labels = loader_items(create_dataloader(-1, n=N, seed=SEED)[0])
    ref_images, ref_labels = reference()
    assert torch.equal(images, ref_images)
    assert torch.equal(labels, ref_labels)


def test_train_loader_shards_match_reference(cluster):
    ref_images, ref_labels = reference()
    for rank, (images, labels) in enumerate(cluster.run(train_shard)):
        # DistributedSampler without shuffling: rank r gets r, r+2, ...
        assert torch.equal(images, ref_images[rank::2])
        assert torch.equal(labels, ref_labels[rank::2])


def test_rank_0_writes_the_cache_and_the_others_read_it(cluster, tmp_path):
    path = str(tmp_path / "labels.cache")
    (cached0, labels0), (cached1, labels1) = cluster.run(build_with_cache,
                                                         path)
    assert (cached0, cached1) == (False, True)
    assert torch.equal(labels0, reference()[1])
    assert torch.equal(labels1, labels0)
    assert os.path.exists(path)


def test_cache_is_read_back_unchanged(tmp_path):
    path = str(tmp_path / "labels.cache")
    first = ToyDataset(N, seed=SEED, cache_path=path)
    again = ToyDataset(N, seed=SEED + 1, cache_path=path)
    assert (first.from_cache, again.from_cache) == (False, True)
    assert torch.equal(again.labels, first.labels)


def test_val_loader_on_rank_0_deadlocks_naming_rank_0(cluster):
    with pytest.raises(ddpdemo.HangError) as info:
        cluster.run(val_loader_on_rank_0, "rank", timeout=3)
    assert info.value.ranks == [0]
    frames = info.value.stacks[0]
    assert frames[-1][2] == "barrier"
    assert any(f[2] == "torch_distributed_zero_first" for f in frames)


def test_rank_minus_one_fix_builds_the_whole_val_set_on_rank_0(cluster):
    (n0, val0), (n1, val1) = cluster.run(val_loader_on_rank_0, -1)
    assert (n0, n1) == (N // 2, N // 2)
    assert val1 is None
    ref_images, ref_labels = reference(seed=SEED + 1)
    assert torch.equal(val0[0], ref_images)
    assert torch.equal(val0[1], ref_labels)
