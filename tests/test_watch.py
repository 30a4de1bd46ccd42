"""ddpdemo.runtime.watch: bounded waits on the ranks, output in rank order, one
line per failure, and a stuck process's stack read from a real dump.
Results are stand-ins with ipyparallel's AsyncResult methods."""
import os
import subprocess
import sys
import time

import pytest

from ddpdemo.runtime import engine, processes, waiting, watch

pytestmark = pytest.mark.fast


# No upper bound in seconds below (a loaded 2-core machine breaks them):
# each wait is given a long timeout, and the test checks it returned
# well before it, or after what it had to wait for.
LONG = 120.0


def test_wait_returns_at_once_when_every_rank_is_done(Result):
    start = time.monotonic()
    assert watch.wait([Result(), Result()], LONG, lambda r: True) == (
        [], [], [])
    assert time.monotonic() - start < LONG / 2


def test_wait_gives_up_at_the_timeout_naming_the_pending_rank(Result):
    start = time.monotonic()
    pending, failed, dead = watch.wait([Result(), Result(done=False)], 0.3,
                                       lambda r: True)
    assert (pending, failed, dead) == ([1], [], [])
    assert time.monotonic() - start >= 0.3


def test_after_a_failure_the_rest_get_only_the_grace(Result):
    start = time.monotonic()
    pending, failed, _ = watch.wait(
        [Result(error=ValueError("x")), Result(done=False)], LONG,
        lambda r: True)
    assert (pending, failed) == ([1], [0])
    assert watch.FAILURE_GRACE <= time.monotonic() - start < LONG / 2


def test_a_dead_rank_is_not_waited_for(Result):
    start = time.monotonic()
    pending, _, dead = watch.wait([Result(done=False)] * 2, LONG,
                                       lambda r: r == 0)
    assert (pending, dead) == ([0], [1])
    # The live rank gets the grace after the death, not the timeout.
    assert watch.FAILURE_GRACE <= time.monotonic() - start < LONG / 2


def test_echo_output_prefixes_ranks_in_rank_order(capsys, Result):
    watch.echo_output([Result(stdout="a\nb\n", stderr="warn\n"),
                       Result(stdout="c\n"), Result(done=False, stdout="x")])
    out, err = capsys.readouterr()
    assert out.splitlines() == ["[rank 0] a", "[rank 0] b", "[rank 1] c",
                                "[rank 2] x"]
    assert err.splitlines() == ["[rank 0] warn"]


def test_describe_error_keeps_the_type_message_and_traceback(Result):
    class RemoteError(Exception):
        ename, evalue = "KeyError", "'missing'\nmore lines"
        traceback = "Traceback (most recent call last):\n  ...\nKeyError"
    remote = watch.describe_error(Result(error=RemoteError()))
    assert (remote.type, remote.message, remote.traceback) == (
        "KeyError", "'missing'\nmore lines", RemoteError.traceback)
    assert remote.line == "KeyError: 'missing'"     # what RankError shows
    local = watch.describe_error(Result(error=ValueError("bad")))
    assert (local.type, local.message, local.line) == (
        "ValueError", "bad", "ValueError: bad")
    assert local.traceback.startswith("Traceback (most recent call last)")
    assert local.traceback.rstrip().endswith("ValueError: bad")
    assert watch.describe_error(Result()).line == "no error"


# "ready" comes from a second thread once the main thread is inside the
# wait: printed before it, the signal could land while the main thread is
# still on its way there, and the dump would end elsewhere. After "ready"
# that thread only blocks in C (a lock it already holds): no frame of its
# own starts while the dump walks it, the moment at which CPython 3.11's
# faulthandler can crash (see the dying-process tests below).
STUCK = """
import faulthandler, signal, sys, threading, time
from ddpdemo.runtime import engine
dump = open(sys.argv[1], "w")
faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True)
def announce(main=threading.main_thread().ident, held=threading.Lock()):
    while sys._current_frames()[main].f_code.co_name != "wait":
        time.sleep(0.01)
    held.acquire()
    print("ready", flush=True)
    held.acquire()      # a thread that exits mid-dump cuts it short
def stuck_in_the_readers_code():
    threading.Thread(target=announce, daemon=True).start()
    threading.Event().wait()
engine.call(stuck_in_the_readers_code, (), {})
"""


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGUSR1"),
                    reason="stack dumps need SIGUSR1")
def test_dump_stack_reads_the_stuck_function(tmp_path):
    path = str(tmp_path / "stack.txt")
    proc = subprocess.Popen([sys.executable, "-c", STUCK, path],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        frames = watch.dump_stack(proc.pid, path)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    with open(path) as f:
        dump = f.read()
    assert frames, f"no reader frames in the dump:\n{dump}"
    assert frames[0][2] == "stuck_in_the_readers_code"
    assert frames[-1][2] == "wait"          # threading.Event.wait


# What CPython 3.11's faulthandler leaves when it segfaults mid-dump (seen
# in CI, about once in a hundred dumps while another thread starts a
# function): a first thread's header and half a frame line.
CUT_SHORT = ('Thread 0x00007fd23fef46c0 (most recent call first):\n'
             '  File "/usr/lib/python3.11/threading.py", line 265 in '
             '__init__\n'
             '  File ')


def _a_dead_process():
    """A process that has exited and not been reaped: its pid stays
    reserved, and alive() says it has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    assert waiting.until(lambda: not processes.alive(proc.pid), 10,
                         every=0.01)
    return proc


def test_a_dump_its_process_died_in_counts_as_no_dump_at_once(tmp_path):
    path = tmp_path / "stack.txt"
    path.write_text(CUT_SHORT)
    proc = _a_dead_process()
    try:
        start = time.monotonic()
        got = watch.read_dumps({0: (str(path), 0, proc.pid)})
        took = time.monotonic() - start
    finally:
        proc.wait(timeout=10)
    # The same file from a live process: waited for until it has been
    # still for QUIET polls (the baseline, measured here, under the same
    # load).
    start = time.monotonic()
    assert watch.read_dumps({0: (str(path), 0, os.getpid())}) == {0: []}
    still = time.monotonic() - start
    # None, not []: [] would say "had not started this code yet", and
    # outcome.settle keeps the responder's stack only for None.
    assert got == {0: None}
    # Not waited for as a still file would be.
    assert took < still


def test_a_dead_process_keeps_the_reader_frames_it_wrote(tmp_path):
    path = tmp_path / "stack.txt"
    path.write_text(
        'Thread 0x00007fd23fef46c0 (most recent call first):\n'
        '  File "/x/train.py", line 7 in stuck\n'
        f'  File "{engine.__file__}", line 20 in call\n\n'
        'Thread 0x00007fd23fef46c1 (most recent call first):\n  File ')
    proc = _a_dead_process()
    try:
        got = watch.read_dumps({0: (str(path), 0, proc.pid)})
    finally:
        proc.wait(timeout=10)
    assert got == {0: [("/x/train.py", 7, "stuck")]}
