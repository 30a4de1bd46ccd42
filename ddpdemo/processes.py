"""The engine processes of a local cluster: launched under a guard with
their rank in their environment, watched, killed, and how they ended.
Plumbing for ddpdemo.cluster (chapter 0).
"""
import os
import signal
import sys
import time

import psutil
from ipyparallel.cluster.launcher import (LocalEngineLauncher,
                                          LocalEngineSetLauncher)


class _RecordingProcess:
    """psutil.Process whose wait() remembers the exit status.

    ipyparallel's launcher reaps each engine in a thread the moment it
    exits, and reports the status on an event loop that may not be running,
    so without this a dead rank's signal would be lost, or reported only
    sometimes, and notebook output would change from run to run.
    """

    def __init__(self, process):
        self._process = process
        self.exit_code = None

    def wait(self, timeout=None):
        code = self._process.wait(timeout)
        self.exit_code = code
        return code

    def __getattr__(self, name):
        return getattr(self._process, name)


class RankEngineLauncher(LocalEngineLauncher):
    """A local engine whose exit status can be read afterwards."""

    def _start_waiting(self):
        self.process = _RecordingProcess(self.process)
        super()._start_waiting()


class RankEngineSetLauncher(LocalEngineSetLauncher):
    """ipyparallel's local engine set, made of RankEngineLaunchers."""
    launcher_class = RankEngineLauncher


def guarded(module, remove=None):
    """The command that starts an ipyparallel process under ddpdemo's
    guard, which ends it (and removes `remove`) if this kernel dies
    without cleaning up."""
    extra = ["--remove", remove] if remove else []
    return [sys.executable, "-m", "ddpdemo.guard", str(os.getpid()),
            *extra, module]


def pythonpath():
    """Engines must import ddpdemo even when it is not installed."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    old = os.environ.get("PYTHONPATH")
    return here + (os.pathsep + old if old else "")


def alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def kill(pids, wait=5.0):
    """SIGKILL, then wait: a rank stuck in a gloo wait ignores SIGINT and
    SIGTERM, and a restart must not race the old process."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:
        try:
            psutil.Process(pid).wait(timeout=wait)
        except (psutil.NoSuchProcess, psutil.TimeoutExpired):
            pass


def exited(engine_sets):
    """(engine set id, exit code) of every recorded engine that has ended.
    ipyparallel's own `stop_data` is filled only by a loop callback that
    may never run, so this reads what RankEngineLauncher recorded."""
    return [(set_id, el.process.exit_code)
            for set_id, es in engine_sets.items()
            for el in getattr(es, "launchers", {}).values()
            if getattr(getattr(el, "process", None), "exit_code", None)
            is not None]


def exit_code(engine_sets, pid, wait=2.0):
    """How the engine with this pid ended (negative: the signal), read
    from its launcher; None if it cannot be known within `wait` s."""
    launchers = [el for es in engine_sets
                 for el in getattr(es, "launchers", {}).values()
                 if getattr(el, "pid", None) == pid]
    deadline = time.monotonic() + wait
    while launchers and time.monotonic() < deadline:
        code = getattr(launchers[0].process, "exit_code", None)
        if code is not None:
            return code
        time.sleep(0.01)
    return None


def describe_exit(code):
    """`process died (signal SIGKILL)`: a dead rank, for RankError."""
    if code is None:
        return "process died (exit status not available)"
    if code < 0:
        return f"process died (signal {signal.Signals(-code).name})"
    return f"process died (exit code {code})"
