"""The ipyparallel side of one Cluster: its controller and client, the
generations of engines it launched (ddpdemo.runtime.enginesets names
them), calls to the engines, how an engine ended. Where they run, and
every fact that depends on it, is the placement's
(ddpdemo.runtime.placement). Plumbing for ddpdemo.runtime.cluster, which
decides *when* (chapter 0, "How the live cluster works").

    engines = Engines(world_size=2, tmpdir=tmp).start()
    engines.launch(generation=0)
    ids = engines.wait_for_generation(2, 0, deadline)   # registered
    engines.call_each(ids, fn)              # bounded, results by rank
"""
import contextlib
import time

from . import controller, enginesets, processes, waiting
from .background import Background
from .placement import LocalPlacement

CALL_TIMEOUT = 60.0       # s; one bounded step of start-up (import, init)
POLL = 0.05               # s; how often a wait for engines looks


class Engines:
    """A controller, its client and the engine sets launched, where
    `placement` (default: this machine) puts them."""

    def __init__(self, world_size, tmpdir, placement=None, env=None):
        self.world_size = world_size
        self.tmpdir = tmpdir
        self.placement = placement or LocalPlacement(world_size)
        self._env = dict(env or {})
        self._ipp = self._client = None
        self._launching = Background(CALL_TIMEOUT, "launching engines")
        self._used = set()      # engine ids given to a group so far

    def start(self):
        """Start the controller (or connect to a running cluster); the
        client connects on first use, so engines launched meanwhile start
        while the controller does."""
        self._client = self.placement.existing_client()
        if self._client is not None:
            return self
        self.placement.start(self)
        self._ipp = controller.start(self.tmpdir, self.placement)
        return self

    @property
    def client(self):
        """ipyparallel's Client, connected once the controller is up."""
        if self._client is None and self._ipp is not None:
            self._client = self._ipp.connect_client_sync()
        return self._client

    def engine_env(self):
        """The environment every engine of this cluster shares."""
        return {"OMP_NUM_THREADS": "1", "PYTHONPATH": processes.pythonpath(),
                "IPP_NONINTERACTIVE": "1", **self.placement.engine_env(),
                **self._env}

    # -- engine sets ---------------------------------------------------
    def launch(self, generation, preload=(), background=False):
        """Launch a generation's engines where the placement puts them
        (`preload`: modules they import before registering); `background`:
        on a thread, returning at once (spares, launched while a run is on
        the ranks); what next reads the engine sets waits for it."""
        self._launching.settle()
        args = (self, generation, self.engine_env(), preload)
        if background:
            self._launching.run(self.placement.launch, *args)
        else:
            self.placement.launch(*args)

    def start_engines(self, n, set_id, environment, **kwargs):
        """One engine set of n engines (a placement's launch calls it)."""
        self._ipp.start_engines_sync(
            n, engine_set_id=set_id, environment=environment,
            engine_args=["--IPEngine.enable_nanny=False"], **kwargs)

    def sets(self, generation=None):
        """{set id: engine set} of one generation, or of all."""
        self._launching.settle()
        if self._ipp is None:
            return {}
        return {set_id: es for set_id, es in self._ipp.engines.items()
                if generation is None
                or enginesets.generation_of(set_id) == generation}

    def _launchers(self, generation=None, ended=False):
        """(set id, engine launcher) of every engine still recorded; with
        ended, also of those that have stopped (forks.RankEngineSetLauncher
        keeps them: how they ended is read from them)."""
        return [(set_id, el)
                for set_id, es in self.sets(generation).items()
                for el in list(getattr(es, "launchers", {}).values())
                + list(getattr(es, "ended", {}).values() if ended else [])]

    def forget(self, generation=None):
        """Take a generation's engine sets (or all) out of ipyparallel's
        cluster, so its stop leaves them to us: {set id: engine set}."""
        return {set_id: self._ipp.engines.pop(set_id)
                for set_id in self.sets(generation)}

    def pids(self, generation=None):
        """Process ids of the engines launched, in launch order."""
        return [el.pid for _, el in self._launchers(generation)
                if getattr(el, "pid", -1) > 0]

    def check_started(self, generation):
        """RuntimeError, quoting its log, if an engine of this generation
        exited (else it is waited for until the start timeout)."""
        for set_id, el in self._launchers(generation, ended=True):
            code = getattr(getattr(el, "process", None), "exit_code", None)
            if code is not None:
                tail = el.get_output().splitlines()[-5:]
                raise RuntimeError("\n".join(
                    [f"an engine exited while starting ({set_id}, "
                     f"{processes.describe_exit(code)}); its log ends:"]
                    + [f"    {line}" for line in tail]))

    def exit_code(self, pid, wait=2.0):
        """How the engine with this pid ended (negative: the signal), as
        its placement can tell; None if it cannot be known in `wait` s."""
        found = [el for _, el in self._launchers(ended=True)
                 if getattr(el, "pid", None) == pid]
        return self.placement.exit_code(found[0], wait) if found else None

    @property
    def death_notice_s(self):
        """How long after an engine dies `registered` may still say yes."""
        return self.placement.death_notice_s

    def registered(self, engine_id):
        """Whether the controller still counts this engine as alive."""
        return engine_id in self.client.ids

    def kill(self, pids, generation):
        """SIGKILL a generation's engines (a rank stuck in a gloo wait
        ignores SIGINT and SIGTERM), as their placement reaches them."""
        self.placement.kill(self, pids, generation)

    def stop_generation(self, generation):
        """Forget a generation's (dead) engine sets; remove their logs."""
        for set_id in self.sets(generation):
            self._ipp.stop_engines_sync(set_id)

    def stop(self, before_controller=None):
        """Kill every engine, stop the controller, close the client.
        `before_controller()` runs between the two: the cluster removes
        its directory there, while the controller's guard, which would
        remove it if this process were killed now, still runs."""
        self._launching.forget()    # its engines are stopped with the rest
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
        if self._ipp is not None:
            # ipyparallel rewrites its cluster file (making its directory
            # again) when it notices an engine set stop, which may be
            # after the cluster's directory has been removed: no file.
            self._ipp.cluster_file = ""
            self.placement.stop(self)
        if before_controller is not None:
            before_controller()
        if self._ipp is not None:
            controller.stop(self._ipp, self.placement)
        self._ipp = self._client = None

    # -- calling the engines ---------------------------------------------
    def wait_for_generation(self, n, generation, deadline, progress=None):
        """Ids of n registered engines no group has used, lowest first,
        now marked used (RuntimeError if one of `generation` died starting,
        TimeoutError after `deadline`, a time.monotonic())."""
        new = []

        def enough():
            new[:] = [i for i in self.client.ids if i not in self._used]
            if progress:
                progress.update(f"engines {min(len(new), n)}/{n}")
            if len(new) < n:
                self.check_started(generation)
            return len(new) >= n

        if not waiting.until(enough, deadline - time.monotonic(), POLL):
            raise TimeoutError(f"only {len(new)} of {n} engines started "
                               f"within the start timeout")
        ids = sorted(new)[:n]
        self._used.update(ids)
        self.client[ids].use_cloudpickle()  # notebook functions by value
        return ids

    def unused_count(self):
        """Registered engines no group has used yet: the spares."""
        return len([i for i in self.client.ids if i not in self._used])

    def call_each(self, ids, fn, per_rank=None, **kwargs):
        """fn on engines `ids` (rank order; `per_rank(r)`: rank r's
        arguments), waited for within CALL_TIMEOUT; results by rank."""
        ars = [self.client[eid].apply_async(
            fn, *(per_rank(r) if per_rank else ()), **kwargs)
            for r, eid in enumerate(ids)]
        deadline = time.monotonic() + CALL_TIMEOUT
        return [ar.get(timeout=max(0.1, deadline - time.monotonic()))
                for ar in ars]

    def submit(self, ids, fn, *args):
        """fn(*args) sent to engines `ids`: their AsyncResults, unwaited."""
        return [self.client[eid].apply_async(fn, *args) for eid in ids]

    def activate(self, ids):
        """Register ipyparallel's %px magics on these engines."""
        self.client[ids].activate()
