"""Chapter 1's program as a script: all_reduce sums, and the hand-made ring
gives the same sums ("Launching a real job" runs it under both launchers).

    torchrun --standalone --nproc-per-node 2 \\
        -m ddpdemo.examples.all_reduce_sums

or, from this folder, the classic launcher, which passes `--local-rank` as
an argument (ddpdemo.launch reads it, or torchrun's LOCAL_RANK):

    python -m torch.distributed.launch --nproc_per_node 2 all_reduce_sums.py

gloo on CPU, NCCL when every rank has a GPU. Rank r starts with
arange(2) + 1 + 2r; after dist.all_reduce every rank holds the column sums
(on 2 ranks: [1, 2] + [3, 4] = [4, 6]). Output comes in rank order; the
last line is the port the launcher gave the group (MASTER_PORT).
"""
import os
import sys

import torch
import torch.distributed as dist

from ddpdemo import launch
from ddpdemo.ring import RingStats, ring_all_reduce


# Read before launch.init(), which sets a default LOCAL_RANK of its own.
LAUNCHER_LOCAL_RANK = os.environ.get("LOCAL_RANK")


def local_rank_source():
    """Where the launcher put this rank's local rank: torch.distributed.launch
    passes it as an argument (and sets LOCAL_RANK too), torchrun only sets
    the LOCAL_RANK variable."""
    found = [arg for arg in sys.argv[1:]
             if arg.startswith(("--local-rank", "--local_rank"))]
    if LAUNCHER_LOCAL_RANK is not None:
        found.append(f"LOCAL_RANK={LAUNCHER_LOCAL_RANK}")
    return " and ".join(found) or "nowhere"


def main():
    rank, world_size, device = launch.init()
    tensor = torch.arange(2, dtype=torch.int64, device=device) + 1 + 2 * rank
    before = tensor.tolist()
    ring = tensor.clone()
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    # A single-process reference: the same sum computed on one rank.
    expected = sum(torch.arange(2) + 1 + 2 * r for r in range(world_size))
    assert tensor.cpu().equal(expected), (tensor, expected)

    stats = RingStats()
    ring_all_reduce(ring, stats=stats)
    assert ring.equal(tensor), (ring, tensor)
    launch.print_ranked(
        f"local_rank {launch.local_rank()} from {local_rank_source()}",
        f"backend     {dist.get_backend()} on {device}",
        f"before      {before}",
        f"all_reduce  {tensor.tolist()}",
        f"ring        {ring.tolist()}, sent {stats.bytes_sent} of "
        f"{stats.tensor_bytes} bytes",
        f"master      port {os.environ.get('MASTER_PORT')}")
    launch.finish()


if __name__ == "__main__":
    main()
