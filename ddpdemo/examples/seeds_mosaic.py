"""Chapter 6 as a script: one seed on every rank makes every rank draw the
same mosaic tiles; a seed per rank (YOLOv5's `init_seeds(1 + RANK)`)
fixes it, while the sampler keeps one shared seed.

    torchrun --standalone --nproc-per-node 2 -m ddpdemo.examples.seeds_mosaic

or, the classic form (passes --local-rank, which ddpdemo.launch accepts):

    python -m torch.distributed.launch --nproc_per_node 2 \\
        ddpdemo/examples/seeds_mosaic.py

Prints each rank's extra tiles of the first step, then, on rank 0, the
fraction of extra picks duplicated across ranks and the distinct extra
tiles per global batch, against what independent ranks would give.
"""
import itertools

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

# Absolute imports: the classic launcher runs this file as a script.
from ddpdemo import data, launch
from ddpdemo.seeding import init_seeds

STEPS, BATCH = 8, 4


def draw_picks(seed, rank, world_size, steps=STEPS, batch_size=BATCH):
    """The tiles this rank's first `steps` mosaic batches use, seeded
    with `seed`; the sampler's seed is 0 on every rank. (steps, batch, 4)
    """
    init_seeds(seed)
    dataset = data.TileDataset()
    sampler = DistributedSampler(dataset, num_replicas=world_size,
                                 rank=rank, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    return torch.stack([picks for _, picks in
                        itertools.islice(loader, steps)])


def main():
    rank, world_size, device = launch.init()
    for name, seed in (("init_seeds(0)", 0), ("init_seeds(1 + RANK)",
                                                1 + rank)):
        picks = draw_picks(seed, rank, world_size).to(device)
        gathered = [torch.empty_like(picks) for _ in range(world_size)]
        dist.all_gather(gathered, picks)
        launch.print_ranked(f"{name}: step 0 samples "
                            f"{picks[0, :, 0].tolist()}, extras "
                            f"{picks[0, :, 1:].tolist()}")
        everyone = torch.stack(gathered).cpu()   # (world_size, S, B, 4)
        duplicated = data.duplicate_fraction(everyone).mean().item()
        distinct = data.distinct_extras(everyone).float().mean().item()
        independent = data.expected_distinct(len(data.TileDataset()),
                                             world_size * BATCH * 3)
        if rank == 0:
            print(f"{name}: {duplicated:.2f} of extra picks duplicated "
                  f"across ranks; {distinct:.1f} distinct extra tiles per "
                  f"global batch (independent ranks: {independent:.1f})",
                  flush=True)
    launch.finish()


if __name__ == "__main__":
    main()
