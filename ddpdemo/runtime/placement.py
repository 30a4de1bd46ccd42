"""Where a cluster's engines run, as three small objects with one
interface: LocalPlacement (this machine), LauncherPlacement (an engine
launcher: "slurm" and "mpi" from ddpdemo.runtime.batch, or another of
ipyparallel's) and
ddpdemo.runtime.ssh.SSHRanks (ranks on hosts reached by ssh). Plumbing for
ddpdemo.runtime.engines, which keeps the controller and the generations
and leaves to its placement how a generation is launched, killed and
stopped (chapter 0, "How the live cluster works"; README, "Past one
machine").

The interface:

    engine_set_launcher   what ipyparallel's Cluster(engines=...) is given
    controller_kwargs     extra settings of the controller
    local                 engines on this machine: pids, exit codes, guard
    owns_controller       stop() kills the controller's process tree
    launch(ipp_cluster, generation, env, args)   a generation's engines
    kill(engines, pids, generation)               SIGKILL them (bounded)
    stop(engines)                                 every engine, at the end

`engines` is the ddpdemo.runtime.engines.Engines asking (its `sets` and
`forget` reach the engine sets of a generation).
"""
import os
import signal

import psutil
from ipyparallel.cluster.launcher import (LocalEngineLauncher,
                                          LocalEngineSetLauncher)

from . import forkserver, processes, waiting

FORKSERVER_VARIABLE = "DDPDEMO_FORKSERVER"   # where a launcher asks for a fork


class _RecordingProcess:
    """psutil.Process whose wait() remembers the exit status.

    ipyparallel's launcher reaps each engine in a thread the moment it
    exits, and reports the status on an event loop that may not be running,
    so without this a dead rank's signal would be lost, or reported only
    sometimes, and notebook output would change from run to run.
    """

    def __init__(self, process, forkserver=None):
        self._process = process
        self._forkserver = forkserver
        self.exit_code = None

    def wait(self, timeout=None):
        code = self._process.wait(timeout)
        if self._forkserver is not None and code is None:
            # Not our child: its parent, the fork server, recorded it.
            code = waiting.value(
                lambda: forkserver.read_exit(self._forkserver, self.pid), 2.0)
        self.exit_code = code
        return code

    def __getattr__(self, name):
        return getattr(self._process, name)


class RankEngineLauncher(LocalEngineLauncher):
    """A local engine whose exit status can be read afterwards, forked by
    the cluster's ddpdemo.runtime.forkserver when its environment names one."""

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
    """ipyparallel's local engine set, made of RankEngineLaunchers."""
    launcher_class = RankEngineLauncher


class LocalPlacement:
    """Engines on this machine: one engine set per rank, so each engine
    has its RANK in its environment from birth, each under
    ddpdemo.runtime.guard (it ends with this kernel), forked from the
    cluster's fork server when there is one."""

    engine_set_launcher = RankEngineSetLauncher
    controller_kwargs = {"controller_ip": "127.0.0.1"}
    local = owns_controller = True

    def __init__(self, world_size):
        self.world_size = world_size

    def launch(self, ipp_cluster, generation, env, args, preload=()):
        args = dict(args, engine_cmd=processes.guarded(
            "ipyparallel.engine", preload=preload))
        for rank in range(self.world_size):
            ipp_cluster.start_engines_sync(
                1, engine_set_id=f"g{generation}-rank{rank}",
                environment=dict(env, RANK=str(rank), LOCAL_RANK=str(rank),
                                 WORLD_SIZE=str(self.world_size)),
                **args)

    def kill(self, engines, pids, generation=None):
        processes.kill(pids)

    def stop(self, engines):
        processes.kill(engines.pids())


class LauncherPlacement:
    """Engines started by one of ipyparallel's engine launchers ("mpi",
    "slurm", ...), one set of world_size per generation. No guard: this
    kernel's pid means nothing on another host; remote engines end when
    the controller's heartbeat stops. Killed through their launcher."""

    controller_kwargs = {}
    local = owns_controller = False

    def __init__(self, world_size, launcher, launch_args=None):
        self.world_size = world_size
        self.engine_set_launcher = launcher
        # The launcher's own settings for every generation (sbatch_args,
        # mpi_args: ddpdemo.runtime.batch.launch_args).
        self.launch_args = dict(launch_args or {})

    # The kernel's own rank variables (a notebook started under torchrun,
    # say) would reach every engine through the launcher's environment and
    # outrank the launcher's rank (engine.identify reads RANK first): they
    # go out empty, which identify() skips, and prepare() sets them anew.
    INHERITED = {"RANK": "", "LOCAL_RANK": "", "WORLD_SIZE": ""}

    def launch(self, ipp_cluster, generation, env, args, preload=()):
        ipp_cluster.start_engines_sync(
            self.world_size, engine_set_id=f"g{generation}",
            environment={**self.INHERITED, **env}, **args,
            **self.launch_args)

    def kill(self, engines, pids, generation=None):
        for es in engines.sets(generation).values():
            try:
                es.signal(signal.SIGKILL)
            except Exception:   # the launcher's stop still runs
                pass

    def stop(self, engines):
        self.kill(engines, (), None)
