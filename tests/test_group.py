"""ddpdemo.runtime.group's bookkeeping against a stand-in for the engines:
which engine is which rank, LOCAL_RANK per host, the backend "auto" settles on,
and which store each rank is given. (Real groups: test_cluster.py.)
The stand-in engines are conftest.py's StandInEngines."""
from ddpdemo.runtime import engine, group
from ddpdemo.runtime.rendezvous import FileRendezvous

import pytest

pytestmark = pytest.mark.fast


def test_ranks_come_from_the_engines_environment(FakeEngines):
    engines = FakeEngines([(2, "a"), (0, "a"), (1, "b")])
    ids, local_ranks = group.assign_ranks(engines, [5, 6, 7], 3)
    assert ids == [6, 7, 5]             # rank order
    assert local_ranks == [0, 0, 1]     # host a: ranks 0, 2; host b: 1


def test_without_launch_ranks_engine_ids_decide(FakeEngines):
    engines = FakeEngines([(-1, "a"), (-1, "b"), (-1, "a"), (-1, "b")])
    ids, local_ranks = group.assign_ranks(engines, [1, 2, 3, 4], 4)
    assert ids == [1, 2, 3, 4] and local_ranks == [0, 0, 1, 1]


def test_auto_is_nccl_only_if_every_rank_has_its_own_gpu():
    assert group.backend_for([{"gpus": 2}, {"gpus": 2}], [0, 1]) == "nccl"
    assert group.backend_for([{"gpus": 1}, {"gpus": 1}], [0, 1]) == "gloo"
    assert group.backend_for([{"gpus": 0}], [0]) == "gloo"


def test_prepare_gives_each_rank_its_environment_and_dump(FakeEngines):
    engines = FakeEngines()
    group.prepare_ranks(engines, [8, 9], [0, 1], {"X": "1"}, "/d/{}.txt")
    fn, ids, args, _ = engines.calls[0]
    assert fn is engine.prepare and ids == [8, 9]
    assert args == [(0, 0, 2, {"X": "1"}, "/d/0.txt"),
                    (1, 1, 2, {"X": "1"}, "/d/1.txt")]


def test_a_file_store_or_rank_0s_tcp_store(FakeEngines):
    engines = FakeEngines()
    here = FileRendezvous("/s")
    assert group.init_group(engines, [1, 2], "gloo", 60.0, here) is here
    assert [c[0] for c in engines.calls] == [engine.init_group]
    assert engines.calls[0][3] == {"arm": False}
    assert engines.calls[0][2] == [("gloo", 0, 2, 60.0, here),
                                   ("gloo", 1, 2, 60.0, here)]
    engines = FakeEngines()
    met = group.init_group(engines, [1, 2], "gloo", 60.0,
                           master_addr="10.0.0.1")
    store, init = engines.calls
    assert store[0] is engine.open_tcp_store and store[1] == [1]
    assert store[2] == [(2, "10.0.0.1", 60.0)]
    # Every rank meets where rank 0's store said, and so will the ledger.
    assert [args[-1] for args in init[2]] == [met, met]


def test_forming_a_group_takes_three_round_trips_the_responder_riding_init(
        FakeEngines):
    # A restart after a hang pays every round trip: the Flight Recorder
    # responder is armed by init_group's call, not one of its own.
    engines = FakeEngines([(0, "a"), (1, "a")])
    formed = group.form(engines, [4, 5], "auto", {}, 60.0,
                        rendezvous=FileRendezvous("/tmp/s"))
    assert [c[0] for c in engines.calls] == [
        engine.identify, engine.prepare, engine.init_group]
    assert engines.calls[-1][3] == {"arm": True}
    assert formed == group.Formed([4, 5], [100, 101], "gloo",
                                  FileRendezvous("/tmp/s"))
