r"""Chapter 12's first lesson (When DDP hangs) as a script, run by
tests/test_ddp_examples.py: uneven inputs hang DDP's backward; Join fixes
them.

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
import sys

import torch
from torch.distributed.algorithms import Join
from torch.nn.parallel import DistributedDataParallel as DDP

from ddpdemo import launch
from ddpdemo.ddp import mlp


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--join", action="store_true")
    parser.add_argument("--timeout", type=float, default=5.0)
    args, _ = parser.parse_known_args()   # leaves --local-rank to launch
    rank, world_size, device = launch.init(timeout_s=args.timeout)
    report = launch.report_group()   # to say how it ended, see below

    data = torch.randn(9, 4, generator=torch.Generator().manual_seed(0))
    batches = torch.split(data[rank::world_size], 2)   # 3 on rank 0, 2 on 1
    model = DDP(mlp((4, 8, 2), seed=0, device=device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    problem = None
    try:
        with Join([model]) if args.join else contextlib.nullcontext():
            for step, x in enumerate(batches):  # noqa: B007 (read below)
                opt.zero_grad()
                model(x.to(device)).pow(2).mean().backward()
                opt.step()
    except RuntimeError as error:   # the group's timeout ran out
        reason = launch.reason(error)
        problem = (f"rank {rank} is stuck in backward of batch {step + 1} "
                   f"of {len(batches)}: its gradient all_reduce was never "
                   f"matched ({reason})")
        print(f"[rank {rank}] {problem}", file=sys.stderr, flush=True)
    launch.exit_if_stuck(problem, report)

    total = sum(p.detach().double().sum().item()
                for p in model.module.parameters())
    launch.print_ranked(f"{len(batches)} batches, weights sum {total:.6f}")
    launch.finish()


if __name__ == "__main__":
    main()
