"""Chapter 4 across nodes: rank 0 first, with the rank that fits the
storage. Each node has its own /tmp (node-local storage); one rank per
node must fill it, so the zero-first rank is LOCAL_RANK there, while a
directory every node sees (shared storage) needs one writer in the whole
job: RANK.

    torchrun --nnodes 2 --nproc-per-node 2 --node-rank N \\
        --master-addr HOST0 --master-port PORT -m ddpdemo.examples.node_cache

on each node N of two (the same command with N = 0 and 1). Each rank
prints the variables torchrun gave it and what it found in its node's
/tmp; `--by RANK` puts global rank 0 first instead of each LOCAL_RANK
0. Chapter 4 runs `cache_labels` on two nodes simulated on one machine
(ddpdemo.nodes); tests/test_multihost.py runs it on two hosts that each
have their own /tmp.
"""
import argparse
import os
import tempfile
import time

from ddpdemo import launch
from ddpdemo.ordering import torch_distributed_zero_first

LABELS = ("cat\n", "dog\n", "bird\n", "fish\n")
WRITE_S = 0.2   # s: a download takes a while


def cache_labels(zero_first_by, directory=None):
    """Rank 0 first, where "rank" is the variable `zero_first_by` names
    ("RANK" or "LOCAL_RANK"): the rank for which it is 0 writes the
    label cache into `directory` (default: this node's temporary
    directory), then every rank reads it. Returns what this rank did."""
    rank = int(os.environ[zero_first_by])
    directory = directory or tempfile.gettempdir()
    path = os.path.join(directory, "labels.cache")
    with torch_distributed_zero_first(rank):
        start = time.time()
        if rank == 0:
            time.sleep(WRITE_S)                 # downloading...
            with open(path, "w") as f:
                f.writelines(LABELS)
        found = None
        if os.path.exists(path):
            with open(path) as f:
                found = f.read().count("\n")
        end = time.time()
    return {"wrote": rank == 0, "found": found, "start": start, "end": end}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--by", choices=["LOCAL_RANK", "RANK"],
                        default="LOCAL_RANK")
    args, _ = parser.parse_known_args()
    launch.init()
    env = " ".join(f"{name}={os.environ.get(name)}"
                   for name in (*launch.VARIABLES, "NODE_RANK"))
    done = cache_labels(args.by)
    launch.print_ranked(env, f"wrote: {done['wrote']}, "
                        f"found {done['found']} of {len(LABELS)} labels")
    launch.finish()


if __name__ == "__main__":
    main()
