"""ddpdemo.runtime.outcome.settle against a stand-in for the engines and
the ranks' AsyncResults (as test_group.py does for group): which ranks
finished, failed, died or are stuck, and the stacks a hang report shows.
(Real ranks: test_cluster.py.)"""
import contextlib
import datetime
import subprocess
import sys
import threading

from ddpdemo import flight
from ddpdemo.runtime import engine, outcome, processes, waiting
from ddpdemo.runtime.rendezvous import FileRendezvous

from conftest import StandInEngines as Engines

import pytest

pytestmark = pytest.mark.fast


@contextlib.contextmanager
def ended_child():
    """The pid of a child that has exited and is not reaped yet: no other
    process can be given that pid meanwhile, so a signal sent to it
    reaches no one (a reaped child's pid may already be another's)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert waiting.until(lambda: not processes.alive(proc.pid), 30)
        yield proc.pid
    finally:
        proc.wait(timeout=30)


def generation(alive=lambda r: True, **kwargs):
    return outcome.Generation(Engines(), ids=[10, 11], pids=[1, 2],
                              is_alive=alive, **kwargs)


def test_a_clean_run_gathers_nothing(Result):
    gen = generation()
    out = outcome.settle([Result(), Result()], 5, gen)
    assert (out.pending, out.dead, out.errors) == ([], [], {})
    assert out.ledger is None and gen.engines.calls == []


def test_a_raising_and_a_dead_rank_are_described(Result):
    gen = generation(alive=lambda r: r == 0)
    out = outcome.settle([Result(error=ValueError("bad")),
                          Result(done=False)], 5, gen)
    assert out.dead == [1] and out.pending == []
    assert out.errors[0].line == "ValueError: bad"
    assert out.errors[0].type == "ValueError"
    assert out.errors[1] == "process died (signal SIGKILL)"


def test_a_failed_run_with_a_store_gets_its_ledger(tmp_path, Result):
    spec = FileRendezvous(str(tmp_path / "store"))
    out = outcome.settle([Result(error=ValueError("bad")), Result()], 5,
                         generation(store=spec))
    assert list(out.errors) == [0]
    assert out.errors[0].line == "ValueError: bad"
    assert out.ledger_error is None
    assert out.ledger.by_rank == {0: [], 1: []}     # both ranks answered


def test_a_ledger_that_cannot_be_built_says_why(tmp_path, Result,
                                                monkeypatch):
    """A bug in the ledger's code (here: Ledger raising) does not take
    the ledger silently out of the report: the outcome says why."""
    def broken(*args, **kwargs):
        raise KeyError("entries")

    monkeypatch.setattr(outcome, "Ledger", broken)
    spec = FileRendezvous(str(tmp_path / "store"))
    out = outcome.settle([Result(error=ValueError("bad")), Result()], 5,
                         generation(store=spec))
    assert out.errors[0].line == "ValueError: bad"     # still reported
    assert out.ledger is None
    assert out.ledger_error == "KeyError: 'entries'"


def test_a_stuck_rank_without_a_store_has_no_stack(Result):
    out = outcome.settle([Result(), Result(done=False)], 0.1, generation())
    assert out.pending == [1] and out.ledger is None
    assert out.stacks == {1: None}


def test_a_failed_signal_dump_keeps_the_stack_the_responder_sent(
        tmp_path, Result):
    """Rank 1's process has ended (its dump never comes); its side thread
    had answered with its stack, and that stack is what is shown."""
    spec = FileRendezvous(str(tmp_path / "store"))
    ars = [Result(), Result(done=False)]
    dump = ("Current thread 0x1 (most recent call first):\n"
            '  File "/t/cell.py", line 3 in stuck\n'
            f'  File "{engine.__file__}", line 1 in call\n')
    store = flight.open_store(spec)

    def responder():
        store.wait(["request/1"], datetime.timedelta(seconds=30))
        ars[1].data[flight.answer_key(1)] = {"rank": 1, "stack": dump,
                                             "dump": {"entries": []}}
    thread = threading.Thread(target=responder, daemon=True)
    thread.start()
    (tmp_path / "stack-1.txt").touch()     # as engine.prepare opens it
    with ended_child() as pid:
        gen = outcome.Generation(Engines(), ids=[10, 11], pids=[1, pid],
                                 is_alive=lambda r: True, store=spec,
                                 dump=str(tmp_path / "stack-{}.txt"),
                                 local=True)
        out = outcome.settle(ars, 0.1, gen)
    thread.join(timeout=10)
    assert out.pending == [1]
    assert out.stacks == {1: [("/t/cell.py", 3, "stuck")]}
    assert gen.engines.calls[0][1] == [10]     # idle rank 0, directly
