"""A live torch.distributed group, one ipyparallel engine per rank, that a
notebook can use cell after cell and that never hangs it.

    with ddpdemo.Cluster(world_size=2) as cluster:
        cluster.run(fn)          # fn runs on every rank, results by rank

Introduced in chapter 0. Every wait is bounded: a rank that does not
finish within the timeout raises HangError naming it, with its stack;
the engines are then restarted and the group formed anew, because a
timed-out gloo group is poisoned and a stuck gloo wait ignores SIGINT.
"""
import atexit
import glob
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import weakref

from . import engine, flight, processes, watch
from .errors import HangError, RankError
from .progress import Progress

BACKENDS = ("auto", "gloo", "nccl")
START_TIMEOUT = 120.0     # s; four engines on a 2-core laptop take ~10 s
SETUP_TIMEOUT = 60.0      # s; one bounded step of start-up (import, init)
HEARTBEAT_MS = 250        # ipyparallel's default 3 s beat slows start-up
_clusters = weakref.WeakSet()


def _check_args(world_size, backend, timeout):
    if isinstance(world_size, bool) or not isinstance(world_size, int):
        raise TypeError(f"world_size must be a positive int, got {world_size!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be a positive int, got {world_size}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of "
                         f"{', '.join(map(repr, BACKENDS))}")
    _check_timeout(timeout)


def _check_timeout(timeout):
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a positive number of seconds, "
                        f"got {timeout!r}")
    if not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be a positive number of seconds, "
                         f"got {timeout}")


def _local_gpus():
    import torch
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _quiet_log():
    """ipyparallel logs to stdout in IPython; that would land in the stored
    outputs. Only its errors reach stderr."""
    log = logging.getLogger("ddpdemo.ipyparallel")
    if not log.handlers:
        log.addHandler(logging.StreamHandler(sys.stderr))
        log.setLevel(logging.ERROR)
        log.propagate = False
    return log


class Cluster:
    """`world_size` ranks on ipyparallel engines, in one process group.

    backend: "gloo", "nccl", or "auto" (nccl when every rank can have a
    GPU of its own). timeout: default bound, in seconds, on every `run`.
    engines: ipyparallel's engine launcher ("local", "mpi", "slurm",
    "ssh", ...), or profile: the name of a running ipyparallel cluster.
    rendezvous: "file" (local default: a FileStore in a private temporary
    directory, no listener) or "tcp" (rank 0 opens a TCPStore on port 0).
    flight_recorder: entries in each rank's Flight Recorder (0: off).
    """

    def __init__(self, world_size=2, backend="auto", timeout=30.0, *,
                 engines="local", profile=None, rendezvous=None,
                 master_addr=None, group_timeout=None, env=None,
                 start_timeout=START_TIMEOUT,
                 flight_recorder=flight.DEFAULT_BUFFER, **ipp_kwargs):
        _check_args(world_size, backend, timeout)
        _check_timeout(start_timeout)
        self.local = profile is None and engines == "local"
        if rendezvous not in (None, "file", "tcp"):
            raise ValueError(f"unknown rendezvous {rendezvous!r}; "
                             "choose 'file' or 'tcp'")
        if rendezvous == "file" and not self.local:
            raise ValueError("rendezvous='file' needs all ranks on this "
                             "machine; use 'tcp' with remote engines")
        self.world_size = world_size
        self.timeout = float(timeout)
        self.rendezvous = rendezvous or ("file" if self.local else "tcp")
        self.master_addr = master_addr or ("127.0.0.1" if self.local else None)
        # The group's own timeout is longer than ours, so a stuck rank is
        # reported by HangError (with its stack), not torch's own error.
        self.group_timeout = group_timeout or max(300.0, 4 * self.timeout)
        self.start_timeout = start_timeout
        self.backend = self._choose_backend(backend)
        self._engines, self._profile = engines, profile
        self._env, self._ipp_kwargs = dict(env or {}), ipp_kwargs
        self._env.update(flight.env(flight_recorder))   # flight hook
        self._flight = None
        self._ipp = self._rc = self._tmp = None
        self._ids, self._pids, self._seen = [], [], set()
        self._generation = 0
        # stopped, ready, restarting, suspect (a rank raised: check the
        # group before the next run) or broken (stuck, cannot restart)
        self._state = "stopped"

    def _choose_backend(self, backend):
        if backend == "gloo" or not self.local:
            return backend  # remote: "auto" is settled on the engines
        gpus = _local_gpus()
        if backend == "nccl" and gpus < self.world_size:
            raise ValueError(f"backend='nccl' needs one GPU per rank: "
                             f"world_size={self.world_size}, but {gpus} "
                             f"GPU(s) found")
        return "nccl" if gpus >= self.world_size else "gloo"

    def __repr__(self):
        return (f"<Cluster world_size={self.world_size} "
                f"backend={self.backend!r} {self._state}>")

    # -- life cycle ----------------------------------------------------
    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        """Start the controller and engines and form the group."""
        if self._state != "stopped":
            return self
        import ipyparallel as ipp
        from IPython.core.profiledir import ProfileDir
        _clusters.add(self)
        self._tmp = tempfile.mkdtemp(prefix="ddpdemo-")
        progress = Progress(f"Starting {self.world_size} ranks")
        try:
            if self._profile is not None:
                self._rc = ipp.Client(profile=self._profile)
            else:
                profile_dir = ProfileDir.create_profile_dir(
                    os.path.join(self._tmp, "profile")).location
                kwargs = dict(controller_ip="127.0.0.1") if self.local else {}
                kwargs.update(self._ipp_kwargs)
                launcher = (processes.RankEngineSetLauncher
                            if self._engines == "local" else self._engines)
                self._ipp = ipp.Cluster(
                    profile_dir=profile_dir, engines=launcher, delay=0,
                    log=_quiet_log(), shutdown_atexit=True,
                    controller_args=["--usethreads",
                                     f"--HeartMonitor.period={HEARTBEAT_MS}"],
                    **kwargs)
                guard = {}
                if self._ipp.controller_launcher_class is \
                        ipp.cluster.launcher.LocalControllerLauncher:
                    guard["controller_cmd"] = processes.guarded(
                        "ipyparallel.controller", remove=self._tmp)
                self._ipp.start_controller_sync(**guard)
                self._launch_engines()
                self._rc = self._ipp.connect_client_sync()
            self._state = "restarting"
            self._form_group(progress)
        except BaseException:
            self.stop()
            raise
        progress.done(f"{self.backend} group of {self.world_size} ready")
        from .magic import register
        register(self)
        return self

    def _launch_engines(self):
        """Start one engine set per rank (local), so each engine has its
        RANK in its environment from birth; or one set of world_size."""
        base = {"OMP_NUM_THREADS": "1", "PYTHONPATH": processes.pythonpath(),
                "IPP_NONINTERACTIVE": "1"}
        if self.local:
            base["GLOO_SOCKET_IFNAME"] = engine.loopback_interface()
        base.update(self._env)
        args = dict(engine_args=["--IPEngine.enable_nanny=False"])
        if not self.local:
            # No guard: this kernel's pid means nothing on another host;
            # remote engines end when the controller's heartbeat stops.
            self._ipp.start_engines_sync(self.world_size, environment=base,
                                         **args)
            return
        args["engine_cmd"] = processes.guarded("ipyparallel.engine")
        for rank in range(self.world_size):
            env = dict(base, RANK=str(rank), LOCAL_RANK=str(rank),
                       WORLD_SIZE=str(self.world_size))
            self._ipp.start_engines_sync(
                1, engine_set_id=f"g{self._generation}-rank{rank}",
                environment=env, **args)

    def _form_group(self, progress):
        """Wait for the new engines, map them to ranks, init the group."""
        deadline = time.monotonic() + self.start_timeout
        new = []
        while len(new) < self.world_size:
            new = [i for i in self._rc.ids if i not in self._seen]
            progress.update(f"engines {min(len(new), self.world_size)}"
                            f"/{self.world_size}")
            self._check_engine_sets()
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"only {len(new)} of {self.world_size} engines started "
                    f"within {self.start_timeout:g} s")
            time.sleep(0.05)
        new = sorted(new)[:self.world_size]
        self._seen.update(new)
        # Rank of each engine: from its environment when we launched it
        # (local), else by engine id; LOCAL_RANK counts ranks per host.
        self._rc[new].use_cloudpickle()
        ranks = self._apply(new, engine.env_rank)
        if sorted(ranks) != list(range(self.world_size)):
            ranks = list(range(self.world_size))
        self._ids = [eid for _, eid in sorted(zip(ranks, new))]
        progress.update("importing torch")
        dump = os.path.join(self._tmp, "stack-{}.txt")
        hosts = self._apply(self._ids, socket.gethostname)
        local_ranks = [hosts[:r].count(h) for r, h in enumerate(hosts)]
        env = dict(self._env)
        facts = self._apply(self._ids, engine.prepare, per_rank=lambda r: (
            r, local_ranks[r], self.world_size, env,
            dump.format(r) if self.local else None))
        self._pids = [f["pid"] for f in facts]
        if self.backend == "auto":
            fits = all(f["gpus"] > lr for f, lr in zip(facts, local_ranks))
            self.backend = "nccl" if fits else "gloo"
        progress.update(f"forming the {self.backend} group")
        self._generation += 1
        store = {}
        if self.rendezvous == "file":
            store["file_path"] = os.path.join(self._tmp,
                                              f"store-{self._generation}")
        else:
            store["tcp"] = self._apply(self._ids[:1], engine.open_tcp_store,
                                       per_rank=lambda r: (
                                           self.world_size, self.master_addr,
                                           self.group_timeout))[0]
        self._apply(self._ids, engine.init_group, per_rank=lambda r: (
            self.backend, r, self.world_size, self.group_timeout),
            **store)
        self._flight = flight.store_spec(**store)                # flight hook
        self._apply(self._ids, flight.arm,
                    per_rank=lambda r: (r, self._flight))
        self._state = "ready"
        if _in_ipython():
            self._rc[self._ids].activate()

    def _check_engine_sets(self):
        """An engine that dies while starting would otherwise be waited
        for until the start timeout."""
        if self._ipp is None:
            return
        for set_id, code in processes.exited(dict(self._ipp.engines)):
            # Quote the log: start() removes the directory it is in.
            logs = glob.glob(os.path.join(self._ipp.profile_dir, "log",
                                          f"ipengine-*-{set_id}-*.log"))
            tail = open(logs[0]).read().splitlines()[-5:] if logs else []
            raise RuntimeError("\n".join(
                [f"an engine exited while starting ({set_id}, "
                 f"{processes.describe_exit(code)}); its log ends:"]
                + [f"    {line}" for line in tail]))

    def _apply(self, ids, fn, per_rank=None, **kwargs):
        """Call fn on engines `ids` (rank order), bounded, results listed."""
        ars = [self._rc[eid].apply_async(
            fn, *(per_rank(r) if per_rank else ()), **kwargs)
            for r, eid in enumerate(ids)]
        deadline = time.monotonic() + SETUP_TIMEOUT
        out = []
        for ar in ars:
            out.append(ar.get(timeout=max(0.1, deadline - time.monotonic())))
        return out

    def stop(self):
        """Stop every engine and the controller; remove temporary files."""
        if self._rc is not None:
            try:
                self._rc.close()
            except Exception:
                pass
        if self._ipp is not None:
            self._kill_engines()
            try:
                self._ipp.stop_cluster_sync()
            except Exception:
                pass
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
        self._ipp = self._rc = self._tmp = None
        self._ids, self._pids = [], []
        self._state = "stopped"
        from .magic import unregister
        unregister(self)

    def _kill_engines(self):
        """SIGKILL: a rank stuck in a gloo wait ignores SIGINT and SIGTERM.
        Remote engines' pids belong to other hosts: ask their launcher."""
        if not self.local:
            try:
                self._ipp.signal_engines_sync(signal.SIGKILL)
            except Exception:   # the launcher's stop below still runs
                pass
            return
        processes.kill(self._pids)

    def reset(self):
        """Restart every engine and form a new group. Bounded."""
        if self._ipp is None:
            raise RuntimeError("this cluster's engines were not started by "
                               "it (profile=...), so it cannot restart them")
        self._begin_restart()
        self._finish_restart()

    def _begin_restart(self):
        """Kill the engines and launch new ones without waiting for them,
        so they start while the reader reads the error."""
        if self._ipp is None:   # profile=...: not our engines to restart
            self._state = "broken"
            return
        self._kill_engines()
        self._ipp.stop_engines_sync()
        self._pids, self._ids = [], []
        self._state = "restarting"
        self._launch_engines()

    def _finish_restart(self):
        progress = Progress(f"Restarting {self.world_size} ranks")
        self._form_group(progress)
        progress.done(f"{self.backend} group of {self.world_size} ready")

    # -- running code ----------------------------------------------------
    @property
    def ranks(self):
        return list(range(self.world_size))

    def _ready(self):
        if self._state == "stopped":
            raise RuntimeError("the cluster is not running: use "
                               "`with Cluster(...) as cluster:` or start()")
        if self._state == "broken":
            raise RuntimeError(
                "ranks of this cluster are stuck, and it cannot restart "
                "engines it did not start (profile=...): restart the "
                "ipyparallel cluster, then create a new Cluster")
        if self._state == "restarting":
            self._finish_restart()
        elif self._state == "suspect":
            self._health_check()

    def _health_check(self):
        """After a rank raised, make sure the group still works: a gloo
        group whose wait timed out is poisoned for good."""
        self._state = "ready"
        try:
            self._submit(engine.call, (_barrier, (), {}), 5.0)
        except (HangError, RankError):
            # _submit has begun a restart if ranks were stuck or dead;
            # starting another would kill those fresh engines.
            if self._state not in ("restarting", "broken"):
                self._begin_restart()
            self._ready()

    def run(self, fn, *args, timeout=None, **kwargs):
        """Call fn(*args, **kwargs) on every rank; results in rank order.

        Each rank's printed output is echoed, grouped and prefixed by rank.
        Raises HangError if some rank has not returned within `timeout`
        seconds (default: the cluster's), RankError if some rank raised.
        """
        if timeout is not None:
            _check_timeout(timeout)
        self._ready()
        return self._submit(engine.call, (fn, args, kwargs),
                            self.timeout if timeout is None else timeout)

    def run_cell(self, source, filename, timeout=None):
        """Run notebook source on every rank (the `%%ranks` magic)."""
        if timeout is not None:
            _check_timeout(timeout)
        self._ready()
        return self._submit(engine.run_source, (source, filename),
                            self.timeout if timeout is None else timeout)

    def _submit(self, fn, args, timeout):
        ars = [self._rc[eid].apply_async(fn, *args) for eid in self._ids]
        pending, failed, dead = watch.wait(ars, timeout, self._is_alive)
        watch.echo_output(ars)
        errors = {r: watch.describe_error(ars[r]) for r in failed}
        engine_sets = list(self._ipp.engines.values()) if self._ipp else []
        errors.update({r: processes.describe_exit(processes.exit_code(
            engine_sets, self._pids[r])) for r in dead})
        if errors or pending:                                     # flight hook
            ledger = flight.ledger(self._flight, self.world_size, dead)
        if errors:
            if pending or dead:
                self._begin_restart()
            else:
                self._state = "suspect"
            raise RankError(errors, blocked=pending, ledger=ledger)
        if pending:
            stacks = {}
            if self.local and hasattr(signal, "SIGUSR1"):
                stacks = {r: watch.dump_stack(self._pids[r], os.path.join(
                    self._tmp, f"stack-{r}.txt")) for r in pending}
            self._begin_restart()
            raise HangError(pending, timeout, self.world_size, stacks,
                            ledger=ledger)
        return [ar.get(timeout=1) for ar in ars]

    def ledger(self):
        """Every rank's Flight Recorder ledger, side by side, with the
        first divergence (chapter 5). Between runs: the ranks answer on
        their main thread, so the ledger shows call sites too."""
        from .ledger import Ledger
        self._ready()
        records = self._apply(self._ids, flight.record)
        return Ledger(self.world_size, dict(enumerate(records)))

    def _is_alive(self, rank):
        """Remote ranks' processes cannot be seen from here: assume alive
        and let the timeout speak."""
        return not self.local or processes.alive(self._pids[rank])


def _barrier():
    import torch.distributed as dist
    dist.barrier()


def _in_ipython():
    try:
        from IPython import get_ipython
        return get_ipython() is not None
    except ImportError:
        return False


@atexit.register
def _stop_all():
    for cluster in list(_clusters):
        cluster.stop()
