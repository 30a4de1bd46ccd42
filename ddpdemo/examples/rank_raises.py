"""The chapter "When the job itself fails", case 4: rank 1 raises while
rank 0 is busy computing; torchrun reports rank 1 as the root cause and
stops rank 0 with SIGTERM.

    torchrun --standalone --nproc-per-node 2 -m ddpdemo.examples.rank_raises

`@record` (torch.distributed.elastic.multiprocessing.errors) writes the
uncaught exception, with its traceback, to the file torchrun names in the
rank's TORCHELASTIC_ERROR_FILE, and torchrun's report quotes it. Rank 1
prints the end of that path first; rank 0 prints, on stderr, that
torchrun's SIGTERM reached it, then dies of it as a script without a
handler would.
"""
import os
import signal
import sys
import time

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from ddpdemo import launch
from ddpdemo.runtime.errors import signal_name

WORK_S = 60   # s: rank 0's "training", far longer than torchrun needs


def stopped(signum, _frame):
    print(f"[rank 0] got {signal_name(signum)} from torchrun",
          file=sys.stderr, flush=True)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)         # exit status -15, as unhandled


@record
def main():
    rank, _, _ = launch.init(timeout_s=60)
    dist.barrier()                       # both ranks are in the group
    if rank == 1:
        path = os.environ["TORCHELASTIC_ERROR_FILE"]   # set by torchrun
        tail = os.path.join(*path.split(os.sep)[-3:])  # attempt_0/1/...
        print(f"[rank 1] raises; TORCHELASTIC_ERROR_FILE: .../{tail}",
              file=sys.stderr, flush=True)
        raise ValueError("bad batch at step 3")
    signal.signal(signal.SIGTERM, stopped)
    time.sleep(WORK_S)                   # computing, in no collective


if __name__ == "__main__":
    main()
