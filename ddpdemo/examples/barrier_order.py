"""Chapters 3 and 4 as a script: rank 0 writes a cache file first, inside
torch_distributed_zero_first, and the other ranks read it after.

    torchrun --standalone --nproc-per-node 2 -m ddpdemo.examples.barrier_order

or the classic launcher, which passes `--local-rank` (ddpdemo.launch reads
it as well as LOCAL_RANK):

    python -m torch.distributed.launch --nproc_per_node 2 barrier_order.py

Add `--unordered` to drop the ordering and see the race: the other ranks
read while rank 0 is still writing. Rank 0 writes its file in slow pieces,
so the race shows every time. `--both` runs the race, then the ordered
pass, in one launch (chapter 4 shows both without starting torchrun
twice). Output comes in rank order.
"""
import argparse
import contextlib
import os
import shutil
import tempfile
import time

import torch.distributed as dist

from ddpdemo import launch
from ddpdemo.ordering import torch_distributed_zero_first

PIECES = ("alpha\n", "beta\n", "gamma\n", "delta\n")
PIECE_S = 0.1   # s: rank 0 pauses after each piece, like a slow download
CONNECT_S = 0.3  # s: long enough for the others, even on a busy machine,
                 # to look for the file before it exists


def write_slowly(path):
    time.sleep(CONNECT_S)        # connecting: the file does not exist yet
    with open(path, "w") as f:
        for piece in PIECES:
            f.write(piece)
            f.flush()
            time.sleep(PIECE_S)


def read(path):
    """What this rank finds: the number of complete pieces, or None."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read().count("\n")


def one_pass(rank, world_size, path, unordered):
    """Rank 0 writes `path`, every rank reads it; print what each found."""
    order = (contextlib.nullcontext() if unordered
             else torch_distributed_zero_first(rank))
    with order:
        start = time.time()
        if rank == 0:
            write_slowly(path)
        found = read(path)
        end = time.time()
    spans = [None] * world_size
    dist.all_gather_object(spans, (start, end))
    wrote_before = start >= spans[0][1] if rank else True
    launch.print_ranked(
        "wrote the cache" if rank == 0 else "read the cache",
        f"found {found} of {len(PIECES)} pieces" if found is not None
        else "found no file",
        f"started after rank 0 had finished: {wrote_before}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--unordered", action="store_true")
    parser.add_argument("--both", action="store_true")
    args, _ = parser.parse_known_args()   # leaves --local-rank to launch
    rank, world_size, _ = launch.init()
    # One directory for all ranks: rank 0 makes it and tells the others.
    where = [tempfile.mkdtemp(prefix="ddpdemo-") if rank == 0 else None]
    dist.broadcast_object_list(where, src=0)

    passes = [True, False] if args.both else [args.unordered]
    for unordered in passes:
        if args.both and rank == 0:
            print("without ordering:" if unordered
                  else "with torch_distributed_zero_first:", flush=True)
        name = "unordered.txt" if unordered else "ordered.txt"
        one_pass(rank, world_size, os.path.join(where[0], name), unordered)
    dist.barrier()              # nobody reads any more: rank 0 cleans up
    if rank == 0:
        shutil.rmtree(where[0])
    launch.finish()


if __name__ == "__main__":
    main()
