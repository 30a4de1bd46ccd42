"""ddpdemo.runtime.processes and ddpdemo.runtime.guard: the guarded
command, killing a process and saying how it ended, and a guard ending
its process (and removing a directory) when the parent it watches
dies."""
import os
import signal
import subprocess
import sys
import textwrap
import time

from ddpdemo.runtime import guard, processes, waiting

import pytest

pytestmark = pytest.mark.fast


def test_guarded_command_names_parent_remove_and_preload():
    cmd = processes.guarded("ipyparallel.engine", remove="/tmp/x",
                            preload=("torch",))
    assert cmd == [sys.executable, "-m", guard.__name__, str(os.getpid()),
                   "--remove", "/tmp/x", "--preload", "torch",
                   "ipyparallel.engine"]
    assert guard.parse([*cmd[3:], "--flag"]) == (
        os.getpid(), "/tmp/x", ["torch"], "ipyparallel.engine", ["--flag"])


def import_probe():
    """Run in a rank: the ddpdemo modules importable under their own
    top-level name (none should be), and where the PYTHONPATH alone,
    without any installed copy, finds `ddpdemo` as a package."""
    import importlib.machinery
    import importlib.util
    import os
    import pkgutil

    import ddpdemo
    package = os.path.dirname(os.path.abspath(ddpdemo.__file__))
    shadowing = []
    for module in pkgutil.iter_modules([package]):
        spec = importlib.util.find_spec(module.name)
        if spec is not None and spec.origin and os.path.abspath(
                spec.origin).startswith(package + os.sep):
            shadowing.append(module.name)
    path = os.environ["PYTHONPATH"].split(os.pathsep)
    found = importlib.machinery.PathFinder.find_spec("ddpdemo", path)
    return {"shadowing": shadowing, "package": package,
            "on_pythonpath": found and os.path.dirname(found.origin),
            "is_package": bool(ddpdemo.__spec__.submodule_search_locations)}


def check_imports(seen):
    assert seen["shadowing"] == []      # no `import ledger`, `ring`, ...
    assert seen["is_package"]
    assert seen["on_pythonpath"] == seen["package"]


def test_a_rank_imports_ddpdemo_as_a_package_and_nothing_else():
    """A real engine of a Cluster: `ddpdemo` is found as a package on the
    PYTHONPATH it was given, and none of its modules as a top-level name
    (they would shadow installed packages called ledger, ring, ...)."""
    import ddpdemo
    with ddpdemo.Cluster(world_size=1, backend="gloo", spares=False) as c:
        [seen] = c.run(import_probe)
    check_imports(seen)


def test_a_script_run_by_ddpdemo_imports_ddpdemo_as_a_package(tmp_path):
    """A torchrun script started the way the chapters start theirs."""
    import inspect
    import json

    from ddpdemo import scripts
    script = tmp_path / "probe.py"
    script.write_text(inspect.getsource(import_probe)
                      + "\nimport json\nprint(json.dumps(import_probe()))\n")
    [done] = scripts.collect(
        [scripts._exe("torchrun"), "--standalone", "--nproc-per-node", "1",
         str(script)], timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    check_imports(json.loads(done.stdout.strip().splitlines()[-1]))


def test_kill_ends_a_process_that_ignores_sigterm():
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import signal, sys, threading
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        threading.Event().wait()
    """)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    assert processes.alive(proc.pid)
    assert processes.rss_bytes([proc.pid]) > 1e6
    processes.kill([proc.pid])     # waits for it (and reaps it)
    assert not processes.alive(proc.pid)
    proc.wait(timeout=10)
    assert processes.rss_bytes([proc.pid]) == 0


def test_reap_is_bounded_and_names_a_child_that_outlives_its_kill():
    """As a process the kernel holds (state D) would, this child is still
    there after the wait: reap gives up in time and says which it is;
    once it has really ended, reap returns its status."""
    proc = subprocess.Popen([sys.executable, "-c",
                             "import time; time.sleep(60)"])
    try:
        start = time.monotonic()
        with pytest.raises(processes.Unkillable) as info:
            processes.reap(proc, timeout=0.2)    # no kill sent: it lives
        assert time.monotonic() - start < 5
        assert info.value.pid == proc.pid
        assert str(info.value).startswith(
            f"{os.path.basename(sys.executable)} (pid {proc.pid}) still "
            f"runs 0.2 s after SIGKILL (state: ")
    finally:
        proc.kill()
        assert processes.reap(proc) == -signal.SIGKILL


def test_describe_exit_names_the_signal():
    assert processes.describe_exit(-9) == "process died (signal SIGKILL)"
    assert processes.describe_exit(1) == "process died (exit code 1)"
    assert "not available" in processes.describe_exit(None)


def test_describe_exit_names_a_real_time_signal():
    # signal.Signals has no member for 35..63: this raised ValueError
    # inside the hang report before signal_name.
    rtmin = signal.SIGRTMIN
    assert processes.describe_exit(-(rtmin + 1)) == (
        "process died (signal SIGRTMIN+1)")
    assert processes.signal_name(signal.SIGRTMAX - 1) == "SIGRTMAX-1"
    assert processes.signal_name(200) == "signal 200"
    assert processes.signal_name(15) == "SIGTERM"


def test_guard_ends_its_process_and_removes_the_directory(tmp_path):
    """A parent that dies without clean-up: the guarded child follows."""
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys, threading
        from ddpdemo.runtime import processes
        cmd = processes.guarded("http.server", remove={str(doomed)!r})
        child = subprocess.Popen(cmd + ["--bind", "127.0.0.1", "0"],
                                 stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        print(child.pid, flush=True)
        threading.Event().wait()
    """)], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait(timeout=10)
    # The guard looks every 0.5 s; nobody may reap the orphan, so a
    # zombie counts as ended.
    waiting.until(lambda: not processes.alive(child), 30,   # a loaded machine
                  every=0.05)
    assert not processes.alive(child)
    assert not doomed.exists()


def test_unique_memory_is_at_most_resident_memory():
    me = [os.getpid()]
    assert 0 < processes.rss_bytes(me, unique=True) <= processes.rss_bytes(me)


def test_a_zombie_is_not_alive_for_the_guard_nor_the_cluster():
    """One meaning of alive: a child that exited but is not reaped yet
    has ended, for the guard (which watches the kernel) as for the
    cluster (which watches its ranks)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert waiting.until(lambda: not guard.alive(proc.pid), 30)
        assert os.path.exists(f"/proc/{proc.pid}")     # a zombie, unreaped
        assert processes.alive is guard.alive
    finally:
        proc.wait(timeout=10)
    assert not guard.alive(proc.pid)
    assert guard.alive(os.getpid())


def test_until_returns_the_first_true_value_or_the_last_false_one():
    calls = []
    assert waiting.until(lambda: calls.append(1) or (len(calls) >= 3 and 7),
                         5, every=0) == 7
    start = time.monotonic()
    assert waiting.until(lambda: 0, 0.2) == 0
    assert time.monotonic() - start >= 0.2


def test_value_takes_a_false_answer_at_once():
    """An exit status 0 is an answer: `value` returns it on the first
    call, where `until` would have waited the whole bound for a true one."""
    calls = []
    assert waiting.value(lambda: calls.append(1) or 0, 60) == 0
    assert calls == [1]
    answers = iter([None, None, False])
    assert waiting.value(lambda: next(answers), 60, every=0) is False
    assert waiting.value(lambda: None, 0.05) is None


def test_the_guard_removes_a_directory_that_is_still_written_to(tmp_path):
    """While the controller's guard removes the cluster's directory, the
    fork server may still record an exit in it (forkserver._reap): one
    rmtree can then leave the directory behind. The guard's removal ends
    with it gone."""
    import threading
    root = tmp_path / "cluster"
    root.mkdir()
    for i in range(200):
        (root / f"log-{i}").write_text("x" * 100)
    writes = []
    writing = threading.Event()

    def writer():                     # as _reap does: open, never mkdir
        n, stop = 0, time.monotonic() + 1.0
        while time.monotonic() < stop:
            try:
                with open(root / f"exit-{n}.tmp", "w") as f:
                    f.write("0")
                os.replace(root / f"exit-{n}.tmp", root / f"exit-{n}")
                writes.append(n)
                writing.set()
            except OSError:
                return
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    # The removal starts once the writer writes (on a busy machine the
    # thread can start late): the race is the test.
    assert writing.wait(timeout=30)
    assert guard.remove_dir(str(root))
    thread.join()
    assert writes and not root.exists()
