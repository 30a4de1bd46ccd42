"""The chapter "When the job itself fails", case 3: rank 1 is killed with
SIGKILL, as the Linux out-of-memory killer does, while rank 0 waits for it
in an all_reduce.

    torchrun --standalone --nproc-per-node 2 -m ddpdemo.examples.rank_killed

SIGKILL cannot be caught: rank 1 leaves no traceback and no error file,
only its exit status (-9). Rank 0 prints, on stderr, how long its
all_reduce waited and gloo's error, then waits to be stopped and prints
when torchrun's SIGTERM came (0.0 s if it came first), and dies of it.
(A script that re-raised would race torchrun to exit; waiting makes every
run end the same way.)
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
    # torchrun's SIGTERM can reach rank 0 before gloo's error does (a
    # loaded machine did): note when it came, act on it once the error
    # is printed, so every run prints the same lines in the same order.
    term = []
    signal.signal(signal.SIGTERM,
                  lambda signum, frame: term.append(time.monotonic()))
    dist.barrier()                       # both ranks are in the group
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)   # what the OOM killer sends
    start = failed = time.monotonic()
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
    deadline = time.monotonic() + WAIT_S
    while not term and time.monotonic() < deadline:
        time.sleep(0.05)
    if term:
        # 0.0 when it came first: stopped at once either way
        print(f"[rank 0] got SIGTERM: took {max(0.0, term[0] - failed):.1f}"
              " s after its error", file=sys.stderr, flush=True)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)   # exit status -15


if __name__ == "__main__":
    main()
