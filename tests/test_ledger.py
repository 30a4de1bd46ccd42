"""ddpdemo.ledger on Flight Recorder dumps recorded from real gloo groups
(tests/data/fr_gloo_2ranks.pkl, torch 2.13: a lonely barrier and a
barrier against an all_reduce, taken from stuck ranks), then live:
2 and 4 ranks, TCP rendezvous, a dead rank, the recorder off."""
import copy
import json
import os
import pickle

import pytest

import ddpdemo
from ddpdemo.runtime.ledger import (Called, Finding, Ledger, Site, Stopped,
                            entries, site)

pytestmark = pytest.mark.fast

DATA = os.path.join(os.path.dirname(__file__), "data", "fr_gloo_2ranks.pkl")


@pytest.fixture(scope="module")
def recorded():
    with open(DATA, "rb") as f:
        return pickle.load(f)


def test_entries_read_the_dump_fields(recorded):
    rank0 = entries(recorded["lonely"][0]["dump"])
    assert [(e["seq"], e["op"]) for e in rank0] == \
        [(1, "all_reduce"), (2, "barrier"), (3, "barrier")]
    assert rank0[0]["what"] == "[4] Float" and rank0[0]["backend"] == "gloo"
    # gloo leaves every state at "scheduled"; `retired` tells which one
    # the backend still tracks.
    assert {e["state"] for e in rank0} == {"scheduled"}
    assert [e["retired"] for e in rank0] == [True, True, False]


def test_lonely_barrier_names_the_rank_that_never_called(recorded):
    ledger = Ledger(2, recorded["lonely"])
    assert ledger.divergence == (
        "rank 0 reached collective #3 (barrier), which rank 1 never "
        "called: rank 1 stopped at #2 (barrier).")
    rows = ledger.table()
    assert rows[-1].split() == ["3", "barrier", "(pending)", "-"]


def test_mismatched_op_at_one_sequence_number(recorded):
    ledger = Ledger(2, recorded["mismatch"])
    assert ledger.divergence == (
        "the ranks disagree at collective #1: barrier on rank 0, "
        "all_reduce [3] Float on rank 1.")


def test_same_op_different_sizes_is_a_divergence(recorded):
    records = copy.deepcopy(recorded["lonely"])
    records[1]["dump"]["entries"][0]["input_sizes"] = [[5]]
    assert "disagree at collective #1" in Ledger(2, records).divergence


def test_agreeing_ranks_and_a_trimmed_ring(recorded):
    records = copy.deepcopy(recorded["lonely"])
    del records[0]["dump"]["entries"][2]      # rank 0 without the extra
    del records[1]["dump"]["entries"][0]      # rank 1 forgot #1 (ring)
    assert Ledger(2, records).divergence == (
        "no divergence: every rank recorded the same collectives, "
        "#2 to #2, in the same order.")


def test_same_numbers_from_different_call_sites_are_named(recorded):
    records = copy.deepcopy(recorded["lonely"])
    del records[0]["dump"]["entries"][2]
    for rank, caller in ((0, "validate"), (1, "checkpoint")):
        records[rank]["dump"]["entries"][1]["frames"] = [
            {"name": "barrier", "filename": "/v/site-packages/torch/d.py"},
            {"name": caller, "filename": "/home/me/train.py"}]
    ledger = Ledger(2, records)
    assert ledger.divergence.endswith(
        "But #2 paired different call sites: validate on rank 0, "
        "checkpoint on rank 1.")
    assert "barrier @ validate" in ledger.table()[2]


def test_dead_and_silent_ranks_and_the_recorder_off(recorded):
    dead = Ledger(2, {0: recorded["lonely"][0]}, dead=[1])
    assert dead.divergence.startswith("rank 1 died, and its ledger with it")
    assert "(dead)" in dead.table()[1]
    silent = Ledger(2, {0: recorded["lonely"][0], 1: None})
    assert "(no answer)" in str(silent)
    off = copy.deepcopy(recorded["lonely"])
    for rec in off.values():
        rec["buffer_size"] = 0
    text = str(Ledger(2, off))
    assert "The Flight Recorder is off on ranks [0, 1]" in text
    assert "#" not in text           # no (empty) table


def test_the_finding_is_data_and_the_sentence_is_made_from_it(recorded):
    ledger = Ledger(2, recorded["lonely"])
    found = ledger.finding
    assert (found.kind, found.seq, found.ranks) == ("missing", 3, (1,))
    assert found.ops == (Called("barrier", "", (0,)),)
    assert found.stopped == (Stopped(1, 2, "barrier"),)
    assert ledger.divergence == found.sentence()
    # A figure carries the same data as JSON, with named fields.
    data = json.loads(json.dumps(found.data()))
    assert data["kind"] == "missing" and data["ranks"] == [1]
    assert data["ops"] == [{"op": "barrier", "what": "", "ranks": [0]}]
    assert data["stopped"] == [{"rank": 1, "seq": 2, "op": "barrier"}]
    mismatch = Ledger(2, recorded["mismatch"]).finding
    assert (mismatch.kind, mismatch.seq) == ("disagree", 1)
    assert mismatch.ops == (Called("barrier", "", (0,)),
                            Called("all_reduce", "[3] Float", (1,)))


def test_the_sentence_reads_the_data_alone():
    # Findings no recorded dump gives: each sentence is rendered from the
    # fields, so other numbers and ranks land in their places.
    assert Finding("missing", seq=7, ranks=(1, 3), ops=(
        Called("all_reduce", "[2] Float", (0, 2)),), stopped=(
        Stopped(1, 6, "barrier"), Stopped(3, 0, ""))).sentence() == (
        "ranks [0, 2] reached collective #7 (all_reduce), which ranks "
        "[1, 3] never called: rank 1 stopped at #6 (barrier); rank 3 "
        "recorded none.")
    assert Finding("agree", seq=9, first=4, site_seq=5, sites=(
        Site("a > b", (0,)), Site("c", (1, 2)))).sentence() == (
        "no divergence: every rank recorded the same collectives, #4 to "
        "#9, in the same order. But #5 paired different call sites: "
        "a > b on rank 0, c on ranks [1, 2].")
    assert Finding("dead", seq=2, ranks=(3,), ops=(
        Called("barrier", "", (0, 1)),)).sentence() == (
        "rank 3 died, and its ledger with it; the others all reached "
        "collective #2 (barrier) and agree up to it.")


def test_diverged_is_read_from_the_kind():
    parted = {"disagree", "missing", "dead", "silent"}
    for kind in ("off", "unanswered", "disagree", "missing", "dead",
                 "silent", "empty", "agree"):
        assert Finding(kind).diverged == (kind in parted), kind


def test_site_skips_torch_and_contextlib_frames():
    frames = [{"name": "barrier", "filename": "/x/site-packages/torch/d.py"},
              {"name": "__exit__", "filename": "/usr/lib/contextlib.py"},
              {"name": "torch_distributed_zero_first",
               "filename": "/r/ddpdemo/ordering.py"},
              {"name": "create_dataloader", "filename": "/r/ddpdemo/l.py"},
              {"name": "outer", "filename": "/r/x.py"}]
    assert site(frames) == "create_dataloader > torch_distributed_zero_first"


# -- live, on real gloo groups --------------------------------------------
def _lonely(extra_rank):
    import torch
    import torch.distributed as dist
    dist.all_reduce(torch.ones(2))
    if dist.get_rank() == extra_rank:
        dist.barrier()


def _mismatch():
    import torch
    import torch.distributed as dist
    if dist.get_rank() == 0:
        dist.barrier()
    else:
        dist.all_reduce(torch.ones(3))


def _die_after_one():
    import os
    import torch
    import torch.distributed as dist
    dist.all_reduce(torch.ones(1))
    if dist.get_rank() == 1:
        os._exit(3)
    dist.barrier()


@pytest.mark.timeout(240)
def test_four_ranks_middle_rank_stuck_then_mismatch_then_dead():
    with ddpdemo.Cluster(world_size=4, backend="gloo", timeout=30) as cluster:
        with pytest.raises(ddpdemo.HangError) as info:
            cluster.run(_lonely, 2, timeout=2)
        assert info.value.ranks == [2]
        assert info.value.ledger.divergence == (
            "rank 2 reached collective #2 (barrier), which ranks [0, 1, 3] "
            "never called: rank 0 stopped at #1 (all_reduce); rank 1 "
            "stopped at #1 (all_reduce); rank 3 stopped at #1 (all_reduce).")
        assert "First divergence: rank 2 reached" in str(info.value)
        with pytest.raises(ddpdemo.HangError) as info:
            cluster.run(_mismatch, timeout=2)
        assert info.value.ledger.divergence == (
            "the ranks disagree at collective #1: barrier on rank 0, "
            "all_reduce [3] Float on ranks [1, 2, 3].")
        with pytest.raises(ddpdemo.RankError) as info:
            cluster.run(_die_after_one, timeout=20)
        ledger = info.value.ledger
        assert ledger.dead == [1]
        assert ledger.divergence.startswith("rank 1 died")


@pytest.mark.timeout(180)
def test_tcp_rendezvous_lonely_barrier_and_ledger_between_runs():
    with ddpdemo.Cluster(world_size=2, backend="gloo", rendezvous="tcp",
                         timeout=30) as cluster:
        cluster.run(_lonely, -1)
        ok = cluster.ledger()      # through ipyparallel, with call sites
        assert ok.divergence.startswith("no divergence")
        assert "_lonely" in str(ok)
        with pytest.raises(ddpdemo.HangError) as info:
            cluster.run(_lonely, 0, timeout=2)
        assert info.value.ledger.divergence == (   # #1 was the first run's
            "rank 0 reached collective #3 (barrier), which rank 1 never "
            "called: rank 1 stopped at #2 (all_reduce).")


@pytest.mark.timeout(120)
def test_recorder_off_says_so():
    with ddpdemo.Cluster(world_size=2, backend="gloo", timeout=30,
                         flight_recorder=0) as cluster:
        cluster.run(_lonely, -1)
        text = str(cluster.ledger())
        assert "The Flight Recorder is off on ranks [0, 1]" in text
        # A hang report says so too, in words, never as an empty table.
        with pytest.raises(ddpdemo.HangError) as info:
            cluster.run(_lonely, 0, timeout=2)
        assert info.value.ledger.off == [0, 1]
        assert "The Flight Recorder is off on ranks [0, 1]" in \
            str(info.value)
    with pytest.raises(ValueError, match="flight_recorder"):
        ddpdemo.Cluster(world_size=2, flight_recorder=-1)


def test_torchs_analyzer_needs_the_default_group_named(recorded, tmp_path):
    # torch 2.13's fr_trace looks entries' group "0" up in pg_config, where
    # gloo's dump lists it under "": KeyError, until the name is added.
    from ddpdemo import flight
    records = [dict(rec, raw=pickle.dumps(rec["dump"]))
               for rec in recorded["lonely"].values()]
    flight.write_dumps(records, str(tmp_path / "raw"))
    with pytest.raises(KeyError, match="'0', 0"):
        flight.analyze(str(tmp_path / "raw"))
    flight.write_dumps(records, str(tmp_path / "named"), name_group=True)
    report = flight.analyze(str(tmp_path / "named"))
    assert "Not all ranks joining collective, sequence number: 3" in report
    assert "missing ranks: {1}" in report


def test_a_state_other_than_scheduled_is_shown(recorded):
    records = copy.deepcopy(recorded["lonely"])
    records[0]["dump"]["entries"][2]["state"] = "started"   # as NCCL would
    assert "barrier started (pending)" in Ledger(2, records).table()[-1]


def test_rank_error_shows_the_ledger_only_when_it_says_something(recorded):
    from ddpdemo.runtime.errors import HangError, RankError
    agree = copy.deepcopy(recorded["lonely"])
    del agree[0]["dump"]["entries"][2]
    quiet = RankError({0: "ValueError: x"}, ledger=Ledger(2, agree))
    assert "Flight Recorder" not in str(quiet) and quiet.ledger is not None
    loud = RankError({0: "ValueError: x"},
                     ledger=Ledger(2, recorded["mismatch"]))
    assert "First divergence: the ranks disagree at collective #1" in \
        str(loud)
    hang = HangError([0], 2, 2, ledger=Ledger(2, agree))
    assert "No divergence" in str(hang)     # a hang always shows it
