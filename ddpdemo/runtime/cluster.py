"""A live torch.distributed group, one ipyparallel engine per rank, that a
notebook can use cell after cell and that never hangs it.

    with ddpdemo.Cluster(world_size=2) as cluster:
        cluster.run(fn)          # fn runs on every rank, results by rank

Introduced in chapter 0. Every wait is bounded: a rank that does not
finish within the timeout raises HangError naming it, with its stack;
the engines are then replaced and the group formed anew, because a
timed-out gloo group is poisoned and a stuck gloo wait ignores SIGINT.
Replacing them is quick because a local cluster keeps spare engines,
started in the background once the group has formed: a restart kills the
old engines, forms the group on the spares (well under a second) and
starts the next spares. Local engines are forked from
ddpdemo.runtime.forkserver, which imported torch once, so starting one
takes a fraction of a second. This module is the policy (life cycle,
running, when to restart); ddpdemo.runtime.options checks what is asked
for, ddpdemo.runtime.engines talks to ipyparallel, ddpdemo.runtime.group
forms the group on a generation of engines, and ddpdemo.runtime.engine is
what runs on the ranks.
"""
import atexit
import enum
import os
import tempfile
import time
import weakref

from . import flight
from . import engine, group, guard, outcome
from .engines import Engines
from .errors import HangError, RankError
from .magic import in_ipython, register, unregister
from .options import (check_address, check_args, check_env, check_flag,
                      check_rendezvous, check_timeout, placement,
                      requested_backend)
from .progress import Progress
from .rendezvous import FileRendezvous

START_TIMEOUT = 120.0     # s; four engines on a 2-core laptop take ~10 s
HEALTH_TIMEOUT = 5.0      # s; the barrier that checks a suspect group
_clusters = weakref.WeakSet()


class State(str, enum.Enum):
    STOPPED = "stopped"
    READY = "ready"
    RESTARTING = "restarting"   # new engines on their way: form at next run
    SUSPECT = "suspect"         # a rank raised: check the group first
    BROKEN = "broken"           # stuck, and not ours to restart


class Cluster:
    """`world_size` ranks on ipyparallel engines, in one process group.

    backend: "gloo", "nccl", or "auto" (nccl when every rank can have a
    GPU of its own; the DDPDEMO_BACKEND variable, if set, overrides
    "auto"). timeout: default bound, in seconds, on every `run`.
    engines: ipyparallel's engine launcher ("local", the default, "mpi",
    "slurm", "ssh", ...), or profile: the name of a running ipyparallel
    cluster (not both).
    With engines="ssh", hosts={host: ranks} places the ranks (required;
    ssh_args=[...] goes to ssh); see ddpdemo.runtime.ssh.SSHRanks. With
    engines="slurm", sbatch_args=[...] goes to sbatch (partition, account,
    time, GPUs per task); with engines="mpi", mpiexec_args=[...] to
    mpiexec; see ddpdemo.runtime.batch. Ranks on other hosts take
    controller_ip= (this host's address as they see it). Any other
    keyword, or one of another placement's, is a TypeError.
    rendezvous: "file" (local default: a FileStore in a private temporary
    directory, no listener) or "tcp" (rank 0 opens a TCPStore on port 0).
    group_timeout and start_timeout (the process group's own timeout, and
    the bound on engines starting): seconds or a timedelta. master_addr:
    rank 0's address as the others reach it (a str). env: variables set
    on every rank (str to str).
    Every value is checked here, the parameter named in the error.
    spares (True or False): keep world_size spare engines ready (local
    clusters), so a restart after a hang takes well under a second; each
    costs the memory of a Python process that imported torch (see
    `spare_pids`).
    flight_recorder: entries in each rank's Flight Recorder (0: off),
    read back by `ledger()` and shown in HangError and RankError.
    """

    def __init__(self, world_size=2, backend="auto", timeout=30.0, *,
                 engines=None, profile=None, rendezvous=None,
                 master_addr=None, group_timeout=None, env=None,
                 start_timeout=START_TIMEOUT, spares=True,
                 flight_recorder=flight.DEFAULT_BUFFER, **options):
        backend = requested_backend(backend)
        check_args(world_size, backend, timeout)
        start_timeout = check_timeout(start_timeout, "start_timeout")
        if group_timeout is not None:
            group_timeout = check_timeout(group_timeout, "group_timeout")
        master_addr = check_address(master_addr, "master_addr")
        check_flag(spares, "spares")
        # Where the ranks run, and what follows from it (options.placement
        # rejects a keyword that placement does not take).
        self._placement = placement(world_size, engines, profile, options)
        self.world_size = world_size
        self.timeout = check_timeout(timeout)
        self.rendezvous = check_rendezvous(
            rendezvous, self._placement.file_rendezvous)
        self.master_addr = master_addr or self._placement.master_addr
        # The group's own timeout is longer than ours, so a stuck rank is
        # reported by HangError (with its stack), not torch's own error.
        self.group_timeout = group_timeout or max(300.0, 4 * self.timeout)
        self.start_timeout = start_timeout
        self.spares = spares and self._placement.keeps_spares
        # Local "auto" is settled on first use of `backend` (it imports
        # torch: start() lets that overlap the engines' start); remote
        # "auto" by what the ranks see when the group forms.
        self._backend = backend
        if backend == "nccl":
            self._placement.backend(backend, world_size)    # enough GPUs?
        # The recorder's size must be in the environment before torch
        # starts (spares import it early); the keyword wins over env=.
        self._env = dict(check_env(env), **flight.env(flight_recorder))
        self._flight = None     # how to reach the group's store
        self._engines = self._tmp = None
        self._ids, self._pids = [], []
        # Generation g's engines are sets g<g>-rank<r>; the current one
        # runs the group, and `_launched` > it means spares are coming.
        self._generation, self._launched = 0, -1
        self._spares_due = False    # spares to launch at the next run
        self._state = State.STOPPED

    @property
    def backend(self):
        """"gloo" or "nccl" ("auto" only for remote ranks not yet seen)."""
        return self._settle_backend()

    def _settle_backend(self):
        """Settle "auto" where the placement can (local ranks: it imports
        torch to count the GPUs), once; returns the backend."""
        if self._backend == "auto":
            self._backend = self._placement.backend("auto", self.world_size)
        return self._backend

    def __repr__(self):
        return (f"<Cluster world_size={self.world_size} "
                f"backend={self.backend!r} {self._state.value}>")

    @property
    def ranks(self):
        return list(range(self.world_size))

    @property
    def state(self):
        """A State: stopped, ready, restarting, suspect or broken."""
        return self._state

    @property
    def pids(self):
        """Process ids of the ranks' engines, by rank (local clusters)."""
        return list(self._pids)

    @property
    def spare_pids(self):
        """Process ids of the spare engines launched so far."""
        if self._engines is None or self._launched <= self._generation:
            return []
        return self._engines.pids(self._launched)

    def spares_ready(self):
        """True once every spare wanted has registered (and so imported
        torch): a restart now needs no engine to start."""
        if not self.spares or self._engines is None:
            return True
        return (self._launched > self._generation and
                self._engines.unused_count() >= self.world_size)

    @property
    def tmpdir(self):
        """This cluster's private directory (stores, dumps), or None."""
        return self._tmp

    # -- life cycle ----------------------------------------------------
    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        """Start the controller and engines and form the group."""
        if self._state != State.STOPPED:
            return self
        _clusters.add(self)
        self._tmp = tempfile.mkdtemp(prefix="ddpdemo-")
        progress = Progress(f"Starting {self.world_size} ranks")
        try:
            self._engines = Engines(self.world_size, self._tmp,
                                    self._placement, self._env).start()
            self._settle_backend()   # import torch while engines start
            # ... and torch.distributed, which the first hang report needs
            # to reach the group's store (about 3 s of CPU on a loaded
            # 2-core machine: it once made a 4-rank hang take 6 s).
            import torch.distributed  # noqa: F401
            if self._placement.can_restart:
                self._launch(self._generation)
            self._form_group(progress)
            self._launch_due_spares()
        except BaseException:
            self.stop()
            raise
        progress.done(f"{self.backend} group of {self.world_size} ready")
        register(self)
        return self

    def stop(self):
        """Stop every engine and the controller; remove temporary files.
        The directory goes before the controller (and its guard): a
        kernel manager may SIGTERM a kernel still cleaning up, and then
        that guard removes it."""
        tmp = self._tmp

        def remove():
            if tmp:
                guard.remove_dir(tmp)
        if self._engines is not None:
            self._engines.stop(before_controller=remove)
        remove()
        self._engines = self._tmp = None
        self._ids, self._pids = [], []
        self._generation, self._launched = 0, -1
        self._spares_due = False
        self._state = State.STOPPED
        unregister(self)

    def reset(self):
        """Restart every engine and form a new group. Bounded."""
        if self._state == State.STOPPED:
            raise RuntimeError("this cluster is stopped: start() it (or "
                               "use it in a `with` block) before reset()")
        if not self._placement.can_restart:
            raise RuntimeError("this cluster's engines were not started by "
                               "it (profile=...), so it cannot restart them")
        self._begin_restart()
        self._finish_restart()
        self._launch_due_spares()

    def _launch(self, generation, background=False):
        """Launch a generation of engines without waiting for them to
        register (`background`: nor for the launch itself). Local ones are
        forked from a server that imported torch once: a spare is then
        ready to form a group at once (ddpdemo.runtime.forkserver)."""
        self._engines.launch(generation, self._placement.preload, background)
        self._launched = generation

    def _begin_restart(self):
        """Kill this generation's engines; the next generation (the
        spares, or engines launched now without waiting for them, which
        start while the reader reads the error) forms the next group."""
        if not self._placement.can_restart:   # profile=...: not ours
            self._state = State.BROKEN
            return
        self._engines.kill(self._pids, self._generation)
        self._engines.stop_generation(self._generation)
        self._pids, self._ids = [], []
        self._generation += 1
        if self._launched < self._generation:    # no spares
            self._launch(self._generation)
        self._state = State.RESTARTING

    def _finish_restart(self):
        progress = Progress(f"Restarting {self.world_size} ranks")
        self._form_group(progress)
        progress.done(f"{self.backend} group of {self.world_size} ready")

    # -- forming the group -----------------------------------------------
    def _form_group(self, progress):
        """Wait for this generation's engines and form the process group
        on them (the steps are in ddpdemo.runtime.group). The next
        generation of spares is then due (_launch_due_spares)."""
        ids = self._engines.wait_for_generation(
            self.world_size, self._generation,
            time.monotonic() + self.start_timeout, progress)
        progress.update(f"forming the {self.backend} group")
        formed = group.form(
            self._engines, ids, self.backend, self._env, self.group_timeout,
            dump=self._placement.stack_dumps(self._tmp),
            rendezvous=(FileRendezvous(
                os.path.join(self._tmp, f"store-{self._generation}"))
                if self.rendezvous == "file" else None),
            master_addr=self.master_addr)
        self._ids, self._pids = formed.ids, formed.pids
        self._backend, self._flight = formed.backend, formed.ledger_store
        self._state = State.READY
        if in_ipython():
            self._engines.activate(self._ids)
        # The next generation starts in the background: forked from the
        # fork server, it is ready well before it is needed. start() and
        # reset() launch it at once, a run after a restart once its tasks
        # are on the ranks.
        self._spares_due = self.spares

    def _launch_due_spares(self):
        """Launch the next generation of spares if it is due. Launching
        takes about 0.1 s (a fork per rank, ipyparallel's bookkeeping):
        after a restart it runs on a thread of its own once the first
        run's tasks are on the ranks, so the run that recovers does not
        wait for it (Engines.launch(background=True))."""
        if self._spares_due:
            self._spares_due = False
            self._launch(self._generation + 1, background=True)

    # -- running code ----------------------------------------------------
    def _ensure_ready(self):
        """Raise if the cluster cannot run; finish a restart, or check a
        group a failed rank may have poisoned, first."""
        if self._state == State.STOPPED:
            raise RuntimeError("the cluster is not running: use "
                               "`with Cluster(...) as cluster:` or start()")
        if self._state == State.BROKEN:
            raise RuntimeError(
                "ranks of this cluster are stuck, and it cannot restart "
                "engines it did not start (profile=...): restart the "
                "ipyparallel cluster, then create a new Cluster")
        if self._state == State.RESTARTING:
            # A run follows at once: the next spares go out once its tasks
            # are on the ranks, not before (see _run_on_ranks).
            self._finish_restart()
        elif self._state == State.SUSPECT:
            self._health_check()

    def _health_check(self):
        """After a rank raised, make sure the group still works: a gloo
        group whose wait timed out is poisoned for good."""
        self._state = State.READY
        try:
            self._run_on_ranks(engine.call, (engine.barrier, (), {}),
                               HEALTH_TIMEOUT)
        except (HangError, RankError):
            # _run_on_ranks has begun a restart if ranks were stuck or
            # dead; starting another would kill those fresh engines.
            if self._state not in (State.RESTARTING, State.BROKEN):
                self._begin_restart()
            self._ensure_ready()

    def run(self, fn, /, *args, timeout=None, kwargs=None, **fn_kwargs):
        """Call fn(*args, **fn_kwargs) on every rank; results in rank order.

        Each rank's printed output is echoed, grouped and prefixed by rank.
        Raises HangError if some rank has not returned within `timeout`
        seconds (default: the cluster's), RankError if some rank raised.

        `timeout` and `kwargs` are the cluster's own keywords. Keywords
        of those names for fn go in the mapping `kwargs`, which fn gets
        as it is: `cluster.run(fetch, kwargs={"timeout": 5}, timeout=30)`
        calls fetch(timeout=5) on every rank, and waits 30 s for them.
        A keyword given both ways is a TypeError.
        """
        both = set(fn_kwargs) & set(kwargs or {})
        if both:
            raise TypeError(f"run() got keyword {sorted(both)[0]!r} both "
                            f"directly and in kwargs=")
        fn_kwargs.update(kwargs or {})
        return self._run_when_ready(engine.call, (fn, args, fn_kwargs),
                                    timeout)

    def run_cell(self, source, filename, timeout=None):
        """Run notebook source on every rank (the `%%ranks` magic)."""
        return self._run_when_ready(engine.run_source, (source, filename),
                                    timeout)

    def _run_when_ready(self, fn, args, timeout):
        if timeout is not None:
            timeout = check_timeout(timeout)
        self._ensure_ready()
        return self._run_on_ranks(fn, args,
                                  self.timeout if timeout is None else timeout)

    def _run_on_ranks(self, fn, args, timeout):
        """Send fn(*args) to every rank, wait (bounded), echo output, and
        turn failures into RankError and stuck ranks into HangError."""
        ars = self._engines.submit(self._ids, fn, *args)
        self._launch_due_spares()
        out = outcome.settle(ars, timeout, outcome.Generation(
            self._engines, self._ids, self._pids, self._is_alive,
            store=self._flight,
            dump=self._placement.stack_dumps(self._tmp),
            local=self._placement.local))
        if out.errors:
            if out.pending or out.dead:
                self._begin_restart()
            else:
                self._state = State.SUSPECT
            raise RankError(out.errors, blocked=out.pending,
                            ledger=out.ledger, ledger_error=out.ledger_error)
        if out.pending:
            self._begin_restart()
            raise HangError(out.pending, timeout, self.world_size,
                            out.stacks, ledger=out.ledger,
                            restarts=self._state != State.BROKEN,
                            ledger_error=out.ledger_error)
        return [ar.get(timeout=1) for ar in ars]

    def ledger(self):
        """Every rank's Flight Recorder ledger, side by side, with the
        first divergence (chapter 5). Between runs the ranks answer on
        their main thread, so the ledger shows call sites too."""
        from .ledger import Ledger
        self._ensure_ready()
        records = self._engines.call_each(self._ids, flight.record)
        return Ledger(self.world_size, dict(enumerate(records)))

    def _is_alive(self, rank):
        """As the placement can tell: a local rank's process is looked
        at; a remote one is alive while its engine is registered."""
        return self._placement.alive(self._engines, self._ids[rank],
                                     self._pids[rank])


@atexit.register
def _stop_all():
    for cluster in list(_clusters):
        cluster.stop()
