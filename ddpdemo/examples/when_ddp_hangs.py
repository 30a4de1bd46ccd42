r"""Chapter 9's program as a script: uneven inputs hang DDP's backward;
Join fixes them.

    torchrun --standalone --nproc-per-node 2 \
        -m ddpdemo.examples.when_ddp_hangs            # hangs, ends in 5 s
    torchrun --standalone --nproc-per-node 2 \
        -m ddpdemo.examples.when_ddp_hangs --join     # exit 0

or `python -m torch.distributed.launch --nproc_per_node 2
when_ddp_hangs.py` from this folder.

Nine samples shared out by hand (every other sample per rank), batches of
2: rank 0 has three batches, rank 1 two. Rank 0's third backward
all-reduces gradients that no other rank sends. The group's timeout is
short (--timeout, 5 s), so that all_reduce fails instead of waiting 30
minutes: rank 0 says where it was stuck and exits with status 1; the
other ranks are told through a second group and exit 0. With --join the
loop runs inside torch.distributed.algorithms.Join: exit 0, the same
weights on every rank.
"""
import argparse
import contextlib
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms import Join
from torch.nn.parallel import DistributedDataParallel as DDP

from ddpdemo import launch
from ddpdemo.ddp import mlp

EXIT_GRACE = 1.0   # s; as in val_dataloader_deadlock.py


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--join", action="store_true")
    parser.add_argument("--timeout", type=float, default=5.0)
    args, _ = parser.parse_known_args()   # leaves --local-rank to launch
    rank, world_size, device = launch.init(timeout_s=args.timeout)
    # A second group only to report the outcome: once a collective has
    # timed out, the main group cannot be used again.
    report = dist.new_group(backend="gloo",
                            timeout=datetime.timedelta(seconds=60))

    data = torch.randn(9, 4, generator=torch.Generator().manual_seed(0))
    batches = torch.split(data[rank::world_size], 2)   # 3 on rank 0, 2 on 1
    model = DDP(mlp((4, 8, 2), seed=0, device=device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    outcome = ["ok"]
    try:
        with Join([model]) if args.join else contextlib.nullcontext():
            for step, x in enumerate(batches):
                opt.zero_grad()
                model(x.to(device)).pow(2).mean().backward()
                opt.step()
    except RuntimeError as error:   # the group's timeout ran out
        reason = str(error).splitlines()[0].split("] ")[-1]
        outcome = [f"rank {rank} is stuck in backward of batch {step + 1} "
                   f"of {len(batches)}: its gradient all_reduce was never "
                   f"matched ({reason})"]
        print(f"[rank {rank}] {outcome[0]}", file=sys.stderr, flush=True)
    # Everyone learns whether some rank failed (the failing rank speaks
    # first: all_gather_object on the report group).
    outcomes = [None] * world_size
    dist.all_gather_object(outcomes, outcome[0], group=report)
    failed = [r for r, o in enumerate(outcomes) if o != "ok"]
    if failed:
        if rank not in failed:
            print(f"[rank {rank}] told that rank {failed[0]} is stuck; "
                  f"stopping", file=sys.stderr, flush=True)
        dist.barrier(group=report)
        if rank in failed:
            time.sleep(EXIT_GRACE)   # let the others leave on their own
        # os._exit: a group whose collective timed out can abort the
        # process (SIGABRT) while the interpreter tears it down.
        os._exit(1 if rank in failed else 0)

    total = sum(p.detach().double().sum().item()
                for p in model.module.parameters())
    launch.print_ranked(f"{len(batches)} batches, weights sum {total:.6f}")
    launch.finish()


if __name__ == "__main__":
    main()
