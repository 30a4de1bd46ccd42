"""The local processes behind a cluster, as the operating system sees
them: the guarded command that starts one, whether it lives, killing it,
and how it ended, in words. No ipyparallel here (that is
ddpdemo.runtime.engines). Plumbing for ddpdemo.runtime.cluster (chapter 0).
"""
import contextlib
import os
import signal
import subprocess
import sys

import psutil

from . import guard, waiting
# signal_name lives with the hang report's words (rank side), where the
# torchrun scripts can use it too; this module's name for it stays.
from .errors import package_root, signal_name


def guarded(module, remove=None, preload=()):
    """The command that starts an ipyparallel process under ddpdemo's
    guard, which ends it (and removes `remove`) if this kernel dies
    without cleaning up; `preload`: modules to import before `module`."""
    extra = ["--remove", remove] if remove else []
    for name in preload:
        extra += ["--preload", name]
    return [sys.executable, "-m", guard.__name__, str(os.getpid()),
            *extra, module]


def pythonpath():
    """Engines and scripts must import ddpdemo even when it is not
    installed: the directory that holds it goes first on their path (not
    the package's own directory, whose modules would then shadow
    installed ones of the same names: `ledger`, `ring`, ...)."""
    old = os.environ.get("PYTHONPATH")
    return package_root() + (os.pathsep + old if old else "")


alive = guard.alive     # running, and not a zombie


def kill(pids, wait=5.0):
    """SIGKILL, then wait: a rank stuck in a gloo wait ignores SIGINT and
    SIGTERM, and a restart must not race the old process."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    # Wait until each is gone or a zombie, without reaping it: reaping
    # here (psutil's wait) would take the exit status from the launcher's
    # own reaper thread, and a dead rank's signal would be lost.
    waiting.until(lambda: not any(alive(pid) for pid in pids), wait)


# s; SIGKILL ends a process in milliseconds, unless the kernel holds it
# (state "disk-sleep": I/O on a hung mount or device), where no signal
# reaches it until the kernel lets go.
REAP_TIMEOUT = 10.0


class Unkillable(RuntimeError):
    """A child still running `timeout` s after SIGKILL; `.pid` is its pid
    (it is left running: nothing more can be done from here)."""

    def __init__(self, pid, name, timeout):
        self.pid = pid
        try:
            state = psutil.Process(pid).status()
        except psutil.Error:
            state = "unknown"
        super().__init__(f"{name} (pid {pid}) still runs {timeout:g} s "
                         f"after SIGKILL (state: {state}), so it is left "
                         f"running; a process in state disk-sleep waits "
                         f"for the kernel (a hung mount or device)")


def reap(popen, timeout=None):
    """Wait for a child (a subprocess.Popen) that has been sent SIGKILL,
    and reap it; bounded: Unkillable past `timeout` s (default
    REAP_TIMEOUT). Returns its exit status."""
    timeout = REAP_TIMEOUT if timeout is None else timeout
    try:
        return popen.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        args = popen.args
        name = os.path.basename(str(args if isinstance(args, (str, bytes))
                                    else args[0]))
        raise Unkillable(popen.pid, name, timeout) from None


def kill_tree(pid, wait=5.0):
    """SIGKILL a process and every process it started (ipyparallel's
    controller forks helpers that SIGKILL would otherwise orphan)."""
    try:
        family = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return
    kill([pid] + [child.pid for child in family], wait)


def rss_bytes(pids, unique=False):
    """Resident memory of these processes, summed (what spares cost).
    unique=True: only the pages no other process shares (USS), which is
    what they would give back; RSS also counts shared libraries."""
    total = 0
    for pid in pids:
        try:
            process = psutil.Process(pid)
            total += (process.memory_full_info().uss if unique
                      else process.memory_info().rss)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def describe_exit(code):
    """`process died (signal SIGKILL)`: a dead rank, for RankError."""
    if code is None:
        return "process died (exit status not available)"
    if code < 0:
        return f"process died (signal {signal_name(-code)})"
    return f"process died (exit code {code})"
