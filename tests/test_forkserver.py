"""ddpdemo.runtime.forkserver: a forked child runs `python -m module` with the
environment, directory and log it was given; its exit status (or signal)
is recorded; the server ends with its parent."""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from ddpdemo.runtime import forkserver, processes, waiting

pytestmark = [pytest.mark.timeout(60), pytest.mark.fast]

PROBE = """
    import os, sys
    print(os.environ["PROBE"], os.getcwd(), sys.argv[1:], flush=True)
    if sys.argv[1] == "die":
        os.kill(os.getpid(), 9)
    if sys.argv[1] == "refuse":
        sys.exit("no GPU for this rank")
    sys.exit(3)
"""


def wait_for(predicate, within=20.0):
    return waiting.until(predicate, within, every=0.02)


@pytest.fixture
def server(tmp_path):
    (tmp_path / "probe_module.py").write_text(textwrap.dedent(PROBE))
    sock = str(tmp_path / "fork.sock")
    proc = subprocess.Popen([sys.executable, "-m", forkserver.__name__,
                             str(os.getpid()), sock, "json"], cwd=tmp_path)
    try:
        yield sock, tmp_path
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_child_runs_the_module_as_asked_and_its_exit_is_recorded(server):
    sock, tmp = server
    work = tmp / "work"
    work.mkdir()
    log = str(tmp / "child.log")
    pid = forkserver.request(sock, ["probe_module", "hello"],
                             {"PROBE": "probe-value"}, str(work), log)
    assert pid != os.getpid()
    assert wait_for(lambda: forkserver.read_exit(sock, pid) is not None)
    assert forkserver.read_exit(sock, pid) == 3
    assert pathlib.Path(log).read_text().split() == [
        "probe-value", str(work), "['hello']"]


def test_a_killed_child_reads_as_its_signal(server):
    sock, tmp = server
    pid = forkserver.request(sock, ["probe_module", "die"], {"PROBE": "x"},
                             str(tmp), str(tmp / "die.log"))
    assert wait_for(lambda: forkserver.read_exit(sock, pid) is not None)
    assert forkserver.read_exit(sock, pid) == -9
    assert not processes.alive(pid)


def test_a_message_given_to_sys_exit_is_kept_as_python_keeps_it(server):
    """sys.exit("...") in a forked child: exit status 1 and the message on
    stderr (the child's log), exactly as `python -m module` does it."""
    sock, tmp = server
    log = tmp / "refuse.log"
    pid = forkserver.request(sock, ["probe_module", "refuse"],
                             {"PROBE": "x"}, str(tmp), str(log))
    assert wait_for(lambda: forkserver.read_exit(sock, pid) is not None)
    fresh = subprocess.run([sys.executable, "-m", "probe_module", "refuse"],
                           cwd=tmp, env=dict(os.environ, PROBE="x"),
                           capture_output=True, text=True, timeout=30)
    assert fresh.returncode == 1 and forkserver.read_exit(sock, pid) == 1
    assert fresh.stderr == "no GPU for this rank\n"
    assert log.read_text() == fresh.stdout + fresh.stderr


def test_server_ends_with_its_parent(tmp_path):
    sock = str(tmp_path / "fork.sock")
    parent = subprocess.Popen([sys.executable, "-c", "import time; "
                               "time.sleep(60)"])
    server = subprocess.Popen([sys.executable, "-m", forkserver.__name__,
                               str(parent.pid), sock])
    try:
        assert wait_for(lambda: os.path.exists(sock))
        parent.kill()
        parent.wait()
        assert server.wait(timeout=10) == 0
    finally:
        for proc in (parent, server):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
