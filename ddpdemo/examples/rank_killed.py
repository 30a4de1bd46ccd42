"""The chapter "When the job itself fails", case 3: rank 1 is killed with
SIGKILL, as the Linux out-of-memory killer does, while rank 0 waits for it
in an all_reduce.

    torchrun --standalone --nproc-per-node 2 -m ddpdemo.examples.rank_killed

SIGKILL cannot be caught: rank 1 leaves no traceback and no error file,
only its exit status (-9). Rank 0 prints, on stderr, how long its
all_reduce waited and gloo's error, then waits to be stopped and prints
when torchrun's SIGTERM came, and dies of it. (A script that re-raised
would race torchrun to exit; waiting makes every run end the same way.)
"""
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

from ddpdemo import launch

WAIT_S = 60   # s: far longer than torchrun takes to stop rank 0


def main():
    rank, _, device = launch.init(timeout_s=60)
    dist.barrier()                       # both ranks are in the group
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)   # what the OOM killer sends
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1, device=device))
    except RuntimeError as error:
        failed = time.monotonic()
        print(f"[rank 0] all_reduce raised: took {failed - start:.1f} s",
              file=sys.stderr, flush=True)
        # gloo's reason, "Connection reset by peer" or "... closed by
        # peer" (both occur), on a line of its own for the tests.
        print(f"rank 0's error: {str(error).splitlines()[0]}",
              file=sys.stderr, flush=True)

    def stopped(signum, _frame):
        print(f"[rank 0] got SIGTERM: took {time.monotonic() - failed:.1f}"
              " s after its error", file=sys.stderr, flush=True)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)     # exit status -15, as unhandled

    signal.signal(signal.SIGTERM, stopped)
    time.sleep(WAIT_S)


if __name__ == "__main__":
    main()
