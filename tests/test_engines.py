"""ddpdemo.runtime.engines, the ipyparallel side of a cluster, on one real
local engine: launched with its rank, found, called (bounded), killed and its
exit read back; a dying engine's log quoted."""
import inspect
import os
import socket
import tempfile
import time

import pytest

from ddpdemo.runtime import engine, enginesets, processes, waiting
from ddpdemo.runtime.engines import Engines
from ddpdemo.runtime.placement import (LauncherPlacement, LocalPlacement,
                                       ProfilePlacement)
from ddpdemo.runtime.ssh import SSHRanks


@pytest.fixture
def engines():
    with tempfile.TemporaryDirectory(prefix="ddpdemo-test-") as tmp:
        e = Engines(1, tmp).start()
        try:
            yield e
        finally:
            e.stop()


def test_launch_find_call_kill_and_read_the_exit(engines):
    engines.launch(0)
    ids = engines.wait_for_generation(1, 0, time.monotonic() + 120)
    assert engines.call_each(ids, engine.identify) == [
        (0, socket.gethostname())]
    pid = engines.pids(0)[0]
    assert engines.pids() == [pid] and engines.pids(1) == []
    engines.kill([pid], 0)
    assert not processes.alive(pid)
    assert engines.exit_code(pid) == -9
    with pytest.raises(RuntimeError, match="exited while starting"):
        engines.check_started(0)
    engines.stop_generation(0)
    assert engines.pids() == []


def test_a_clean_exit_is_read_back_at_once(engines):
    """Exit status 0 is an answer, not "not yet": reading it must not
    wait out the bound (it did, and so delayed RankError)."""
    engines.launch(0)
    ids = engines.wait_for_generation(1, 0, time.monotonic() + 120)
    pid = engines.pids(0)[0]
    engines.submit(ids, os._exit, 0)
    assert waiting.until(lambda: not processes.alive(pid), 60)
    start = time.monotonic()
    assert engines.exit_code(pid, wait=60) == 0
    assert time.monotonic() - start < 30     # the bound: 60 s


def test_a_dead_engine_is_reported_with_its_log():
    with tempfile.TemporaryDirectory(prefix="ddpdemo-test-") as tmp:
        e = Engines(1, tmp, env={"PYTHONHOME": "/nonexistent"}).start()
        try:
            e.launch(0)
            with pytest.raises(RuntimeError) as info:
                e.wait_for_generation(1, 0, time.monotonic() + 60)
        finally:
            e.stop()
    message = str(info.value)
    assert "process died (exit code 1)" in message
    assert "its log ends:" in message and "encodings" in message


def test_a_dead_engine_is_reported_after_ipyparallel_dropped_it():
    """ipyparallel drops an engine's launcher from its set once its event
    loop hears of the exit (on a busy machine, before the start's first
    check): how it ended is still read, at once, not after the start
    timeout."""
    with tempfile.TemporaryDirectory(prefix="ddpdemo-test-") as tmp:
        e = Engines(1, tmp, env={"PYTHONHOME": "/nonexistent"}).start()
        try:
            e.launch(0)
            (engine_set,) = e.sets(0).values()
            # Under load ipyparallel may have dropped it already.
            (name, launcher), = {**engine_set.launchers,
                                 **getattr(engine_set, "ended", {})}.items()
            # It died starting; ipyparallel's thread waits for it and
            # RankEngineLauncher records how it ended.
            assert waiting.value(lambda: launcher.process.exit_code, 30) == 1
            assert launcher.process.wait(timeout=1) == 1    # asked again
            if name in engine_set.launchers:
                engine_set._notice_engine_stopped(     # as the loop would
                    dict(identifier=name, pid=launcher.pid,
                         exit_code=launcher.process.exit_code))
            assert engine_set.launchers == {}
            start = time.monotonic()
            with pytest.raises(RuntimeError) as info:
                e.wait_for_generation(1, 0, time.monotonic() + 60)
            assert time.monotonic() - start < 10
            assert e.exit_code(launcher.pid, wait=0) == 1
        finally:
            e.stop()
    assert "process died (exit code 1)" in str(info.value)


def test_the_ipyparallel_privates_we_rely_on_are_still_there():
    """Every name of ipyparallel's that the runtime reaches beyond its
    documented API is listed in IPP_PRIVATES; an ipyparallel without one
    fails here rather than in a hang report."""
    import ipyparallel
    from ddpdemo.runtime.controller import IPP_PRIVATES
    missing = [f"{cls.__name__}.{name}"
               for cls, names in IPP_PRIVATES.items() for name in names
               if not hasattr(cls, name)]
    assert missing == [], (ipyparallel.__version__, missing)
    # pyproject.toml keeps ipyparallel to the major version tested.
    assert int(ipyparallel.__version__.split(".")[0]) == 9


def public(cls):
    return {name for name in dir(cls) if not name.startswith("_")}


def parameters(fn):
    return list(inspect.signature(fn).parameters)


def test_every_placement_answers_the_same_questions_the_same_way():
    """Cluster and Engines ask a placement and never test its kind, so
    each must answer every question the others answer, each method with
    the same parameters (one kill signature for all)."""
    placements = [LocalPlacement(2), LauncherPlacement(2, "mpi"),
                  SSHRanks(2, {"a": 1, "b": 1}), ProfilePlacement("x")]
    names = set.union(*(public(type(p)) for p in placements)) - {
        "INHERITED", "options", "SSH_TIMEOUT", "kill_sets"}
    for placement in placements:
        kind = type(placement).__name__
        assert names <= public(placement), (kind, names - public(placement))
        for name in names:
            method = getattr(type(placement), name, None)
            if inspect.isfunction(method):
                assert parameters(method) == parameters(
                    getattr(LocalPlacement, name)), (kind, name)


def test_the_stand_in_engines_is_the_real_class_in_miniature(FakeEngines):
    """conftest's StandInEngines, which the runtime's steps are tested
    against, has nothing the real Engines lacks, with the same
    parameters: a rename in Engines fails here, not silently there."""
    stand_in = public(FakeEngines) - {"calls", "found", "started"}
    real = Engines(1, "/tmp/ddpdemo-x")
    missing = {name for name in stand_in if not hasattr(real, name)}
    assert missing == set()
    for name in stand_in:
        if callable(getattr(FakeEngines, name)):
            assert parameters(getattr(FakeEngines, name)) == \
                parameters(getattr(Engines, name))[:len(parameters(
                    getattr(FakeEngines, name)))], name


def test_the_stand_in_result_is_an_async_result_in_miniature(engines,
                                                             Result):
    """conftest's StandInResult against a real AsyncResult of a real
    engine: every name it has, the real one has too, methods taking the
    same leading parameters."""
    engines.launch(0)
    ids = engines.wait_for_generation(1, 0, time.monotonic() + 120)
    [real] = engines.submit(ids, print, "hello")
    real.get(timeout=60)
    real.wait_for_output(timeout=10)
    stand_in = public(Result) - {"done", "error"}
    assert {name for name in stand_in if not hasattr(real, name)} == set()
    for name in stand_in:
        if callable(getattr(Result, name)):
            ours = parameters(getattr(Result, name))
            assert parameters(getattr(type(real), name))[:len(ours)] == \
                ours, name
    assert real.stdout == "hello\n" and isinstance(real.data, dict)


def test_each_placement_launches_a_generation_its_way(FakeEngines):
    """Local and ssh: a set per rank, RANK and LOCAL_RANK from birth; a
    launcher: one set for the generation. Names from enginesets."""
    local, ssh = FakeEngines(), FakeEngines()
    LocalPlacement(2).launch(local, 3, {"X": "1"})
    assert [(e["n"], e["set_id"], e["environment"]["RANK"],
             e["environment"]["LOCAL_RANK"], e["environment"]["X"])
            for e in local.started] == [(1, "g3-rank0", "0", "0", "1"),
                                        (1, "g3-rank1", "1", "1", "1")]
    placed = SSHRanks(3, {"a": 2, "b": 1})
    placed.start(ssh)
    placed.launch(ssh, 0, {})
    assert [(e["engines"], e["environment"]["LOCAL_RANK"])
            for e in ssh.started] == [({"a": 1}, "0"), ({"a": 1}, "1"),
                                      ({"b": 1}, "0")]
    assert ssh.started[2]["remote_profile_dir"] == "/tmp/ddpdemo-stand-in-b"
    assert [enginesets.generation_of(e["set_id"])
            for e in local.started + ssh.started] == [3, 3, 0, 0, 0]


def test_a_launchers_engines_do_not_take_the_kernels_rank(monkeypatch,
                                                         FakeEngines):
    """A kernel with RANK=1 (started under torchrun, say) launches Slurm or
    MPI engines: the environment they get empties RANK, and identify()
    then reads the launcher's rank."""
    launched = FakeEngines()
    LauncherPlacement(2, "slurm").launch(launched, 3, {"DDPDEMO_X": "1"})
    [started] = launched.started
    env = started["environment"]
    assert started["n"] == 2 and started["set_id"] == "g3"
    assert env["DDPDEMO_X"] == "1"
    assert env["RANK"] == env["LOCAL_RANK"] == env["WORLD_SIZE"] == ""
    monkeypatch.setenv("SLURM_PROCID", "2")
    monkeypatch.setenv("RANK", "1")
    assert engine.identify()[0] == 1          # as the kernel had it
    for name, value in env.items():
        monkeypatch.setenv(name, value)       # as the engine gets it
    assert engine.identify()[0] == 2
