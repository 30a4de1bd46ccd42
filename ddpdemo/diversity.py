"""How random the ranks' augmentations really are: which mosaic picks
repeat across ranks, how many distinct tiles a global batch uses, what
independent ranks would give, and a figure of it. Chapter 6.

picks is (world_size, steps, batch, 4) throughout, the sample first.
"""
import random

import torch

from .figures import new_figure, rank_color

def stack_picks(results):
    """(world_size, steps, batch, 4) picks from what each rank returned:
    its list of (images, picks) batches."""
    return torch.stack([torch.stack([p for _, p in batches])
                        for batches in results])


def duplicate_fraction(picks):
    """Per step, the fraction of extra-tile picks (all ranks) equal to the
    pick in the same batch slot and position on some other rank. (steps,)
    """
    extras = picks[..., 1:]                               # (W, S, B, 3)
    same = extras.unsqueeze(0) == extras.unsqueeze(1)     # (W, W, S, B, 3)
    world_size = picks.shape[0]
    same[range(world_size), range(world_size)] = False    # not yourself
    return same.any(dim=1).float().mean(dim=(0, 2, 3))


def distinct_extras(picks):
    """Per step, how many different tiles the global batch's extra picks
    use. (steps,) int64."""
    extras = picks[..., 1:].transpose(0, 1).flatten(1)    # (S, W*B*3)
    return torch.tensor([len(set(step.tolist())) for step in extras])


def expected_duplicate_fraction(n, world_size):
    """If ranks draw independently and uniformly from n tiles: chance that
    at least one of the other world_size - 1 ranks drew the same tile."""
    return 1 - (1 - 1 / n) ** (world_size - 1)


def expected_distinct(n, k):
    """Expected number of distinct tiles among k uniform picks, with
    replacement, from n: each tile is missed with chance (1 - 1/n)^k."""
    return n * (1 - (1 - 1 / n) ** k)


def simulate_distinct(n, k, trials=20000, seed=0):
    """expected_distinct by simulation, with random.choices like the
    mosaic; a check on the formula."""
    rng = random.Random(seed)
    population = range(n)
    total = sum(len(set(rng.choices(population, k=k)))
                for _ in range(trials))
    return total / trials


def diversity_figure(distinct, independent, shared, title=""):
    """Distinct extra tiles per global batch, step by step, against the
    expected count for independent ranks and for ranks sharing a seed."""
    fig, axes = new_figure(height=2.6)
    ax = axes[0, 0]
    steps = range(len(distinct))
    ax.bar(steps, distinct.tolist(), color=rank_color(0), alpha=0.8,
           label="measured")
    ax.axhline(independent, color="black", ls="--",
               label=f"independent ranks: {independent:.1f}")
    ax.axhline(shared, color=rank_color(3), ls=":",
               label=f"one shared seed: {shared:.1f}")
    ax.set_xlabel("step")
    ax.set_ylabel("distinct extra tiles")
    ax.set_ylim(0, 1.4 * max(distinct.max().item(), independent))
    ax.set_title(title)
    ax.legend(loc="upper center", fontsize=8, ncol=3)
    return fig
