"""What a torchrun script needs, in one place: its rank, its group, and
printing in rank order. Used by every script in ddpdemo.examples (each
chapter shows the one for its topic).

    torchrun --standalone --nproc-per-node 2 \\
        -m ddpdemo.examples.all_reduce_sums

`--standalone` makes torchrun pick a free port itself: no fixed port. The
classic form from older posts also works:

    python -m torch.distributed.launch --nproc_per_node 2 --use-env main.py

torch.distributed.launch passes `--local-rank` (older versions
`--local_rank`) as an argument; torchrun sets the LOCAL_RANK variable.
`local_rank()` accepts both, so old and new scripts run unchanged.
"""
import argparse
import datetime
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

from .runtime import waiting
from .runtime.devices import (auto_backend, gpu_count, loopback_interface,
                              nccl_device)

# What torchrun sets that tells a rank where it runs (the agent's
# worker_env in torch/distributed/elastic/agent/server/
# local_elastic_agent.py); the others (MASTER_ADDR, TORCHELASTIC_*, ...)
# are the rendezvous's business. Chapter 4 (ddpdemo.nodes) plays them.
VARIABLES = ("RANK", "LOCAL_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE",
             "WORLD_SIZE")


def local_rank(argv=None):
    """LOCAL_RANK from `--local-rank`/`--local_rank` or the environment."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--local-rank", "--local_rank", type=int,
                        dest="local_rank", default=None)
    args, _ = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    if args.local_rank is not None:
        return args.local_rank
    return int(os.environ.get("LOCAL_RANK", 0))


def init(backend="auto", timeout_s=60.0, argv=None):
    """Form the group from torchrun's environment; returns (rank,
    world_size, device). NCCL when this rank has a GPU of its own, else gloo.
    The group timeout bounds every collective, so a deadlocked script ends.
    """
    lr = local_rank(argv)
    os.environ.setdefault("LOCAL_RANK", str(lr))
    master = os.environ.get("MASTER_ADDR", "127.0.0.1")
    if master in ("127.0.0.1", "localhost"):
        # Single machine: keep gloo's sockets on loopback.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", loopback_interface())
    if backend == "auto":
        backend = auto_backend([(gpu_count(), lr)])
    kwargs = {}
    device = torch.device("cpu")
    if backend == "nccl":
        device = kwargs["device_id"] = nccl_device(lr)
    if os.environ.get(DUMP_VAR):
        arm_flight_dump(int(os.environ.get("RANK", 0)))
    dist.init_process_group(backend, timeout=datetime.timedelta(
        seconds=timeout_s), **kwargs)
    return dist.get_rank(), dist.get_world_size(), device


# Where NCCL's watchdog writes each rank's Flight Recorder on a timeout
# (with TORCH_NCCL_DUMP_ON_TIMEOUT=1): this prefix, then the rank. gloo
# writes nothing itself (measured, torch 2.13), so with the variable set
# the scripts write the same files: when a rank got stuck
# (exit_if_stuck), when torchrun stops the job (SIGTERM), and on SIGUSR2.
# `python -m ddpdemo.explain DIR` reads them.
DUMP_VAR = "TORCH_FR_DUMP_TEMP_FILE"


def dump_flight_recorder(rank, stacks=True):
    """Write this rank's Flight Recorder dump (the pickle torch's analyzer
    reads) to $TORCH_FR_DUMP_TEMP_FILE<rank>. stacks=False from a thread
    while the main one may be stuck: resolving the call sites waits for
    it (ddpdemo.runtime.flight). Returns the path, or None if the variable is
    unset. Written whole or not at all (renamed into place)."""
    prefix = os.environ.get(DUMP_VAR)
    if not prefix:
        return None
    from torch._C._distributed_c10d import _dump_fr_trace
    raw = _dump_fr_trace(includeCollectives=True,
                         includeStackTraces=stacks, onlyActive=False)
    path = f"{prefix}{rank}"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        f.write(raw)
    os.replace(path + ".tmp", path)
    return path


def settle_flight_recorder(within=2.0):
    """Wait (at most `within` s) until the Flight Recorder has retired
    every collective: the error of a failed gloo collective can reach
    Python before its entry is retired, and a dump taken then shows it
    pending (a CI run's chapter 10 did). Only where every collective has
    ended (returned or raised), as after a caught timeout."""
    if not os.environ.get(DUMP_VAR):
        return
    from .runtime import flight

    def retired():
        dump = flight.record(stacks=False)["dump"]
        return all(e.get("retired", True) for e in dump.get("entries", []))
    waiting.until(retired, within)


def arm_flight_dump(rank):
    """Dump this rank's Flight Recorder on SIGUSR2 (and carry on) or on
    SIGTERM (then exit 143), even while the main thread is blocked in a
    collective: a Python handler would run only when the collective
    returns, so the signal wakes a thread instead, through the wakeup fd
    (written by the C-level handler, in whichever thread got it). Call
    from the main thread, before the group forms."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    for signum in (signal.SIGUSR2, signal.SIGTERM):
        signal.signal(signum, lambda *_: None)   # the thread acts

    def serve():
        while True:
            for signum in os.read(read_end, 64):
                if signum not in (signal.SIGUSR2, signal.SIGTERM):
                    continue
                try:
                    dump_flight_recorder(rank, stacks=False)
                finally:
                    if signum == signal.SIGTERM:
                        os._exit(128 + signal.SIGTERM)

    threading.Thread(target=serve, name="ddpdemo-fr-dump",
                     daemon=True).start()


def print_ranked(*lines):
    """Print each rank's lines on rank 0, in rank order, prefixed with the
    rank: output from several processes never interleaves. Collective: every
    rank must call it."""
    text = [str(line) for line in lines]
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, text)
    if dist.get_rank() == 0:
        for rank, rank_lines in enumerate(gathered):
            for line in rank_lines:
                print(f"[rank {rank}] {line}", flush=True)


EXIT_GRACE = 1.0   # s; see exit_if_stuck


def report_group(timeout_s=60.0):
    """A second gloo group, only for saying how a run ended: once a
    collective of the main group has timed out, that group cannot be used
    again (gloo closes its connections). Collective: every rank calls it,
    right after init(). Chapters 5 and 8's scripts use it."""
    return dist.new_group(backend="gloo",
                          timeout=datetime.timedelta(seconds=timeout_s))


def reason(error):
    """torch's message in a RuntimeError, as a sentence: its first line
    without the source location gloo puts first ("[.../x.cc:78] Timed out
    waiting ..." gives "Timed out waiting ..."). The scripts quote it when
    the group's timeout ran out (chapters 5 and 8)."""
    return str(error).splitlines()[0].split("] ")[-1]


def exit_if_stuck(problem, report):
    """Collective over `report`: each rank says whether it got stuck
    (`problem`: None, or the sentence it has already printed). If some
    rank did, the others say they were told, and every rank exits at
    once: status 1 for the stuck ranks, 0 for the others, so torchrun
    names the stuck ones. Returns if no rank got stuck."""
    rank = dist.get_rank()
    if problem is not None:   # first, in case the others are gone
        settle_flight_recorder()
        dump_flight_recorder(rank)   # if TORCH_FR_DUMP_TEMP_FILE is set
    problems = [None] * dist.get_world_size()
    dist.all_gather_object(problems, problem, group=report)
    stuck = [r for r, p in enumerate(problems) if p is not None]
    if not stuck:
        return
    if problem is None:
        dump_flight_recorder(rank)
    if rank not in stuck:
        who = (f"rank {stuck[0]} is" if len(stuck) == 1
               else f"ranks {stuck} are")
        print(f"[rank {rank}] told that {who} stuck; stopping",
              file=sys.stderr, flush=True)
    dist.barrier(group=report)
    if rank in stuck:
        # torchrun stops the other ranks (SIGTERM) as soon as one fails:
        # give them a moment to leave on their own first.
        time.sleep(EXIT_GRACE)
    # os._exit: a group whose collective timed out can abort the process
    # (SIGABRT) while the interpreter tears it down.
    os._exit(1 if rank in stuck else 0)


def finish():
    """Leave the group cleanly (torch warns if a script does not)."""
    if dist.is_initialized():
        dist.destroy_process_group()
