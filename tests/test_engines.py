"""ddpdemo.runtime.engines, the ipyparallel side of a cluster, on one real local
engine: launched with its rank, found, called (bounded), killed and its
exit read back; a dying engine's log quoted."""
import socket
import tempfile
import time

import pytest

from ddpdemo.runtime import engine, processes
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
