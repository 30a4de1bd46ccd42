"""ddpdemo.data: the tiles, the mosaic, the measurements (against brute
force and simulation), DataLoader worker seeding, and what ranks draw on
a real gloo group. Each test is bounded by pytest-timeout."""
import itertools
import random

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler
from torch.utils.data._utils.worker import _generate_state

from ddpdemo import data
from ddpdemo.seeding import init_seeds



@pytest.fixture(scope="module")
def tiles():
    return data.make_tiles()
CLUSTER = dict(timeout=60)


def test_tiles_distinct_and_labelled(tiles):
    assert tiles.shape == (64, 3, data.TILE, data.TILE)
    assert tiles.dtype == torch.uint8
    assert len({t.numpy().tobytes() for t in tiles}) == 64
    for i in (0, 7, 42, 63):
        mask = data.digit_mask(f"{i:02d}")
        h, w = mask.shape
        s = data.TILE
        for y, x in ((3, 3), (3, s - w - 3), (s - h - 3, 3),
                     (s - h - 3, s - w - 3)):
            corner = tiles[i, :, y:y + h, x:x + w]
            ink = corner[:, mask][:, :1, None]
            assert (corner == ink).all(0).equal(mask)


def test_digit_mask_reads_the_font():
    mask = data.digit_mask("1", scale=1)
    assert mask.int().tolist() == [[0, 1, 0], [1, 1, 0], [0, 1, 0],
                                   [0, 1, 0], [1, 1, 1]]


def test_mosaic_picks_and_layout(tiles):
    s = data.TILE
    for seed in range(20):
        image, picks = data.load_mosaic(tiles, 5, random.Random(seed))
        ref = random.Random(seed)   # the same draws, in the same order
        yc = int(ref.uniform(s // 2, 3 * s // 2))
        xc = int(ref.uniform(s // 2, 3 * s // 2))
        assert picks == [5, *ref.choices(range(64), k=3)]
        assert image.shape == (3, 2 * s, 2 * s)
        # The four tiles meet at the centre, each with the right corner.
        assert image[:, yc - 1, xc - 1].equal(tiles[picks[0]][:, -1, -1])
        assert image[:, yc - 1, xc].equal(tiles[picks[1]][:, -1, 0])
        assert image[:, yc, xc - 1].equal(tiles[picks[2]][:, 0, -1])
        assert image[:, yc, xc].equal(tiles[picks[3]][:, 0, 0])
        # Outside the 2s x 2s square around the centre: the grey fill.
        if yc > s:
            assert (image[:, :yc - s] == data.FILL).all()
        if xc < s:
            assert (image[:, :, xc + s:] == data.FILL).all()


def brute_duplicates(picks):
    world_size, steps, batch, _ = picks.shape
    out = []
    for t in range(steps):
        hits = total = 0
        for r, b, k in itertools.product(range(world_size), range(batch),
                                         range(1, 4)):
            total += 1
            hits += any(picks[o, t, b, k] == picks[r, t, b, k]
                        for o in range(world_size) if o != r)
        out.append(hits / total)
    return out


@pytest.mark.parametrize("world_size", [2, 3])
def test_measures_match_brute_force(world_size):
    g = torch.Generator().manual_seed(world_size)
    picks = torch.randint(0, 8, (world_size, 5, 4, 4), generator=g)
    assert data.duplicate_fraction(picks).tolist() == pytest.approx(
        brute_duplicates(picks))
    distinct = [len({picks[r, t, b, k].item() for r in range(world_size)
                     for b in range(4) for k in range(1, 4)})
                for t in range(5)]
    assert data.distinct_extras(picks).tolist() == distinct


def test_identical_ranks_are_all_duplicates():
    picks = torch.randint(0, 64, (1, 3, 4, 4)).repeat(2, 1, 1, 1)
    assert data.duplicate_fraction(picks).eq(1).all()


@pytest.mark.parametrize("k", [3, 12, 24, 96])
def test_expected_distinct_matches_simulation(k):
    assert data.simulate_distinct(64, k, trials=5000) == pytest.approx(
        data.expected_distinct(64, k), abs=0.25)


def test_expected_duplicate_fraction_by_simulation():
    rng = random.Random(1)
    hits = sum(rng.randrange(64) == rng.randrange(64) for _ in range(50000))
    assert hits / 50000 == pytest.approx(
        data.expected_duplicate_fraction(64, 2), abs=0.003)


def test_worker_seeds_single_process():
    """num_workers=2 in one process: torch and random get base + id,
    numpy _generate_state(base, id), base drawn from torch's generator."""
    torch.manual_seed(5)
    base = torch.empty((), dtype=torch.int64).random_().item()
    torch.manual_seed(5)
    loader = DataLoader(data.WorkerSeeds(4), batch_size=None, num_workers=2)
    items = list(loader)
    assert sorted(item["worker"] for item in items) == [0, 0, 1, 1]
    for item in items:
        seed = base + item["worker"]
        assert item["seed"] == item["torch_initial_seed"] == seed
        assert item["random"] == random.Random(seed).random()
        np_ref = np.random.RandomState(_generate_state(base, item["worker"]))
        assert item["numpy"] == np_ref.random_sample()


def draw(seed_of_rank, num_workers=0, steps=4):
    import torch.distributed as dist
    init_seeds(seed_of_rank(dist.get_rank()))
    dataset = data.TileDataset()
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler,
                        num_workers=num_workers)
    return torch.stack([p for _, p in itertools.islice(loader, steps)])


def reference(seed, rank, steps=4):
    """What rank `rank` of 2 draws, computed in this process."""
    init_seeds(seed)
    dataset = data.TileDataset()
    sampler = DistributedSampler(dataset, num_replicas=2, rank=rank,
                                 shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler)
    return torch.stack([p for _, p in itertools.islice(loader, steps)])




def test_shared_seed_duplicates_on_ranks(cluster):
    picks = torch.stack(cluster.run(draw, lambda rank: 0))
    assert picks[0].equal(reference(0, 0)) and picks[1].equal(reference(0, 1))
    assert data.duplicate_fraction(picks).eq(1).all()
    assert not set(picks[0, ..., 0].flatten().tolist()) & set(
        picks[1, ..., 0].flatten().tolist())


def test_seed_per_rank_matches_reference(cluster):
    picks = torch.stack(cluster.run(draw, lambda rank: 1 + rank))
    assert picks[0].equal(reference(1, 0)) and picks[1].equal(reference(2, 1))
    assert data.duplicate_fraction(picks).mean() < 0.2


def test_workers_share_base_seed_across_ranks(cluster):
    shared = torch.stack(cluster.run(draw, lambda rank: 0, 2))
    assert data.duplicate_fraction(shared).eq(1).all()
    apart = torch.stack(cluster.run(draw, lambda rank: 1 + rank, 2))
    assert data.duplicate_fraction(apart).mean() < 0.2


def shard(seed_of_rank, n=64):
    import torch.distributed as dist
    return list(DistributedSampler(range(n), seed=seed_of_rank(
        dist.get_rank())))


def test_sampler_seed_must_be_shared(cluster):
    right = cluster.run(shard, lambda rank: 0)
    assert not set(right[0]) & set(right[1])
    assert sorted(right[0] + right[1]) == list(range(64))
    wrong = cluster.run(shard, lambda rank: 1 + rank)
    assert set(wrong[0]) & set(wrong[1])
