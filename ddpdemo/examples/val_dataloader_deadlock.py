r"""Chapter 10 (Evaluation) as a script: the val_dataloader deadlock,
ended in seconds.

    torchrun --standalone --nproc-per-node 2 \
        -m ddpdemo.examples.val_dataloader_deadlock          # hangs, ends
    torchrun --standalone --nproc-per-node 2 \
        -m ddpdemo.examples.val_dataloader_deadlock --fix    # exit 0

or `python -m torch.distributed.launch --nproc_per_node 2
val_dataloader_deadlock.py` (ddpdemo.launch reads `--local-rank` too).

Every rank builds the train loader; rank 0 alone builds the val loader
with `create_dataloader(rank, ...)`, whose torch_distributed_zero_first
makes rank 0 wait in a barrier that no other rank enters. The group's
timeout is short (--timeout, 5 s), so rank 0's barrier fails instead of
waiting for 30 minutes: rank 0 says where it was stuck and exits with
status 1; the other ranks are told through a second group and exit 0.
torchrun then names rank 0 as the failed rank and exits non-zero.
With --fix, rank 0 builds its loader with rank=-1: exit 0.
"""
import argparse
import sys

from ddpdemo import launch
from ddpdemo.loaders import create_dataloader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fix", action="store_true")
    parser.add_argument("--timeout", type=float, default=5.0)
    args, _ = parser.parse_known_args()   # leaves --local-rank to launch
    rank, _, _ = launch.init(timeout_s=args.timeout)
    report = launch.report_group()   # to say how it ended, see below

    train_loader, _ = create_dataloader(rank, n=64)
    problem = None
    if rank in [-1, 0]:
        try:
            val_rank = -1 if args.fix else rank
            val_loader, _ = create_dataloader(val_rank, n=32)
        except RuntimeError as error:   # the group's timeout ran out
            reason = launch.reason(error)
            problem = (f"rank 0 is stuck: its barrier after `yield` in "
                       f"torch_distributed_zero_first was never matched "
                       f"({reason})")
            print(f"[rank 0] {problem}", file=sys.stderr, flush=True)
    launch.exit_if_stuck(problem, report)

    launch.print_ranked(
        f"train loader: {len(train_loader)} batches (its shard)",
        *([f"val loader: {len(val_loader)} batches (all of it)"]
          if rank == 0 else []))
    launch.finish()


if __name__ == "__main__":
    main()
