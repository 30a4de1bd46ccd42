"""Every contact with ipyparallel, in one place: its controller, the engine
sets (one per rank, launched a generation at a time), the client, calls
to the engines, and how an engine ended. Plumbing for ddpdemo.cluster,
which decides *when* to do these things (chapter 0, "How the live
cluster works").

Local engines are forked from ddpdemo.forkserver (started here, beside
the controller), which imported torch once for all of them.

    engines = Engines(world_size=2, tmpdir=tmp).start()
    engines.launch(generation=0)            # one engine set per rank
    ids = engines.wait_for_new(2, seen=set(), ...)
    engines.call_each(ids, fn)              # bounded, results by rank
"""
import logging
import os
import signal
import subprocess
import sys
import time

import ipyparallel as ipp
import psutil
from ipyparallel.cluster.launcher import (LocalControllerLauncher,
                                          LocalEngineLauncher,
                                          LocalEngineSetLauncher)

from . import batch, forkserver, processes
from .ssh import QuickSSHEngineSetLauncher, SSHRanks

FORKSERVER_VARIABLE = "DDPDEMO_FORKSERVER"   # where a launcher asks for a fork
HEARTBEAT_MS = 250        # ipyparallel's default 3 s beat slows start-up
CALL_TIMEOUT = 60.0       # s; one bounded step of start-up (import, init)
# What the fork server imports once for every engine it forks.
FORK_PRELOAD = ("torch", "torch.distributed", "ipyparallel.engine.app",
                "ddpdemo.engine")
POLL = 0.05               # s; how often a wait for engines looks


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
        if self._forkserver is not None:
            # Not our child: its parent, the fork server, recorded it.
            deadline = time.monotonic() + 2.0
            while code is None and time.monotonic() < deadline:
                code = forkserver.read_exit(self._forkserver, self.pid)
                time.sleep(0.01) if code is None else None
        self.exit_code = code
        return code

    def __getattr__(self, name):
        return getattr(self._process, name)


class RankEngineLauncher(LocalEngineLauncher):
    """A local engine whose exit status can be read afterwards, forked by
    the cluster's ddpdemo.forkserver when its environment names one."""

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

    local: engines on this machine, each launched under ddpdemo.guard
    with its RANK in its environment from birth. "ssh" with `hosts`
    in ipp_kwargs: one engine per rank too, each started by ipyparallel's
    SSH launcher on its host (ddpdemo.ssh). "slurm", "mpi": one Slurm job
    or one mpiexec per generation, whose task number is each engine's
    rank (ddpdemo.batch). Otherwise `launcher` is another of ipyparallel's
    engine launchers, or `profile` names a running ipyparallel cluster
    whose engines we only use.
    """

    def __init__(self, world_size, tmpdir, *, launcher="local",
                 profile=None, env=None, ipp_kwargs=None, fork=True):
        self.world_size = world_size
        self.tmpdir = tmpdir
        self.local = profile is None and launcher == "local"
        self._launcher, self._profile = launcher, profile
        self._env, self._ipp_kwargs = dict(env or {}), dict(ipp_kwargs or {})
        self._ipp = self._client = None
        self._forkserver = None
        self._used = set()      # engine ids given to a group so far
        self.fork = fork and self.local and sys.platform == "linux"
        self._ssh = None
        # sbatch_args= / mpiexec_args=: for ddpdemo.batch's launchers.
        self._launch_args = batch.launch_args(launcher, self._ipp_kwargs)
        if launcher == "ssh" and profile is None and "hosts" in ipp_kwargs:
            self._ssh = SSHRanks(world_size, tmpdir,
                                 self._ipp_kwargs.pop("hosts"),
                                 self._ipp_kwargs.pop("ssh_args", ()))

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
        kwargs = dict(controller_ip="127.0.0.1") if self.local else {}
        kwargs.update(self._ipp_kwargs)
        self._ipp = ipp.Cluster(
            profile_dir=profile_dir, delay=0, log=quiet_log(),
            engines=(RankEngineSetLauncher if self._launcher == "local"
                     else QuickSSHEngineSetLauncher if self._ssh
                     else batch.LAUNCHERS.get(self._launcher,
                                              self._launcher)),
            # ddpdemo.cluster stops it at exit, engines first and fast;
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
        """Start ddpdemo.forkserver, which imports torch (while the
        controller starts) and then forks each local engine."""
        self._forkserver_path = os.path.join(self.tmpdir, "forkserver.sock")
        with open(os.path.join(self.tmpdir, "forkserver.log"), "ab") as log:
            self._forkserver = subprocess.Popen(
                [sys.executable, "-m", "ddpdemo.forkserver",
                 str(os.getpid()), self._forkserver_path, *FORK_PRELOAD],
                env=dict(os.environ, **self._engine_env()),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)

    def _forkserver_ready(self):
        """True once the fork server listens; False if there is none or it
        died (an engine started the slow way then shows why)."""
        deadline = time.monotonic() + CALL_TIMEOUT
        while self._forkserver is not None and \
                self._forkserver.poll() is None:
            if os.path.exists(self._forkserver_path):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return False

    # -- engine sets ---------------------------------------------------
    def launch(self, generation, preload=()):
        """Start one engine set per rank (local), so each engine has its
        RANK in its environment from birth; or one set of world_size.
        `preload`: modules a local engine imports before it registers."""
        base = self._engine_env()
        if self._forkserver_ready():
            base[FORKSERVER_VARIABLE] = self._forkserver_path
        args = dict(engine_args=["--IPEngine.enable_nanny=False"])
        if self._ssh is not None:
            self._ssh.launch(self._ipp, generation, base, args)
            return
        if not self.local:
            # No guard: this kernel's pid means nothing on another host;
            # remote engines end when the controller's heartbeat stops.
            self._ipp.start_engines_sync(
                self.world_size, engine_set_id=f"g{generation}",
                environment=base, **args, **self._launch_args)
            return
        args["engine_cmd"] = processes.guarded("ipyparallel.engine",
                                               preload=preload)
        for rank in range(self.world_size):
            env = dict(base, RANK=str(rank), LOCAL_RANK=str(rank),
                       WORLD_SIZE=str(self.world_size))
            self._ipp.start_engines_sync(
                1, engine_set_id=f"g{generation}-rank{rank}",
                environment=env, **args)

    def _sets(self, generation=None):
        """{set id: engine set} of one generation, or of all."""
        if self._ipp is None:
            return {}
        prefix = f"g{generation}" if generation is not None else ""
        return {set_id: es for set_id, es in self._ipp.engines.items()
                if generation is None or set_id == prefix
                or set_id.startswith(prefix + "-")}

    def _launchers(self, generation=None):
        """(set id, engine launcher) of every engine still recorded."""
        return [(set_id, el)
                for set_id, es in self._sets(generation).items()
                for el in list(getattr(es, "launchers", {}).values())]

    def _forget(self, generation=None):
        """Take a generation's engine sets (or all) out of ipyparallel's
        cluster, so its stop leaves them to us: {set id: engine set}."""
        return {set_id: self._ipp.engines.pop(set_id)
                for set_id in self._sets(generation)}

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
        deadline = time.monotonic() + wait
        while launchers and time.monotonic() < deadline:
            code = getattr(launchers[0].process, "exit_code", None)
            if code is not None:
                return code
            time.sleep(0.01)
        return None

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
        Remote engines' pids belong to other hosts: ask their launcher."""
        if self.local:
            processes.kill(pids)
            return
        if self._ssh is not None:
            self._ssh.kill(self._forget(generation))
            return
        for es in self._sets(generation).values():
            try:
                es.signal(signal.SIGKILL)
            except Exception:   # the launcher's stop still runs
                pass

    def stop_generation(self, generation):
        """Forget a generation's engine sets (their processes are dead or
        about to be) and remove their logs."""
        for set_id in self._sets(generation):
            self._ipp.stop_engines_sync(set_id)

    def stop(self):
        """Kill every engine, stop the controller, close the client."""
        if self._client is not None:
            try:
                self._client.close()
            except Exception:
                pass
        if self._ipp is not None:
            if self._ssh is not None:
                self._ssh.kill(self._forget(), remove=True)
            self.kill(self.pids())
            controller = getattr(self._ipp.controller, "pid", -1)
            if (self.local or self._ssh is not None) and controller > 0:
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
        while True:
            new = [i for i in self.client.ids if i not in seen]
            if progress:
                progress.update(f"engines {min(len(new), n)}/{n}")
            if len(new) >= n:
                return sorted(new)[:n]
            if generation is not None:
                self.check_started(generation)
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(new)} of {n} engines started "
                                   f"within the start timeout")
            time.sleep(POLL)

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
        AsyncResult per rank, for ddpdemo.watch to wait on."""
        return [self.client[eid].apply_async(fn, *args) for eid in ids]

    def use_cloudpickle(self, ids):
        """Functions defined in a notebook must travel by value."""
        self.client[ids].use_cloudpickle()

    def activate(self, ids):
        """Register ipyparallel's %px magics on these engines."""
        self.client[ids].activate()
