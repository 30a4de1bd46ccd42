"""ddpdemo.seeding: init_seeds against single-process references, on a
real gloo group, and the chapter's torchrun script.
Each test is bounded by pytest-timeout."""
import os
import pathlib
import random

import numpy as np
import pytest
import torch

from ddpdemo import data
from ddpdemo.seeding import flags, init_seeds

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLUSTER = dict(timeout=30)


def draws():
    """One number from each generator init_seeds seeds."""
    return (random.random(), float(np.random.random()),
            torch.rand(()).item())


def reference_draws(seed):
    """The same draws from fresh generators, without init_seeds."""
    g = torch.Generator().manual_seed(seed)
    return (random.Random(seed).random(),
            float(np.random.RandomState(seed).random_sample()),
            torch.rand((), generator=g).item())


@pytest.fixture
def restore_flags():
    saved = flags()
    yield
    torch.backends.cudnn.deterministic = saved["cudnn.deterministic"]
    torch.backends.cudnn.benchmark = saved["cudnn.benchmark"]
    torch.use_deterministic_algorithms(saved["deterministic_algorithms"])


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_init_seeds_matches_fresh_generators(seed, restore_flags):
    init_seeds(seed)
    assert draws() == reference_draws(seed)


def test_different_seeds_draw_differently(restore_flags):
    init_seeds(1)
    first = draws()
    init_seeds(2)
    assert all(a != b for a, b in zip(first, draws(), strict=True))


def test_deterministic_flags(restore_flags, monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", "")
    monkeypatch.setenv("PYTHONHASHSEED", "")
    torch.backends.cudnn.benchmark = True
    init_seeds(3, deterministic=True)
    assert flags() == {"cudnn.deterministic": True, "cudnn.benchmark": False,
                       "deterministic_algorithms": True}
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert os.environ["PYTHONHASHSEED"] == "3"
    with pytest.raises(RuntimeError, match="deterministic"):
        torch.zeros(4).put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))
    init_seeds(3)
    assert not flags()["deterministic_algorithms"]
    assert not flags()["cudnn.deterministic"]


def rank_draws(offset):
    import torch.distributed as dist
    init_seeds(offset * (1 + dist.get_rank()))
    return draws()




def test_shared_seed_same_draws_on_every_rank(cluster):
    results = cluster.run(rank_draws, 0)
    assert results == [reference_draws(0)] * 2


def test_seed_per_rank_matches_reference(cluster):
    results = cluster.run(rank_draws, 1)
    assert results == [reference_draws(1), reference_draws(2)]
    assert results[0] != results[1]


def expected_lines():
    """What the script must print, computed here in one process."""
    from ddpdemo.examples.seeds_mosaic import BATCH, draw_picks
    lines = []
    for name, seeds in (("init_seeds(0)", (0, 0)),
                        ("init_seeds(1 + RANK)", (1, 2))):
        picks = [draw_picks(seed, rank, 2) for rank, seed in enumerate(seeds)]
        for rank, p in enumerate(picks):
            lines.append(f"[rank {rank}] {name}: step 0 samples "
                         f"{p[0, :, 0].tolist()}, extras "
                         f"{p[0, :, 1:].tolist()}")
        everyone = torch.stack(picks)
        duplicated = data.duplicate_fraction(everyone).mean().item()
        distinct = data.distinct_extras(everyone).float().mean().item()
        independent = data.expected_distinct(64, 2 * BATCH * 3)
        lines.append(f"{name}: {duplicated:.2f} of extra picks duplicated "
                     f"across ranks; {distinct:.1f} distinct extra tiles "
                     f"per global batch (independent ranks: "
                     f"{independent:.1f})")
    return lines


# Under torchrun only: the classic launcher, which calls torchrun's own
# `run`, is tested once, on chapter 3's script (tests/test_collectives.py).
def test_example_script(restore_flags, torchrun):
    run = torchrun("-m", "ddpdemo.examples.seeds_mosaic")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines() == expected_lines()
    assert run.stdout.count("1.00 of extra picks duplicated") == 1
