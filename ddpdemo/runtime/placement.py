"""Where a cluster's engines run, as four small objects with one
interface: LocalPlacement (this machine), LauncherPlacement (an engine
launcher: "slurm" and "mpi" from ddpdemo.runtime.batch, or another of
ipyparallel's), ddpdemo.runtime.ssh.SSHRanks (ranks on hosts reached by
ssh) and ProfilePlacement (a running ipyparallel cluster's engines, used
as they are); ddpdemo.runtime.options.placement picks one from a
Cluster's keywords. Each holds the facts
that differ by placement, so that ddpdemo.runtime.cluster and
ddpdemo.runtime.engines ask it and never test which kind it is (chapter
0, "How the live cluster works"; README, "Past one machine").

The interface, `Placement` below (a typing.Protocol: the placements
share no base, and tests/test_placement.py checks each has every
member):

    OPTIONS               the Cluster keywords it takes beyond Cluster's own
                          (LauncherPlacement.options(launcher): its own)
    engine_set_launcher   what ipyparallel's Cluster(engines=...) is given
    controller_kwargs     settings of the controller (its address)
    local                 every rank runs on this machine: its pid is ours
                          to signal, watch and read the exit status of
    local_controller      we start the controller here, under a guard
    owns_controller       stop() kills the controller's process tree
    can_restart           the engines are ours to kill and launch anew
    file_rendezvous       every rank can open a FileStore in our tmpdir
    master_addr           rank 0's address, unless Cluster is told one
    keeps_spares          spare engines can wait for a restart
    preload               modules an engine imports before it registers
    death_notice_s        how long `registered` may outlive an engine
    backend(backend, world_size)    "auto" settled here, if it can be
    stack_dumps(tmpdir)   where a signalled rank writes its stack, or None
    engine_env()          variables every engine of this placement gets
    existing_client()     a running cluster's ipyparallel Client, or None
    start(engines) / stop(engines)  before the controller / at the end
    launch(engines, generation, env, preload)  a generation's engines
    kill(engines, pids, generation)            SIGKILL them (bounded)
    alive(engines, engine_id, pid)             whether a rank still runs
    exit_code(launcher, wait)                  how an engine ended, or None

`engines` is the ddpdemo.runtime.engines.Engines asking.
"""
import contextlib
import os
import signal
import sys
import types
import typing
from collections.abc import Mapping

from ipyparallel.cluster.launcher import find_launcher_class

from . import batch, enginesets, group, processes, waiting
from .forks import FORKSERVER_VARIABLE, ForkServer, RankEngineSetLauncher

HEARTBEAT_MS = 250        # ipyparallel's default 3 s beat slows start-up
# The controller gives up on an engine after 10 missed beats
# (HeartMonitor.max_heartmonitor_misses); one more to spare.
HEARTBEAT_NOTICE_S = 12 * HEARTBEAT_MS / 1000


@typing.runtime_checkable
class Placement(typing.Protocol):
    """What ddpdemo.runtime.cluster and ddpdemo.runtime.engines ask of a
    placement (the module's docstring says what each member means).
    isinstance(p, Placement) is True when p has every member."""

    OPTIONS: tuple
    engine_set_launcher: object
    controller_kwargs: Mapping
    local: bool
    local_controller: bool
    owns_controller: bool
    can_restart: bool
    file_rendezvous: bool
    master_addr: str | None
    keeps_spares: bool
    preload: tuple
    death_notice_s: float

    def backend(self, backend, world_size): ...
    def stack_dumps(self, tmpdir): ...
    def engine_env(self): ...
    def existing_client(self): ...
    def start(self, engines): ...
    def stop(self, engines): ...
    def launch(self, engines, generation, env, preload=()): ...
    def kill(self, engines, pids, generation): ...
    def alive(self, engines, engine_id, pid): ...
    def exit_code(self, launcher, wait): ...


class RemotePlacement:
    """What every placement whose ranks may be on other hosts shares:
    their pids mean nothing here, a dead engine is noticed by the
    controller's heartbeat, and the rendezvous is over TCP."""

    file_rendezvous = keeps_spares = local = False
    master_addr = None
    preload = ()
    death_notice_s = HEARTBEAT_NOTICE_S
    owns_controller = can_restart = local_controller = True

    def backend(self, backend, world_size):
        return backend      # "auto": settled by what the ranks see

    def stack_dumps(self, tmpdir):
        return None         # no pid to signal: stacks come from the ranks

    def engine_env(self):
        return {}

    def existing_client(self):
        return None

    def start(self, engines):
        pass

    def alive(self, engines, engine_id, pid):
        return engines.registered(engine_id)

    def exit_code(self, launcher, wait):
        return None         # a remote pid: not ours to read


class LocalPlacement:
    """Engines on this machine: one engine set per rank, so each engine
    has its RANK in its environment from birth, each under
    ddpdemo.runtime.guard (it ends with this kernel), forked from a fork
    server that imported torch once (ddpdemo.runtime.forks). The group
    meets on loopback, through a FileStore in the cluster's directory."""

    OPTIONS = ()
    engine_set_launcher = RankEngineSetLauncher
    controller_kwargs = types.MappingProxyType({"controller_ip": "127.0.0.1"})
    owns_controller = can_restart = file_rendezvous = keeps_spares = True
    local = local_controller = True
    master_addr = "127.0.0.1"
    preload = ("torch",)    # a spare is then ready to form a group at once
    death_notice_s = 0.0    # their pids are looked at instead

    def __init__(self, world_size, fork=True):
        self.world_size = world_size
        self.fork = fork
        self._forks = None

    def backend(self, backend, world_size):
        """"nccl" needs a GPU per rank here (ValueError otherwise)."""
        return group.local_backend(backend, world_size)

    def stack_dumps(self, tmpdir):
        """A stuck rank's faulthandler writes its stack there on SIGUSR1."""
        return os.path.join(tmpdir, "stack-{}.txt")

    def engine_env(self):
        from .devices import loopback_interface
        return {"GLOO_SOCKET_IFNAME": loopback_interface()}

    def existing_client(self):
        return None

    def start(self, engines):
        """Start the fork server, which imports torch while the controller
        starts (Linux: fork without exec is what it is for)."""
        if self.fork and sys.platform == "linux":
            self._forks = ForkServer(engines.tmpdir, engines.engine_env())

    def launch(self, engines, generation, env, preload=()):
        if self._forks is not None and self._forks.ready():
            env = dict(env, **{FORKSERVER_VARIABLE: self._forks.path})
        command = processes.guarded("ipyparallel.engine", preload=preload)
        for rank in range(self.world_size):
            engines.start_engines(
                1, enginesets.name(generation, rank),
                dict(env, RANK=str(rank), LOCAL_RANK=str(rank),
                     WORLD_SIZE=str(self.world_size)), engine_cmd=command)

    def kill(self, engines, pids, generation):
        processes.kill(pids)

    def stop(self, engines):
        processes.kill(engines.pids())
        if self._forks is not None:
            self._forks.stop()
            self._forks = None

    def alive(self, engines, engine_id, pid):
        return processes.alive(pid)

    def exit_code(self, launcher, wait):
        """What RankEngineLauncher recorded (ipyparallel's own `stop_data`
        is filled only by a loop callback that may never run)."""
        return waiting.value(
            lambda: getattr(launcher.process, "exit_code", None), wait)


class LauncherPlacement(RemotePlacement):
    """Engines started by one of ipyparallel's engine launchers ("mpi",
    "slurm", ...), one set of world_size per generation. No guard: this
    kernel's pid means nothing on another host; remote engines end when
    the controller's heartbeat stops. Killed through their launcher.
    Options: controller_ip (this host as the ranks see it), and the
    launcher's own (sbatch_args, mpiexec_args: ddpdemo.runtime.batch)."""

    owns_controller = False

    @staticmethod
    def options(launcher):
        """The Cluster keywords this launcher's placement takes."""
        return ("controller_ip", *batch.keywords(launcher))

    def __init__(self, world_size, launcher, options=None):
        options = dict(options or {})
        self.world_size = world_size
        self.OPTIONS = self.options(launcher)
        self.engine_set_launcher = batch.LAUNCHERS.get(launcher, launcher)
        if isinstance(self.engine_set_launcher, str):
            try:
                find_launcher_class(launcher, "engine")
            except KeyError:
                raise ValueError(
                    f"unknown engines={launcher!r}: 'local', 'ssh', "
                    f"'slurm', 'mpi' or another of ipyparallel's engine "
                    f"launchers") from None
        self.controller_kwargs = ({"controller_ip": options.pop(
            "controller_ip")} if "controller_ip" in options else {})
        # The launcher's own settings for every generation (sbatch_args,
        # mpi_args: ddpdemo.runtime.batch.launch_args).
        self.launch_args = batch.launch_args(launcher, options)

    # The kernel's own rank variables (a notebook started under torchrun,
    # say) would reach every engine through the launcher's environment and
    # outrank the launcher's rank (engine.identify reads RANK first): they
    # go out empty, which identify() skips, and prepare() sets them anew.
    INHERITED = types.MappingProxyType(
        {"RANK": "", "LOCAL_RANK": "", "WORLD_SIZE": ""})

    def launch(self, engines, generation, env, preload=()):
        engines.start_engines(self.world_size, enginesets.name(generation),
                              {**self.INHERITED, **env}, **self.launch_args)

    def kill(self, engines, pids, generation):
        for es in engines.sets(generation).values():
            # Whatever a launcher raises, the others' and its stop still run.
            with contextlib.suppress(Exception):
                es.signal(signal.SIGKILL)

    def stop(self, engines):
        self.kill(engines, (), None)


class ProfilePlacement(RemotePlacement):
    """The engines of a running ipyparallel cluster (`profile=`), started
    by someone else: used as they are, never launched, killed or stopped
    by us (a hang there is reported, not recovered)."""

    OPTIONS = ()
    engine_set_launcher = None
    controller_kwargs = types.MappingProxyType({})
    owns_controller = can_restart = local_controller = False

    def __init__(self, profile):
        self.profile = profile

    def existing_client(self):
        import ipyparallel
        return ipyparallel.Client(profile=self.profile)

    def launch(self, engines, generation, env, preload=()):
        raise RuntimeError("a profile's engines are not ours to launch")

    def kill(self, engines, pids, generation):
        pass

    def stop(self, engines):
        pass
