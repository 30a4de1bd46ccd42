"""The ipyparallel side of one Cluster: its controller and client, the
generations of engines (one engine set per rank, or one per generation,
launched a generation at a time), calls to the engines, and how an
engine ended. Plumbing for ddpdemo.runtime.cluster, which decides *when*
to do these things (chapter 0, "How the live cluster works"). Where the
engines run is a placement (ddpdemo.runtime.placement: local, launcher;
ddpdemo.runtime.ssh: ssh); the few private names of ipyparallel the
runtime reaches are listed in IPP_PRIVATES below.

Local engines are forked from ddpdemo.runtime.forkserver (started here,
beside the controller), which imported torch once for all of them.

    engines = Engines(world_size=2, tmpdir=tmp).start()
    engines.launch(generation=0)            # one engine set per rank
    ids = engines.wait_for_new(2, seen=set(), ...)
    engines.call_each(ids, fn)              # bounded, results by rank
"""
import logging
import os
import subprocess
import sys
import threading
import time

import ipyparallel as ipp
from ipyparallel.cluster.launcher import (LocalControllerLauncher,
                                          LocalEngineLauncher,
                                          LocalEngineSetLauncher)

from . import batch, engine, forkserver, processes, waiting
from .placement import (FORKSERVER_VARIABLE, LauncherPlacement,
                        LocalPlacement)
from .ssh import SSHRanks

# The names of ipyparallel's that are not its documented API and that the
# runtime relies on, in one place; tests/test_engines.py fails if
# ipyparallel drops one (pyproject.toml keeps it below version 10).
IPP_PRIVATES = {
    LocalEngineLauncher: ("_start_waiting",   # RankEngineLauncher's hook
                          "process", "pid", "identifier", "args",
                          "work_dir", "output_file", "notify_start"),
    LocalEngineSetLauncher: ("launchers", "launcher_class"),
    ipp.Cluster: ("engines", "controller", "controller_launcher_class"),
}
HEARTBEAT_MS = 250        # ipyparallel's default 3 s beat slows start-up
CALL_TIMEOUT = 60.0       # s; one bounded step of start-up (import, init)
# What the fork server imports once for every engine it forks.
FORK_PRELOAD = ("torch", "torch.distributed", "ipyparallel.engine.app",
                engine.__name__)
POLL = 0.05               # s; how often a wait for engines looks


def quiet_log():
    """ipyparallel logs to stdout in IPython; that would land in the stored
    outputs. Only its errors reach stderr."""
    log = logging.getLogger("ddpdemo.ipyparallel")
    if not log.handlers:
        log.addHandler(logging.StreamHandler(sys.stderr))
        log.setLevel(logging.ERROR)
        log.propagate = False
    return log


class Engines:
    """The ipyparallel side of one Cluster: a controller and client, and
    the engine sets it launched, named `g<generation>-rank<r>`.

    Where the engines run is its placement: "local" (LocalPlacement),
    "ssh" with `hosts` in ipp_kwargs (SSHRanks), otherwise ipyparallel's
    engine launcher of that name (LauncherPlacement): "slurm" and "mpi" are
    ddpdemo.runtime.batch's, one Slurm job or one mpiexec per generation
    whose task number is each engine's rank; others are ipyparallel's own.
    With `profile`, a running ipyparallel cluster whose engines we only
    use: no placement, and nothing of ours to restart.
    """

    def __init__(self, world_size, tmpdir, *, launcher="local",
                 profile=None, env=None, ipp_kwargs=None, fork=True):
        self.world_size = world_size
        self.tmpdir = tmpdir
        self._profile = profile
        self._env, self._ipp_kwargs = dict(env or {}), dict(ipp_kwargs or {})
        self._ipp = self._client = None
        self._forkserver = None
        self._launching = None  # (thread, [its error]) of launch_in_background
        self._used = set()      # engine ids given to a group so far
        self.placement = self._place(launcher)
        self.local = self.placement is not None and self.placement.local
        self.fork = fork and self.local and sys.platform == "linux"

    def _place(self, launcher):
        if self._profile is not None:
            return None
        if launcher == "local":
            return LocalPlacement(self.world_size)
        if launcher == "ssh" and "hosts" in self._ipp_kwargs:
            return SSHRanks(self.world_size, self.tmpdir,
                            self._ipp_kwargs.pop("hosts"),
                            self._ipp_kwargs.pop("ssh_args", ()))
        # sbatch_args= / mpiexec_args=: for ddpdemo.runtime.batch's launchers.
        return LauncherPlacement(
            self.world_size, batch.LAUNCHERS.get(launcher, launcher),
            batch.launch_args(launcher, self._ipp_kwargs))

    @property
    def can_restart(self):
        """False for a profile's engines: they are not ours to restart."""
        return self._ipp is not None

    def start(self):
        """Start the controller (or connect to the profile's). The client
        connects on first use: engines launched before that start while
        the controller does (they wait for its connection file)."""
        if self._profile is not None:
            self._client = ipp.Client(profile=self._profile)
            return self
        if self.fork:
            self._start_forkserver()
        from IPython.core.profiledir import ProfileDir
        profile_dir = ProfileDir.create_profile_dir(
            os.path.join(self.tmpdir, "profile")).location
        kwargs = dict(self.placement.controller_kwargs, **self._ipp_kwargs)
        self._ipp = ipp.Cluster(
            profile_dir=profile_dir, delay=0, log=quiet_log(),
            engines=self.placement.engine_set_launcher,
            # ddpdemo.runtime.cluster stops it at exit, engines first and fast;
            # ipyparallel's own hook would stop the controller first,
            # politely, and a kernel manager may kill us while it waits.
            shutdown_atexit=False,
            controller_args=["--usethreads",
                             f"--HeartMonitor.period={HEARTBEAT_MS}"],
            **kwargs)
        guard = {}
        if self._ipp.controller_launcher_class is LocalControllerLauncher:
            guard["controller_cmd"] = processes.guarded(
                "ipyparallel.controller", remove=self.tmpdir)
        self._ipp.start_controller_sync(**guard)
        return self

    @property
    def client(self):
        """ipyparallel's Client, connected once the controller is up."""
        if self._client is None and self._ipp is not None:
            self._client = self._ipp.connect_client_sync()
        return self._client

    def _engine_env(self):
        """The environment every engine of this cluster shares."""
        env = {"OMP_NUM_THREADS": "1", "PYTHONPATH": processes.pythonpath(),
               "IPP_NONINTERACTIVE": "1"}
        if self.local:
            from .devices import loopback_interface
            env["GLOO_SOCKET_IFNAME"] = loopback_interface()
        env.update(self._env)
        return env

    def _start_forkserver(self):
        """Start ddpdemo.runtime.forkserver, which imports torch (while the
        controller starts) and then forks each local engine."""
        self._forkserver_path = os.path.join(self.tmpdir, "forkserver.sock")
        with open(os.path.join(self.tmpdir, "forkserver.log"), "ab") as log:
            self._forkserver = subprocess.Popen(
                [sys.executable, "-m", forkserver.__name__,
                 str(os.getpid()), self._forkserver_path, *FORK_PRELOAD],
                env=dict(os.environ, **self._engine_env()),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)

    def _forkserver_ready(self):
        """True once the fork server listens; False if there is none or it
        died (an engine started the slow way then shows why)."""
        server = self._forkserver
        if server is None:
            return False
        waiting.until(lambda: server.poll() is not None
                      or os.path.exists(self._forkserver_path), CALL_TIMEOUT)
        return server.poll() is None and os.path.exists(self._forkserver_path)

    # -- engine sets ---------------------------------------------------
    def launch(self, generation, preload=()):
        """Launch a generation's engines, named g<generation>[-rank<r>],
        as the placement places them. `preload`: modules a local engine
        imports before it registers."""
        self.settle_launch()
        self._launch(generation, preload)

    def launch_in_background(self, generation, preload=()):
        """Launch as `launch` does, on a thread of its own, and return at
        once: spares for the next restart, launched while a run is on the
        ranks (about 0.1 s of forks and ipyparallel bookkeeping that the
        run would otherwise wait for). Whatever next reads or changes the
        engine sets (sets(), launch, stop) first waits for it."""
        self.settle_launch()
        failed = []

        def launch():
            try:
                self._launch(generation, preload)
            except BaseException as exc:    # raised by settle_launch
                failed.append(exc)

        thread = threading.Thread(target=launch, name="ddpdemo-spares",
                                  daemon=True)
        self._launching = thread, failed
        thread.start()

    def settle_launch(self):
        """Wait (bounded) for a launch_in_background to finish, and raise
        its error here, where the caller can see it."""
        if (self._launching is None
                or self._launching[0] is threading.current_thread()):
            return
        thread, failed = self._launching
        thread.join(CALL_TIMEOUT)
        if thread.is_alive():
            raise TimeoutError(f"launching engines took over "
                               f"{CALL_TIMEOUT:g} s")
        self._launching = None
        if failed:
            raise failed[0]

    def _launch(self, generation, preload):
        base = self._engine_env()
        if self._forkserver_ready():
            base[FORKSERVER_VARIABLE] = self._forkserver_path
        args = dict(engine_args=["--IPEngine.enable_nanny=False"])
        self.placement.launch(self._ipp, generation, base, args, preload)

    def sets(self, generation=None):
        """{set id: engine set} of one generation, or of all."""
        self.settle_launch()
        if self._ipp is None:
            return {}
        prefix = f"g{generation}" if generation is not None else ""
        return {set_id: es for set_id, es in self._ipp.engines.items()
                if generation is None or set_id == prefix
                or set_id.startswith(prefix + "-")}

    def _launchers(self, generation=None):
        """(set id, engine launcher) of every engine still recorded."""
        return [(set_id, el)
                for set_id, es in self.sets(generation).items()
                for el in list(getattr(es, "launchers", {}).values())]

    def forget(self, generation=None):
        """Take a generation's engine sets (or all) out of ipyparallel's
        cluster, so its stop leaves them to us: {set id: engine set}."""
        return {set_id: self._ipp.engines.pop(set_id)
                for set_id in self.sets(generation)}

    def pids(self, generation=None):
        """Process ids of the local engines launched, in launch order."""
        return [el.pid for _, el in self._launchers(generation)
                if getattr(el, "pid", -1) > 0]

    def check_started(self, generation):
        """Raise RuntimeError, quoting its log, if an engine of this
        generation has exited: it would be waited for until the start
        timeout otherwise."""
        for set_id, el in self._launchers(generation):
            code = getattr(getattr(el, "process", None), "exit_code", None)
            if code is not None:
                tail = el.get_output().splitlines()[-5:]
                raise RuntimeError("\n".join(
                    [f"an engine exited while starting ({set_id}, "
                     f"{processes.describe_exit(code)}); its log ends:"]
                    + [f"    {line}" for line in tail]))

    def exit_code(self, pid, wait=2.0):
        """How the engine with this pid ended (negative: the signal), read
        from its launcher; None if it cannot be known within `wait` s.
        ipyparallel's own `stop_data` is filled only by a loop callback
        that may never run, so this reads what RankEngineLauncher
        recorded."""
        if not self.local:      # a remote pid: not ours to read
            return None
        launchers = [el for _, el in self._launchers()
                     if getattr(el, "pid", None) == pid]
        if not launchers:
            return None
        return waiting.until(
            lambda: getattr(launchers[0].process, "exit_code", None), wait)

    @property
    def death_notice_s(self):
        """How long after an engine dies `registered` may still say yes:
        0 for local engines (their pids are looked at instead); otherwise
        the controller's heartbeat, which gives up after 10 missed beats
        (HeartMonitor.max_heartmonitor_misses), and a beat to spare."""
        return 0.0 if self.local else 12 * HEARTBEAT_MS / 1000

    def registered(self, engine_id):
        """Whether the controller still counts this engine as alive."""
        return engine_id in self.client.ids

    def kill(self, pids, generation=None):
        """SIGKILL: a rank stuck in a gloo wait ignores SIGINT and SIGTERM.
        Remote engines' pids belong to other hosts: the placement knows
        how to reach them."""
        self.placement.kill(self, pids, generation)

    def stop_generation(self, generation):
        """Forget a generation's engine sets (their processes are dead or
        about to be) and remove their logs."""
        for set_id in self.sets(generation):
            self._ipp.stop_engines_sync(set_id)

    def stop(self):
        """Kill every engine, stop the controller, close the client."""
        try:
            self.settle_launch()    # its engines are stopped with the rest
        except Exception:
            self._launching = None
        if self._client is not None:
            try:
                self._client.close()
            except Exception:
                pass
        if self._ipp is not None:
            self.placement.stop(self)
            controller = getattr(self._ipp.controller, "pid", -1)
            if self.placement.owns_controller and controller > 0:
                # Nothing to save: SIGKILL, so stopping takes no grace time.
                processes.kill_tree(controller)
            try:
                self._ipp.stop_cluster_sync()
            except Exception:
                pass
        if self._forkserver is not None:
            self._forkserver.kill()
            self._forkserver.wait()
        self._ipp = self._client = self._forkserver = None

    # -- calling the engines ---------------------------------------------
    def wait_for_new(self, n, seen, deadline, progress=None, generation=None):
        """Ids of n engines not in `seen`, lowest first, once registered;
        TimeoutError after `deadline` (time.monotonic())."""
        new = []

        def enough():
            new[:] = [i for i in self.client.ids if i not in seen]
            if progress:
                progress.update(f"engines {min(len(new), n)}/{n}")
            if len(new) < n and generation is not None:
                self.check_started(generation)
            return len(new) >= n

        if not waiting.until(enough, deadline - time.monotonic(), POLL):
            raise TimeoutError(f"only {len(new)} of {n} engines started "
                               f"within the start timeout")
        return sorted(new)[:n]

    def wait_for_generation(self, n, generation, deadline, progress=None):
        """Ids of n engines no group has used, once registered (raising if
        one of `generation` died starting); marked used, and set to take
        notebook functions by value."""
        ids = self.wait_for_new(n, self._used, deadline, progress,
                                generation if self.can_restart else None)
        self._used.update(ids)
        self.use_cloudpickle(ids)
        return ids

    def unused_count(self):
        """Registered engines no group has used yet: the spares."""
        return self.count_new(self._used)

    def count_new(self, seen):
        """How many registered engines are not in `seen`."""
        return len([i for i in self.client.ids if i not in seen])

    def call_each(self, ids, fn, per_rank=None, **kwargs):
        """Call fn on engines `ids` (rank order) and wait, bounded by
        CALL_TIMEOUT: the setup steps. `per_rank(r)` gives rank r's
        positional arguments. Results listed by rank."""
        ars = [self.client[eid].apply_async(
            fn, *(per_rank(r) if per_rank else ()), **kwargs)
            for r, eid in enumerate(ids)]
        deadline = time.monotonic() + CALL_TIMEOUT
        return [ar.get(timeout=max(0.1, deadline - time.monotonic()))
                for ar in ars]

    def submit(self, ids, fn, *args):
        """Send fn(*args) to engines `ids` without waiting: one
        AsyncResult per rank, for ddpdemo.runtime.watch to wait on."""
        return [self.client[eid].apply_async(fn, *args) for eid in ids]

    def use_cloudpickle(self, ids):
        """Functions defined in a notebook must travel by value."""
        self.client[ids].use_cloudpickle()

    def activate(self, ids):
        """Register ipyparallel's %px magics on these engines."""
        self.client[ids].activate()
