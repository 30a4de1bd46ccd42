"""The kernel's side of ddpdemo.runtime.forkserver: the handle that starts
a cluster's fork server and stops it, and the ipyparallel engine launcher
that asks it for a fork instead of starting Python afresh. Plumbing for
ddpdemo.runtime.placement's LocalPlacement, the one placement whose
engines are forked (chapter 0, "How the live cluster works").
"""
import os
import subprocess
import sys
import warnings

import psutil
from ipyparallel.cluster.launcher import (LocalEngineLauncher,
                                          LocalEngineSetLauncher)

from . import engine, forkserver, processes, waiting

FORKSERVER_VARIABLE = "DDPDEMO_FORKSERVER"   # where a launcher asks for a fork
# What the fork server imports once for every engine it forks.
PRELOAD = ("torch", "torch.distributed", "ipyparallel.engine.app",
           engine.__name__)
READY_TIMEOUT = 60.0    # s; the server binds once python and ddpdemo are up


class ForkServer:
    """A running ddpdemo.runtime.forkserver, listening on a Unix socket in
    the cluster's private directory; it imports torch while the
    controller starts, then forks each local engine."""

    def __init__(self, tmpdir, env):
        self.path = os.path.join(tmpdir, "forkserver.sock")
        with open(os.path.join(tmpdir, "forkserver.log"), "ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", forkserver.__name__,
                 str(os.getpid()), self.path, *PRELOAD],
                env=dict(os.environ, **env), stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)

    def ready(self):
        """True once the server listens; False if it died (an engine
        started the slow way then shows why)."""
        server = self._process
        waiting.until(lambda: server.poll() is not None
                      or os.path.exists(self.path), READY_TIMEOUT)
        return server.poll() is None and os.path.exists(self.path)

    def stop(self):
        """Kill the server and reap it, bounded. One that outlives the
        kill is reported as a RuntimeWarning, not raised: the cluster's
        stop goes on to end its engines and controller."""
        self._process.kill()
        try:
            processes.reap(self._process)
        except processes.Unkillable as error:
            warnings.warn(str(error), RuntimeWarning, stacklevel=2)


class _RecordingProcess:
    """psutil.Process whose wait() remembers the exit status.

    ipyparallel's launcher reaps each engine in a thread the moment it
    exits, and reports the status on an event loop that may not be running,
    so without this a dead rank's signal would be lost, or reported only
    sometimes, and notebook output would change from run to run.
    """

    def __init__(self, process, forkserver_path=None):
        self._process = process
        self._forkserver = forkserver_path
        self.exit_code = None

    def wait(self, timeout=None):
        code = self._process.wait(timeout)
        if self._forkserver is not None and code is None:
            # Not our child: its parent, the fork server, recorded it.
            code = waiting.value(
                lambda: forkserver.read_exit(self._forkserver, self.pid), 2.0)
        if code is not None:    # a second wait must not forget the first
            self.exit_code = code
        return self.exit_code

    def __getattr__(self, name):
        return getattr(self._process, name)


class RankEngineLauncher(LocalEngineLauncher):
    """A local engine whose exit status can be read afterwards, forked by
    the cluster's fork server when its environment names one."""

    _forkserver = None

    def start(self):
        env = dict(os.environ, **self.get_env())
        self._forkserver = env.pop(FORKSERVER_VARIABLE, None)
        if self._forkserver is None or self.args[1:2] != ["-m"]:
            return super().start()
        try:
            self.pid = forkserver.request(self._forkserver, self.args[2:],
                                          env, self.work_dir, self.output_file)
        except OSError:     # the server is gone: start one the slow way
            self._forkserver = None
            return super().start()
        self.process = psutil.Process(self.pid)
        self.notify_start(self.pid)
        self._start_waiting()

    def _start_waiting(self):
        self.process = _RecordingProcess(self.process, self._forkserver)
        super()._start_waiting()


class RankEngineSetLauncher(LocalEngineSetLauncher):
    """ipyparallel's local engine set, made of RankEngineLaunchers. One
    that has stopped stays readable in `ended`: ipyparallel drops it from
    `launchers` once its event loop hears of the exit, and on a busy
    machine that can come before anyone asked how the engine ended (an
    engine that died starting was then waited for until the start
    timeout, reported as not started)."""
    launcher_class = RankEngineLauncher

    def _notice_engine_stopped(self, data):
        launcher = self.launchers.get(data["identifier"])
        if launcher is not None:
            self.__dict__.setdefault("ended", {})[data["identifier"]] = \
                launcher
        super()._notice_engine_stopped(data)
