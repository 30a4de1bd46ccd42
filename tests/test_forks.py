"""ddpdemo.runtime.forks: the kernel's handle on a cluster's fork server
(its engines' launcher is tested through real clusters, test_cluster.py).
"""
import signal

import pytest

from ddpdemo.runtime import forks, processes

pytestmark = [pytest.mark.timeout(60), pytest.mark.fast]


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A real fork server that preloads nothing (quick to start)."""
    monkeypatch.setattr(forks, "PRELOAD", ())
    server = forks.ForkServer(str(tmp_path), {})
    try:
        assert server.ready()
        yield server
    finally:
        server._process.send_signal(signal.SIGKILL)
        processes.reap(server._process)


def test_stop_ends_the_server(server):
    server.stop()
    assert server._process.returncode == -signal.SIGKILL


def test_a_server_that_outlives_its_kill_is_reported_not_waited_for(
        server, monkeypatch):
    """As one the kernel holds (state D) would: the kill does not take
    (kill does nothing here). stop gives up after the reap's bound and
    warns, naming it, instead of waiting as long as it lives (the server
    lives as long as this process)."""
    monkeypatch.setattr(server._process, "kill", lambda: None)
    monkeypatch.setattr(processes, "REAP_TIMEOUT", 0.5)
    with pytest.warns(RuntimeWarning, match=(
            rf"\(pid {server._process.pid}\) still runs 0.5 s after "
            rf"SIGKILL")):
        server.stop()
    assert processes.alive(server._process.pid)
