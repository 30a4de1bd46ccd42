"""Waiting on the ranks with a bound, and saying what happened: which
ranks finished, failed, died or are stuck, what they printed (in rank
order), and where a stuck one is blocked. Plumbing for ddpdemo.runtime.cluster
(chapter 0).
"""
import contextlib
import os
import signal
import sys
import time
import traceback

from . import processes, waiting
from .errors import Failure, parse_stack

FAILURE_GRACE = 1.0   # s; after one rank fails, how long the rest get
POLL = 0.01           # s; how often a wait looks at the ranks


def wait(ars, timeout, is_alive, grace=FAILURE_GRACE):
    """Wait on one AsyncResult per rank until all are done, `timeout`
    passes, or a rank failed or died and the rest had `grace` seconds
    (longer for remote ranks, whose death is noticed by a heartbeat,
    while their peers' collectives fail at once).

    is_alive(rank) says whether a rank's process still runs. Returns the
    lists (pending, failed, dead) of ranks.
    """
    ranks = range(len(ars))
    first_failure = None
    seen = {}

    def settled():
        nonlocal first_failure
        done = [r for r in ranks if ars[r].ready()]
        failed = [r for r in done if not ars[r].successful()]
        dead = [r for r in ranks if r not in done and not is_alive(r)]
        pending = [r for r in ranks if r not in done and r not in dead]
        seen["state"] = pending, failed, dead
        if not pending:
            return True
        now = time.monotonic()
        if (failed or dead) and first_failure is None:
            first_failure = now
        return first_failure is not None and now - first_failure > grace

    waiting.until(settled, timeout, every=POLL)
    return seen["state"]


def echo_output(ars):
    """Print each finished rank's stdout, then stderr, in rank order, each
    line prefixed with its rank, so output is the same on every run."""
    for ar in ars:
        if ar.ready():
            # Output can trail the result by a moment.
            with contextlib.suppress(Exception):
                ar.wait_for_output(timeout=2)
    for stream, target in (("stdout", sys.stdout), ("stderr", sys.stderr)):
        for rank, ar in enumerate(ars):
            for line in (getattr(ar, stream, "") or "").splitlines():
                print(f"[rank {rank}] {line}", file=target)
    sys.stdout.flush()


def describe_error(ar):
    """What a failed rank raised, as a Failure (ddpdemo.runtime.errors):
    the exception's type name, message and traceback text, as the rank
    sent them (ipyparallel's RemoteError carries ename, evalue and the
    rank's formatted traceback)."""
    try:
        ar.get(timeout=0)
    except Exception as exc:
        if hasattr(exc, "ename"):
            return Failure(exc.ename, str(exc.evalue),
                           getattr(exc, "traceback", None) or "")
        return Failure(type(exc).__name__, str(exc),
                       "".join(traceback.format_exception(exc)))
    return Failure(None, "no error")


def parse_dumps(dumps, ranks):
    """{rank: frames} from thread dumps the ranks sent themselves
    (ddpdemo.runtime.flight), for ranks with no local pid to signal: on another
    host. None where no dump came."""
    return {r: parse_stack(dumps[r]) if dumps.get(r) else None
            for r in ranks}


QUIET = 10         # polls of 50 ms a dump without the reader's frames stays
                   # unchanged before it counts as finished (a stuck rank
                   # is in them, so this wait is the rare case)
DUMP_POLL = 0.05   # s


def signal_dumps(targets):
    """Ask stuck engines for their stacks, all at once, without waiting:
    `targets` is {rank: (pid, dump file)}. Each engine registered
    faulthandler for SIGUSR1 writing to its file; the dump is appended,
    so each file's size before the signal is kept. Returns {rank: (path,
    size before, pid)} for the engines signalled (a gone one is left
    out)."""
    sent = {}
    for rank, (pid, path) in targets.items():
        before = os.path.getsize(path) if os.path.exists(path) else 0
        try:
            os.kill(pid, signal.SIGUSR1)
        except ProcessLookupError:
            continue
        sent[rank] = (path, before, pid)
    return sent


def read_dumps(sent, wait=5.0):
    """{rank: frames of its reader code, outermost first; [] if it was not
    running the reader's code; None if no dump came} for the dumps
    `signal_dumps` asked for, read side by side within one `wait`.

    faulthandler writes line by line; on a loaded machine it can pause
    longer than one poll mid-dump, and the signal may land on any thread,
    so no marker line can be relied on to come last. A dump is finished
    once the reader's frames are in and the file is still, or once it has
    been still for QUIET polls.

    A dump can also kill its process: CPython 3.11's faulthandler
    segfaults now and then while walking a thread that is entering a
    function (tests/test_watch.py shows it). A rank that died during its
    dump wrote all it will write; without the reader's frames its dump
    says nothing about where it was, so it counts as no dump (None), and
    the caller keeps the stack the rank's responder sent.
    """
    size = {r: before for r, (_, before, _) in sent.items()}
    still = dict.fromkeys(sent, 0)
    gone = set()
    done = {}

    def all_finished():
        for r, (path, before, pid) in sent.items():
            if r in done:
                continue
            # alive first: once the process is gone, its file is final
            if not processes.alive(pid):
                gone.add(r)
                done[r] = True
                continue
            now = os.path.getsize(path)
            still[r] = still[r] + 1 if now > before and now == size[r] else 0
            size[r] = now
            if still[r] and (parse_stack(_read_from(path, before))
                             or still[r] >= QUIET):
                done[r] = True
        return len(done) == len(sent)

    waiting.until(all_finished, wait, every=DUMP_POLL)
    out = {}
    for r, (path, before, _) in sent.items():
        dump = _read_from(path, before)
        frames = parse_stack(dump) if dump else None
        out[r] = None if r in gone and not frames else frames
    return out


def dump_stack(pid, path, wait=5.0):
    """Frames of one stuck engine's reader code (see read_dumps)."""
    sent = signal_dumps({0: (pid, path)})
    return read_dumps(sent, wait).get(0) if sent else None


def _read_from(path, offset):
    with open(path) as f:
        f.seek(offset)
        return f.read()
