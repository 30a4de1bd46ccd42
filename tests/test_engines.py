"""ddpdemo.runtime.engines, the ipyparallel side of a cluster, on one real local
engine: launched with its rank, found, called (bounded), killed and its
exit read back; a dying engine's log quoted."""
import os
import socket
import tempfile
import time

import pytest

from ddpdemo.runtime import engine, processes, waiting
from ddpdemo.runtime.engines import Engines


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
    ids = engines.wait_for_new(1, set(), time.monotonic() + 120,
                               generation=0)
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
    ids = engines.wait_for_new(1, set(), time.monotonic() + 120,
                               generation=0)
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
                e.wait_for_new(1, set(), time.monotonic() + 60,
                               generation=0)
        finally:
            e.stop()
    message = str(info.value)
    assert "process died (exit code 1)" in message
    assert "its log ends:" in message and "encodings" in message


def test_the_ipyparallel_privates_we_rely_on_are_still_there():
    """Every name of ipyparallel's that the runtime reaches beyond its
    documented API is listed in IPP_PRIVATES; an ipyparallel without one
    fails here rather than in a hang report."""
    import ipyparallel
    from ddpdemo.runtime.engines import IPP_PRIVATES
    missing = [f"{cls.__name__}.{name}"
               for cls, names in IPP_PRIVATES.items() for name in names
               if not hasattr(cls, name)]
    assert missing == [], (ipyparallel.__version__, missing)
    # pyproject.toml keeps ipyparallel to the major version tested.
    assert int(ipyparallel.__version__.split(".")[0]) == 9


def test_each_placement_has_the_one_interface():
    from ddpdemo.runtime.placement import LauncherPlacement, LocalPlacement
    from ddpdemo.runtime.ssh import SSHRanks
    placements = [LocalPlacement(2), LauncherPlacement(2, "mpi"),
                  SSHRanks(2, "/tmp/ddpdemo-x", {"a": 1, "b": 1})]
    for placement in placements:
        for name in ("launch", "kill", "stop"):
            assert callable(getattr(placement, name)), (placement, name)
        for name in ("engine_set_launcher", "controller_kwargs", "local",
                     "owns_controller"):
            assert hasattr(placement, name), (placement, name)
    assert [p.local for p in placements] == [True, False, False]
    with tempfile.TemporaryDirectory() as tmp:
        assert isinstance(Engines(2, tmp).placement, LocalPlacement)
        assert Engines(2, tmp, profile="x").placement is None
        assert isinstance(Engines(2, tmp, launcher="slurm").placement,
                          LauncherPlacement)


def test_a_launchers_engines_do_not_take_the_kernels_rank(monkeypatch):
    """A kernel with RANK=1 (started under torchrun, say) launches Slurm or
    MPI engines: the environment they get empties RANK, and identify()
    then reads the launcher's rank."""
    from ddpdemo.runtime.placement import LauncherPlacement
    started = {}

    class StandInCluster:
        def start_engines_sync(self, n, **kwargs):
            started.update(kwargs, n=n)
    LauncherPlacement(2, "slurm").launch(StandInCluster(), 3,
                                         {"DDPDEMO_X": "1"}, {})
    env = started["environment"]
    assert started["n"] == 2 and started["engine_set_id"] == "g3"
    assert env["DDPDEMO_X"] == "1"
    assert env["RANK"] == env["LOCAL_RANK"] == env["WORLD_SIZE"] == ""
    monkeypatch.setenv("SLURM_PROCID", "2")
    monkeypatch.setenv("RANK", "1")
    assert engine.identify()[0] == 1          # as the kernel had it
    for name, value in env.items():
        monkeypatch.setenv(name, value)       # as the engine gets it
    assert engine.identify()[0] == 2
