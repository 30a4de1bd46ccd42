"""ddpdemo.flight: the recorder's size in the environment, and how the
notebook collects every rank's record when a run went wrong (stuck
ranks through the group's store, idle ones directly), against a real
FileStore and a stand-in responder thread. (Real ranks: test_ledger.py
and test_cluster.py.)"""
import datetime
import threading
import time

import pytest

from ddpdemo import flight
from ddpdemo.runtime.rendezvous import FileRendezvous

pytestmark = pytest.mark.fast


def test_the_size_goes_in_the_environment_and_is_read_back():
    env = flight.env(500)
    assert flight.buffer_size(env) == 500
    assert flight.buffer_size({}) == flight.DEFAULT_BUFFER
    assert flight.buffer_size({flight.BUFFER_VARS[1]: "7"}) == 7
    for bad in (-1, True, 2.5, "10"):
        with pytest.raises(ValueError, match="flight_recorder"):
            flight.env(bad)


def test_a_thread_dump_holds_this_thread():
    assert "test_a_thread_dump_holds_this_thread" in flight.thread_dump()


def respond(spec, ars, rank, answer):
    """What a stuck rank's side thread does, in a thread here: wait for
    request 1 on the store, then publish the answer on its task."""
    store = flight.open_store(spec)

    def serve():
        store.wait(["request/1"], datetime.timedelta(seconds=30))
        ars[rank].data[flight.answer_key(1)] = answer
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_stuck_ranks_answer_through_the_store_idle_ones_directly(
        tmp_path, Result):
    spec = FileRendezvous(str(tmp_path / "store"))
    ars = [Result(), Result(), Result()]
    thread = respond(spec, ars, 0, {"rank": 0, "dump": {}, "stack": "S0"})
    asked, stacks = [], {}
    records = flight.collect(
        spec, ars, pending=[0], dead=[2], stacks=stacks,
        ask=lambda ranks: asked.append(ranks) or [{"rank": r}
                                                  for r in ranks])
    thread.join(timeout=10)
    assert asked == [[1]]                  # the dead rank is not asked
    assert records == {0: {"rank": 0, "dump": {}}, 1: {"rank": 1}}
    assert stacks == {0: "S0"}             # the stack travels apart


def test_a_stuck_rank_that_does_not_answer_is_none_within_the_bound(
        tmp_path, Result):
    spec = FileRendezvous(str(tmp_path / "store"))
    ars = [Result(), Result()]
    records = flight.collect(spec, ars, pending=[0, 1], timeout=0.2,
                             ask=lambda ranks: [])
    assert records == {0: None, 1: None}


def test_a_stuck_rank_that_dies_is_not_waited_for(tmp_path, Result):
    # A stack dump can kill a stuck rank (CPython 3.11's faulthandler):
    # its responder died with it, so waiting the whole bound for it would
    # add seconds to the hang report.
    spec = FileRendezvous(str(tmp_path / "store"))
    ars = [Result(), Result()]
    thread = respond(spec, ars, 0, {"rank": 0, "dump": {}, "stack": "S0"})
    start = time.monotonic()
    bound = 120.0
    records = flight.collect(spec, ars, pending=[0, 1], timeout=bound,
                             ask=lambda ranks: [],
                             is_alive=lambda rank: rank != 1)
    took = time.monotonic() - start
    thread.join(timeout=10)
    assert records == {0: {"rank": 0, "dump": {}}, 1: None}
    # Waiting for the dead rank would take the whole bound; it returns
    # once rank 0 has answered, long before.
    assert took < bound / 2


def test_a_responders_error_reaches_the_report(tmp_path, Result):
    """A rank whose side thread failed to record says why: flight.collect
    keeps its answer, and the ledger (part of every report) prints it."""
    from ddpdemo.runtime.ledger import Ledger
    spec = FileRendezvous(str(tmp_path / "store"))
    ars = [Result(), Result()]
    why = "RuntimeError('the recorder is gone')"
    thread = respond(spec, ars, 1, {"rank": 1, "error": why, "stack": "S1"})
    records = flight.collect(spec, ars, pending=[1],
                             ask=lambda ranks: [None for _ in ranks])
    thread.join(timeout=10)
    assert records[1] == {"rank": 1, "error": why}
    ledger = Ledger(2, records)
    assert ledger.failed == {1: why} and ledger.silent == [0, 1]
    assert f"rank 1's Flight Recorder could not be read: {why}" in \
        str(ledger).splitlines()
