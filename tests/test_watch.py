"""ddpdemo.runtime.watch: bounded waits on the ranks, output in rank order, one
line per failure, and a stuck process's stack read from a real dump.
Results are stand-ins with ipyparallel's AsyncResult methods."""
import subprocess
import sys
import time

import pytest

from ddpdemo.runtime import watch


def test_wait_returns_at_once_when_every_rank_is_done(Result):
    start = time.monotonic()
    assert watch.wait([Result(), Result()], 10, lambda r: True) == (
        [], [], [])
    assert time.monotonic() - start < 1


def test_wait_gives_up_at_the_timeout_naming_the_pending_rank(Result):
    start = time.monotonic()
    pending, failed, dead = watch.wait([Result(), Result(done=False)], 0.3,
                                       lambda r: True)
    assert (pending, failed, dead) == ([1], [], [])
    assert 0.3 <= time.monotonic() - start < 0.3 + 1


def test_after_a_failure_the_rest_get_only_the_grace(Result):
    start = time.monotonic()
    pending, failed, _ = watch.wait(
        [Result(error=ValueError("x")), Result(done=False)], 60,
        lambda r: True)
    assert (pending, failed) == ([1], [0])
    assert time.monotonic() - start < watch.FAILURE_GRACE + 2


def test_a_dead_rank_is_not_waited_for(Result):
    start = time.monotonic()
    pending, failed, dead = watch.wait([Result(done=False)] * 2, 60,
                                       lambda r: r == 0)
    assert (pending, dead) == ([0], [1])
    # The live rank gets the grace after the death, not the timeout.
    assert time.monotonic() - start < watch.FAILURE_GRACE + 2


def test_echo_output_prefixes_ranks_in_rank_order(capsys, Result):
    watch.echo_output([Result(stdout="a\nb\n", stderr="warn\n"),
                       Result(stdout="c\n"), Result(done=False, stdout="x")])
    out, err = capsys.readouterr()
    assert out.splitlines() == ["[rank 0] a", "[rank 0] b", "[rank 1] c",
                                "[rank 2] x"]
    assert err.splitlines() == ["[rank 0] warn"]


def test_describe_error_is_one_line_with_the_remote_name(Result):
    class RemoteError(Exception):
        ename, evalue = "KeyError", "'missing'\nmore lines"
    assert watch.describe_error(Result(error=RemoteError())) == \
        "KeyError: 'missing'"
    assert watch.describe_error(Result(error=ValueError("bad"))) == \
        "ValueError: bad"
    assert watch.describe_error(Result()) == "no error"


# "ready" comes from a second thread once the main thread is inside the
# wait: printed before it, the signal could land while the main thread is
# still on its way there, and the dump would end elsewhere.
STUCK = """
import faulthandler, signal, sys, threading, time
from ddpdemo.runtime import engine
dump = open(sys.argv[1], "w")
faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True)
def announce(main=threading.main_thread().ident):
    while sys._current_frames()[main].f_code.co_name != "wait":
        time.sleep(0.01)
    print("ready", flush=True)
    threading.Event().wait()    # a thread that exits mid-dump cuts it short
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
