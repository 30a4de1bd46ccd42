"""What the tests share: a cluster per test module, sending test functions
to the ranks by value, and running a script under torchrun.

A module changes its cluster with a CLUSTER dict of Cluster arguments,
e.g. `CLUSTER = dict(world_size=4, timeout=60)`.
"""
import os
import sys

import cloudpickle
import pytest

import ddpdemo
from ddpdemo.scripts import collect

TORCHRUN_TIMEOUT = 120   # s: two ranks import torch on a busy 2-core box
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True, scope="module")
def _functions_travel_by_value(request):
    """The engines cannot import a test module, so functions defined in
    one are pickled by value."""
    cloudpickle.register_pickle_by_value(request.module)


@pytest.fixture(scope="module")
def cluster(request):
    """A running gloo cluster for a module's tests (2 ranks, timeout 20 s
    unless the module's CLUSTER says otherwise), stopped after them."""
    kwargs = dict(world_size=2, backend="gloo", timeout=20)
    kwargs.update(getattr(request.module, "CLUSTER", {}))
    with ddpdemo.Cluster(**kwargs) as c:
        yield c


def launch_ranks(*args, classic=False, nproc=2, cwd=ROOT,
                 timeout=TORCHRUN_TIMEOUT):
    """Run `args` (a script, or `-m module`, and its arguments) on `nproc`
    ranks under torchrun, or under the classic torch.distributed.launch;
    `--standalone` picks a free port. Returns the CompletedProcess."""
    if classic:
        launcher = ["torch.distributed.launch", "--nproc_per_node"]
    else:
        launcher = ["torch.distributed.run", "--nproc-per-node"]
    cmd = [sys.executable, "-m", launcher[0], "--standalone", launcher[1],
           str(nproc), *args]
    # As the notebooks run them: bounded, ranks killed with the launcher.
    return collect(cmd, timeout=timeout, cwd=cwd)[0]


@pytest.fixture(scope="module")
def two_hosts(request):
    """Hosts a and b (tests/hosts.py) for a module's tests, removed
    afterwards even if a test fails; what a killed run left is swept
    first. Skipped, with the reason, where they cannot be made; a module
    that needs more (mpiexec, Slurm) says so with a `missing()` of its
    own, which returns that reason or None."""
    import hosts
    import needs
    why = getattr(request.module, "missing", hosts.missing)()
    if why:
        needs.missing(f"{request.module.__name__} needs: {why}")
    hosts.sweep()
    made = hosts.TwoHosts().start()
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="session")
def torchrun():
    """launch_ranks, for tests: torchrun(*args, classic=False, ...)."""
    return launch_ranks


class StandInResult:
    """ipyparallel's AsyncResult, stood in for: done or not, failed or
    not, with printed output and a data channel (what the runtime's
    waits and reports read of it)."""

    def __init__(self, done=True, error=None, stdout="", stderr=""):
        self.done, self.error = done, error
        self.stdout, self.stderr = stdout, stderr
        self.data = {}

    def ready(self):
        return self.done

    def successful(self):
        return self.error is None

    def get(self, timeout=None):
        if self.error:
            raise self.error
        return "ok"

    def wait_for_output(self, timeout=None):
        pass


class StandInEngines:
    """ddpdemo.runtime.engines.Engines, stood in for where the runtime's
    steps (group, outcome, the placements) talk to it: each call_each is
    recorded and answered as ranks would answer it (identify: `found`;
    prepare: each rank's facts; open_tcp_store: an address; flight.record:
    an empty ledger), engines are started nowhere (`started`), and every
    rank ended by SIGKILL. tests/test_engines.py checks each name here
    against the real class."""
    death_notice_s = 0.0

    def __init__(self, found=(), tmpdir="/tmp/ddpdemo-stand-in"):
        self.found, self.tmpdir = list(found), tmpdir
        self.calls, self.started = [], []

    def call_each(self, ids, fn, per_rank=None, **kwargs):
        from ddpdemo import flight
        from ddpdemo.runtime import engine
        args = [per_rank(r) if per_rank else () for r in range(len(ids))]
        self.calls.append((fn, list(ids), args, kwargs))
        if fn is engine.identify:
            return self.found
        if fn is engine.open_tcp_store:
            return [("127.0.0.1", 4321)]
        if fn is engine.prepare:
            return [{"pid": 100 + r, "gpus": 0} for r in range(len(ids))]
        if fn is flight.record:     # as a rank answers, with no entries
            return [{"rank": i, "buffer_size": flight.DEFAULT_BUFFER,
                     "dump": {"entries": []}} for i in ids]
        return [None] * len(ids)

    def exit_code(self, pid, wait=2.0):
        return -9

    def start_engines(self, n, set_id, environment, **kwargs):
        self.started.append(dict(kwargs, n=n, set_id=set_id,
                                 environment=environment))

    def sets(self, generation=None):
        return {}

    def forget(self, generation=None):
        return {}

    def pids(self, generation=None):
        return []

    def registered(self, engine_id):
        return engine_id >= 0


@pytest.fixture(scope="session")
def Result():
    """The AsyncResult stand-in class: Result(done=False), ..."""
    return StandInResult


@pytest.fixture(scope="session")
def FakeEngines():
    """The Engines stand-in class: FakeEngines(found=[(rank, host)])."""
    return StandInEngines
