r"""Hangs the book explains, one scenario each, as a real job leaves them:
what `python -m ddpdemo.explain` is tested on (tests/test_explain.py),
beside chapter 5's and chapter 8's scripts (the zero-first barrier and
the gradient all_reduce with no partner).

    TORCH_FR_DUMP_TEMP_FILE=/tmp/fr/rank_ torchrun --standalone \
        --nproc-per-node 2 -m ddpdemo.examples.hang_patterns ddp-forward
    python -m ddpdemo.explain /tmp/fr

Scenarios (--timeout bounds each hang, 8 s by default):
  ddp-forward   rank 0 validates through the DDP wrapper, whose forward
                broadcasts buffers; rank 1 waits at the epoch's barrier
                (chapter 8, ddp-validation-rank0)
  rank0-branch  rank 0 alone all-reduces a metric inside `if rank == 0:`;
                rank 1 waits at the epoch's barrier
  wait          rank 0 starts an async all_reduce and waits for its
                result; rank 1 is still busy (sleeps), never calling it
  stall         rank 1 stalls (sleeps) before an all_reduce rank 0
                waits in: a test kills rank 1 with -9 there
  two-hangs     4 ranks, two pairs with a group each: in one, rank 0's
                rank-0-only all_reduce; in the other, rank 2's extra
                batch (DDP's gradient all_reduce with no partner)
  epoch-barrier a DDP job: rank 0 alone calls a barrier at the end of
                epoch 0 (`if rank == 0: dist.barrier()`), while rank 1
                goes on into epoch 1's backward (its gradient
                all_reduce): the ranks disagree at one number, which no
                `Join` ends (no-partner's near neighbour)
  rank0-broadcast  rank 0 alone broadcasts in `if rank == 0:`, outside
                DDP; rank 1 waits at the epoch's barrier (ddp-forward's
                near neighbour)
  wait-other    as `wait`, but rank 1 calls a barrier meanwhile: the
                ranks disagree (host-waits' near neighbour)
  slow-first    rank 0 is slow inside torch_distributed_zero_first
                (sleeps) while rank 1 waits at its first barrier: no
                deadlock, only an early stack (the zero-first stack's
                near neighbour)
  workers       chapter 5's deadlock with DataLoader workers running
                (num_workers=2, started at once, as YOLOv5's
                InfiniteDataLoader does): each rank has two child
                processes with its RANK and command line
"""
import argparse
import contextlib
import datetime
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from ddpdemo import launch
from ddpdemo.ddp import mlp
from ddpdemo.ordering import torch_distributed_zero_first

BUSY = 1.5   # a "busy" rank sleeps this many timeouts: past the hang


def ddp_forward(rank, timeout_s):
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(3, 4),
                                    torch.nn.BatchNorm1d(4)))
    if rank == 0:
        model.eval()
        with torch.no_grad():
            model(torch.ones(2, 3))          # broadcasts buffers
    dist.barrier()                           # end of epoch


def rank0_branch(rank, timeout_s, group=None):
    grads = torch.ones(8)
    dist.all_reduce(grads, group=group)      # a training step
    if rank == 0:
        metric = torch.tensor([3.0, 4.0])
        dist.all_reduce(metric, group=group)     # rank 0 alone
    dist.barrier(group=group)                # end of epoch


def wait(rank, timeout_s):
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank == 0:
        work = dist.all_reduce(t, async_op=True)
        work.wait()                          # the host needs the result
    else:
        time.sleep(BUSY * timeout_s)         # still busy


def stall(rank, timeout_s):
    t = torch.ones(4)
    for step in range(3):
        if rank == 1 and step == 2:
            time.sleep(BUSY * timeout_s)     # stalls; killed here
        dist.all_reduce(t)


def epoch_barrier(rank, timeout_s):
    model = DDP(mlp((4, 8, 2), seed=0))
    for epoch in range(2):
        for _ in range(2):
            model(torch.ones(2, 4)).pow(2).mean().backward()
        if epoch == 0 and rank == 0:
            dist.barrier()                   # rank 0 alone


def rank0_broadcast(rank, timeout_s):
    t = torch.ones(4)
    dist.all_reduce(t)                       # a training step
    if rank == 0:
        dist.broadcast(t, src=0)             # rank 0 alone
    dist.barrier()                           # end of epoch


def wait_other(rank, timeout_s):
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank == 0:
        work = dist.all_reduce(t, async_op=True)
        work.wait()                          # the host needs the result
    else:
        dist.barrier()                       # another collective


def slow_first(rank, timeout_s):
    with torch_distributed_zero_first(rank):
        if rank == 0:
            time.sleep(BUSY * timeout_s)     # building the data, slowly


def uneven(rank, group):
    """DDP over `group` (two ranks); the first has three batches."""
    first = dist.get_process_group_ranks(group)[0]
    model = DDP(mlp((4, 8, 2), seed=0), process_group=group)
    for _ in range(3 if rank == first else 2):
        model(torch.ones(2, 4)).pow(2).mean().backward()
    dist.barrier(group=group)                # end of epoch


def two_hangs(rank, timeout_s):
    bound = datetime.timedelta(seconds=timeout_s)   # else 30 minutes
    pairs = [dist.new_group([0, 1], timeout=bound),
             dist.new_group([2, 3], timeout=bound)]
    if rank in (0, 1):
        rank0_branch(rank, timeout_s, pairs[0])
    else:
        uneven(rank, pairs[1])


def workers(rank, timeout_s):
    def loader(rank, n, num_workers):
        with torch_distributed_zero_first(rank):
            data = torch.utils.data.TensorDataset(torch.arange(n * 1.0))
        return torch.utils.data.DataLoader(data, batch_size=4,
                                           num_workers=num_workers)

    batches = iter(loader(rank, 64, 2))      # workers start here
    if rank == 0:
        loader(rank, 32, 0)                  # the val loader: rank=rank
    dist.all_reduce(torch.ones(4))           # "training"
    del batches


SCENARIOS = {"ddp-forward": ddp_forward, "rank0-branch": rank0_branch,
             "wait": wait, "stall": stall, "two-hangs": two_hangs,
             "workers": workers, "epoch-barrier": epoch_barrier,
             "rank0-broadcast": rank0_broadcast, "wait-other": wait_other,
             "slow-first": slow_first}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--timeout", type=float, default=8.0)
    args, _ = parser.parse_known_args()
    rank, _, _ = launch.init(backend="gloo", timeout_s=args.timeout)
    report = launch.report_group()
    problem = None
    try:
        SCENARIOS[args.scenario](rank, args.timeout)
    except RuntimeError as error:     # the group's timeout ran out
        reason = launch.reason(error)
        problem = f"rank {rank} is stuck ({reason})"
        print(f"[rank {rank}] {problem}", file=sys.stderr, flush=True)
    with contextlib.suppress(RuntimeError):
        launch.exit_if_stuck(problem, report)
    launch.finish()


if __name__ == "__main__":
    main()
