"""ddpdemo.runtime.cluster on real gloo groups: results, hangs, failures,
inputs, isolation and clean-up. Each test is bounded by pytest-timeout."""
import os
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
import torch

import ddpdemo
from ddpdemo.runtime import forkserver, guard
from ddpdemo.runtime import cluster as cluster_module, engine, outcome
from ddpdemo.runtime import waiting
from ddpdemo.runtime.engines import Engines

from conftest import StandInResult



def rank_tensor(rank):
    """The documentation's example: rank r holds arange(2) + 1 + 2r."""
    return torch.arange(2, dtype=torch.int64) + 1 + 2 * rank


def all_reduce_example():
    import torch.distributed as dist
    t = rank_tensor(dist.get_rank())
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def lonely_barrier():
    import torch.distributed as dist
    if dist.get_rank() == 0:
        dist.barrier()
    return dist.get_rank()


def raise_on_rank_1():
    import torch.distributed as dist
    if dist.get_rank() == 1:
        raise ValueError("rank 1 is unhappy")
    dist.barrier()


def ipp_processes():
    """Controllers, fork servers and engines that this test process
    started (guarded with its pid; a forked engine keeps its fork server's
    command line): other people's clusters on the machine are not ours."""
    mine = (f"{guard.__name__} {os.getpid()} ",
            f"{forkserver.__name__} {os.getpid()} ")
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if "ipyparallel" in cmd and any(m in cmd for m in mine):
            found.append(proc.info["pid"])
    return found


def gone(pid, zombies_count=False):
    """True once pid has exited; a zombie counts as exited only where no
    one may reap it (engines orphaned by a killed kernel)."""
    if not psutil.pid_exists(pid):
        return True
    try:
        return zombies_count and \
            psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_until_gone(pids, tmp=None, within=10, zombies_count=False):
    """Poll (bounded) until every pid has exited and tmp is removed;
    return the pids still there and whether tmp still exists."""
    waiting.until(lambda: all(gone(p, zombies_count) for p in pids)
                  and not (tmp and os.path.exists(tmp)), within, every=0.1)
    left = [p for p in pids if not gone(p, zombies_count)]
    return left, bool(tmp and os.path.exists(tmp))


def reference_sum(world_size):
    """Single-process reference for all_reduce(SUM)."""
    return sum(rank_tensor(r) for r in range(world_size))




@pytest.mark.fast
def test_all_reduce_two_ranks_matches_reference(cluster):
    results = cluster.run(all_reduce_example)
    assert len(results) == 2
    for t in results:
        assert torch.equal(t, reference_sum(2))
    assert results[0].tolist() == [4, 6]


def my_rank():
    import torch.distributed as dist
    return dist.get_rank()


@pytest.mark.fast
def test_results_come_back_in_rank_order(cluster):
    assert cluster.run(my_rank) == [0, 1]


def wait_for_store(key, timeout, kwargs=None):
    """A function whose own keywords are named like the cluster's."""
    return {"key": key, "timeout": timeout, "kwargs": kwargs}


@pytest.mark.fast
def test_fn_gets_keywords_named_like_the_clusters_through_kwargs(cluster):
    """`timeout` (and `kwargs`) are the cluster's keywords: fn gets its own
    of those names through the mapping kwargs=, as it is, while the
    cluster's timeout still bounds the run."""
    got = cluster.run(wait_for_store, "k", timeout=10,
                      kwargs={"timeout": 7, "kwargs": {"a": 1}})
    assert got == [{"key": "k", "timeout": 7, "kwargs": {"a": 1}}] * 2
    # Keywords given both ways are refused before anything runs.
    with pytest.raises(TypeError, match="'key' both directly and in"):
        cluster.run(wait_for_store, key="k", kwargs={"key": "j",
                                                     "timeout": 1})
    # timeout= is still the cluster's: checked as its own, not fn's.
    with pytest.raises(ValueError, match="positive number"):
        cluster.run(wait_for_store, "k", timeout=0, kwargs={"timeout": 7})


def test_environment_set_per_rank(cluster):
    env = cluster.run(lambda: {k: __import__("os").environ[k]
                               for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE")})
    assert env == [{"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2"},
                   {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}]


@pytest.mark.fast
def test_lonely_barrier_raises_hang_error_naming_rank_0(cluster):
    timeout = 2.0
    start = time.monotonic()
    with pytest.raises(ddpdemo.HangError) as info:
        cluster.run(lonely_barrier, timeout=timeout)
    elapsed = time.monotonic() - start
    assert info.value.ranks == [0]
    assert isinstance(info.value, TimeoutError)
    # The run's own timeout bounded it, not the cluster's (20 s).
    assert timeout <= elapsed < cluster.timeout
    message = str(info.value)
    assert "rank 0" in message and "(finished: rank 1)" in message
    # Where rank 0 is stuck: this file's barrier line, then torch's barrier.
    assert "test_cluster.py" in message and "dist.barrier()" in message
    assert info.value.stacks[0][-1][2] == "barrier"
    # The ledger was built (a failure to would be named in the report).
    assert info.value.ledger is not None and info.value.ledger_error is None
    # ... and the next run works on a fresh group.
    assert cluster.run(all_reduce_example)[1].tolist() == [4, 6]


@pytest.mark.fast
def test_exception_on_one_rank_raises_rank_error(cluster):
    with pytest.raises(ddpdemo.RankError) as info:
        cluster.run(raise_on_rank_1)
    assert list(info.value.errors) == [1]
    assert "ValueError: rank 1 is unhappy" in info.value.errors[1]
    assert info.value.blocked == [0]
    assert "rank 1" in str(info.value)
    assert cluster.run(all_reduce_example)[0].tolist() == [4, 6]


def test_a_ledger_that_cannot_be_built_is_named_in_the_report(
        cluster, monkeypatch):
    """A bug in the ledger's code (Ledger raising, in this process) shows
    in the RankError with its reason; the run's error is still reported
    and the cluster recovers."""
    def broken(*args, **kwargs):
        raise KeyError("entries")

    monkeypatch.setattr(outcome, "Ledger", broken)
    with pytest.raises(ddpdemo.RankError) as info:
        cluster.run(raise_on_rank_1)
    assert "ValueError: rank 1 is unhappy" in info.value.errors[1]
    assert info.value.ledger is None
    assert str(info.value).splitlines()[-1] == (
        "No ledger: the ranks' Flight Recorder ledger could not be built "
        "(KeyError: 'entries').")
    monkeypatch.undo()
    assert cluster.run(all_reduce_example)[0].tolist() == [4, 6]


@pytest.mark.fast
def test_killed_engine_is_named_and_recovered(cluster):
    victim = cluster.pids[1]

    def die_on_rank_1():
        import os
        import signal
        import torch.distributed as dist
        if dist.get_rank() == 1:
            os.kill(os.getpid(), signal.SIGKILL)   # as the OOM killer would
        dist.barrier()

    with pytest.raises(ddpdemo.RankError) as info:
        cluster.run(die_on_rank_1, timeout=10)
    # Rank 1 is named as killed; rank 0, whose barrier peer vanished, may
    # fail too (gloo reports the closed connection) or still be waiting.
    assert info.value.errors[1] == "process died (signal SIGKILL)"
    assert set(info.value.errors) | set(info.value.blocked) == {0, 1}
    assert not psutil.pid_exists(victim) or \
        psutil.Process(victim).status() == psutil.STATUS_ZOMBIE
    assert cluster.run(all_reduce_example)[0].tolist() == [4, 6]


def exit_on_rank_1(how):
    import os
    import sys
    import torch.distributed as dist
    if dist.get_rank() == 1:
        if how == "sys.exit":
            sys.exit()      # in a task: raised, the engine lives on
        os._exit(0)         # the process ends, exit status 0
    dist.barrier()


@pytest.mark.parametrize("how,said", [
    ("sys.exit", "SystemExit: "), ("os._exit", "process died (exit code 0)")])
def test_a_rank_that_exits_cleanly_is_named(cluster, how, said):
    """Exit status 0 is how a rank ended, not "not yet"
    (tests/test_engines.py checks it is read back at once)."""
    with pytest.raises(ddpdemo.RankError) as info:
        cluster.run(exit_on_rank_1, how, timeout=10)
    assert info.value.errors[1] == said
    assert cluster.run(all_reduce_example)[0].tolist() == [4, 6]


def test_rank_output_is_grouped_and_prefixed(cluster, capsys):
    def shout():
        import torch.distributed as dist
        print(f"hello from {dist.get_rank()}")
    cluster.run(shout)
    assert capsys.readouterr().out.splitlines() == [
        "[rank 0] hello from 0", "[rank 1] hello from 1"]


@pytest.mark.parametrize("kwargs, error, text", [
    (dict(world_size=0), ValueError, "positive int"),
    (dict(world_size=-2), ValueError, "positive int"),
    (dict(world_size=1.5), TypeError, "positive int"),
    (dict(world_size=True), TypeError, "positive int"),
    (dict(world_size="2"), TypeError, "positive int"),
    (dict(backend="mpi"), ValueError, "'auto', 'gloo', 'nccl'"),
    (dict(timeout=0), ValueError, "positive number"),
    (dict(timeout=-1), ValueError, "positive number"),
    (dict(timeout=float("inf")), ValueError, "positive number"),
    (dict(timeout="5"), TypeError, "positive number"),
    (dict(sbatch_arg=["-p", "gpu"]), TypeError, "sbatch_arg for engines="),
    (dict(engines="slurm", hosts={"a": 2}), TypeError, "hosts for engines="),
    (dict(engines="ssh"), TypeError, "needs hosts="),
])
def test_bad_input_is_rejected_before_anything_starts(kwargs, error, text):
    # What a Cluster starts itself (its controller, its fork server, an
    # engine started the slow way) is a child of this process; the spares
    # another cluster forks meanwhile, in the background after a restart,
    # are its fork server's children, not ours.
    before = set(psutil.Process().children())
    with pytest.raises(error, match=text):
        ddpdemo.Cluster(**kwargs)
    assert set(psutil.Process().children()) <= before


def test_nccl_with_too_few_gpus_says_how_many():
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(ValueError, match=f"{gpus} GPU"):
        ddpdemo.Cluster(world_size=gpus + 1, backend="nccl")


def test_run_timeout_is_validated(cluster):
    with pytest.raises(ValueError, match="positive number"):
        cluster.run(all_reduce_example, timeout=0)


def test_four_ranks_and_two_clusters_at_once():
    with ddpdemo.Cluster(world_size=4, backend="gloo") as big, \
            ddpdemo.Cluster(world_size=2, backend="gloo") as small:
        assert [t.tolist() for t in big.run(all_reduce_example)] == \
            [reference_sum(4).tolist()] * 4
        assert [t.tolist() for t in small.run(all_reduce_example)] == \
            [[4, 6]] * 2
        assert big.tmpdir != small.tmpdir


def test_tcp_rendezvous_on_loopback():
    with ddpdemo.Cluster(world_size=2, backend="gloo",
                         rendezvous="tcp") as c:
        assert c.rendezvous == "tcp"
        assert c.run(all_reduce_example)[0].tolist() == [4, 6]


def test_local_cluster_listens_on_loopback_only_and_leaves_nothing():
    others = set(ipp_processes())   # the module's fixture cluster, say
    with ddpdemo.Cluster(world_size=2, backend="gloo") as c:
        c.run(all_reduce_example)
        pids = set(ipp_processes()) - others
        tmp = c.tmpdir
        assert len(pids) >= 3   # controller and two engines
        addresses = set()
        for pid in pids:
            for conn in psutil.Process(pid).net_connections("inet"):
                if conn.status == psutil.CONN_LISTEN:
                    addresses.add(conn.laddr.ip)
        assert addresses and addresses <= {"127.0.0.1", "::1"}
    assert wait_until_gone(pids, tmp) == ([], False)


def test_engines_die_with_a_killed_kernel(tmp_path):
    """A kernel killed with SIGKILL runs no clean-up; the guard must, for
    the ranks' engines and the spares alike."""
    script = tmp_path / "kernel.py"
    script.write_text(textwrap.dedent("""
        import sys, time, ddpdemo
        c = ddpdemo.Cluster(world_size=2, backend="gloo").start()
        deadline = time.monotonic() + 120
        while not c.spares_ready() and time.monotonic() < deadline:
            time.sleep(0.1)
        print(" ".join(map(str, c.pids + c.spare_pids)), c.tmpdir,
              flush=True)
        time.sleep(60)
    """))
    proc = subprocess.Popen([sys.executable, str(script)],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().split()
        pids = [int(p) for p in line[:4]]
        assert len(pids) == 4 and all(psutil.pid_exists(p) for p in pids)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    # SIGKILL skips atexit: the guards end the engines (orphans that
    # nobody may reap stay zombies) and the controller's removes the files
    # (over 10 s on a loaded 2-core machine once: returns when done).
    tmp = line[4]
    left = wait_until_gone(pids, tmp, within=60, zombies_count=True)
    assert left == ([], False), sorted(
        os.path.join(root, f) for root, _, files in os.walk(tmp)
        for f in files)


def test_interpreter_exit_stops_everything(tmp_path):
    """No stop(), no with: the atexit hook must still clean up."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import ddpdemo
        c = ddpdemo.Cluster(world_size=2, backend="gloo").start()
        print(" ".join(map(str, c.pids)), c.tmpdir, flush=True)
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True,
                         text=True, timeout=120).stdout.split()
    pids, tmp = [int(p) for p in out[:2]], out[2]
    assert wait_until_gone(pids, tmp) == ([], False)


def test_existing_profile_uses_its_engines_over_tcp(tmp_path, monkeypatch):
    """profile=...: engines someone else started (ipcluster); rendezvous
    over TCP; a hang is reported, and the cluster says it cannot recover."""
    env = dict(os.environ, IPYTHONDIR=str(tmp_path))
    ipcluster = [sys.executable, "-m", "ipyparallel.cluster"]
    subprocess.run([*ipcluster, "start", "--n=2", "--profile=ddp",
                    "--daemonize", "--ip=127.0.0.1"],
                   env=env, check=True, timeout=60)
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path))
    try:
        with ddpdemo.Cluster(world_size=2, backend="gloo", profile="ddp",
                             master_addr="127.0.0.1") as c:
            assert c.rendezvous == "tcp"
            assert c.run(all_reduce_example)[1].tolist() == [4, 6]
            with pytest.raises(ddpdemo.HangError):
                c.run(lonely_barrier, timeout=2)
            with pytest.raises(RuntimeError, match="cannot restart"):
                c.run(all_reduce_example)
    finally:
        subprocess.run([*ipcluster, "stop", "--profile=ddp"], env=env,
                       timeout=60, capture_output=True)


def test_kernel_shutdown_stops_everything():
    """A Jupyter kernel that started a cluster and is shut down normally
    (as nbval and the notebook server do) leaves nothing behind, whether
    its own clean-up ends within the kernel manager's grace or the
    manager SIGTERMs it first (after half its shutdown_wait_time, 2.5 s;
    seen on a loaded 2-core machine): the directory is removed before the
    controller, whose guard removes it if the kernel dies first. Stopping
    had once waited 5 s on ipyparallel, past that grace, after the
    controller was gone: the directory stayed."""
    from jupyter_client.manager import start_new_kernel
    km, kc = start_new_kernel(kernel_name="python3")
    kernel = km.provisioner.process
    outputs = []
    try:
        reply = kc.execute_interactive(
            "import ddpdemo\n"
            "c = ddpdemo.Cluster(world_size=2, backend='gloo').start()\n"
            "print('CLUSTER', *c.pids, c.tmpdir)", timeout=120,
            output_hook=lambda msg: outputs.append(msg))
        assert reply["content"]["status"] == "ok"
    finally:
        km.shutdown_kernel(now=False)
        kc.stop_channels()
    text = "".join(m["content"].get("text", "") for m in outputs
                   if m["msg_type"] == "stream")
    # (the start's progress line may come first on the same stream)
    words = text.split("CLUSTER", 1)[1].split()
    pids, tmp = [int(p) for p in words[:2]], words[2]
    # The guards act within a second or so, but a loaded machine was seen
    # to take over 10 s; this returns as soon as everything is gone.
    left = wait_until_gone(pids, tmp, within=60)
    assert left == ([], False), (
        f"kernel exit status {kernel.returncode}; left in the directory: "
        + repr(sorted(os.path.join(root, f) for root, _, files
                      in os.walk(tmp) for f in files)))


def test_engine_dying_at_start_fails_fast_and_quotes_its_log():
    """Not the start timeout: a dead engine is noticed at once."""
    before = set(ipp_processes())
    start, start_timeout = time.monotonic(), 240
    with pytest.raises(RuntimeError, match="exited while starting") as info:
        ddpdemo.Cluster(world_size=2, backend="gloo",
                        start_timeout=start_timeout,
                        env={"PYTHONHOME": "/nonexistent"}).start()
    assert time.monotonic() - start < start_timeout / 2
    assert "process died (exit code 1)" in str(info.value)
    assert "its log ends:" in str(info.value)
    assert wait_until_gone(set(ipp_processes()) - before) == ([], False)


def gloo_timeout_on_rank_0():
    """Rank 0's barrier times out (rank 1 never comes): its gloo group is
    poisoned, though every rank returned or raised."""
    import datetime
    import torch.distributed as dist
    if dist.get_rank() == 0:
        dist.barrier(timeout=datetime.timedelta(seconds=1))


def rank_1_raises_alone():
    """Rank 1 raises, rank 0 returns: no one is left waiting, but the
    group may be poisoned, so the cluster checks it before the next run."""
    import torch.distributed as dist
    if dist.get_rank() == 1:
        raise ValueError("rank 1 alone")


class FaultyEngines(Engines):
    """The real engines, with faults injected at the boundary the cluster
    talks to (as tests/test_group.py stands in for them): `hang_barriers`
    health-check barriers are sent nowhere and never finish, and every
    kill of a generation (a restart) is counted."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.hang_barriers, self.killed = 0, []

    def submit(self, ids, fn, *args):
        if self.hang_barriers and args and args[0] is engine.barrier:
            self.hang_barriers -= 1
            return [StandInResult(done=False) for _ in ids]  # stuck
        return super().submit(ids, fn, *args)

    def kill(self, pids, generation):
        self.killed.append(generation)
        return super().kill(pids, generation)


@pytest.fixture
def stand_in(monkeypatch):
    """A cluster whose engines are FaultyEngines; yields (cluster,
    its engines)."""
    monkeypatch.setattr(cluster_module, "Engines", FaultyEngines)
    with ddpdemo.Cluster(world_size=2, backend="gloo", timeout=20) as c:
        yield c, c._engines


def test_poisoned_group_is_replaced(stand_in):
    cluster, engines = stand_in
    with pytest.raises(ddpdemo.RankError) as info:
        cluster.run(gloo_timeout_on_rank_0)
    assert list(info.value.errors) == [0]
    assert "Timed out" in info.value.errors[0]
    assert engines.killed == []          # only suspect, so far
    assert cluster.run(all_reduce_example)[0].tolist() == [4, 6]
    assert engines.killed == [0]         # the health check restarted once


def test_health_check_that_hangs_restarts_once(stand_in):
    """A health check whose barrier hangs has already begun a restart in
    _run_on_ranks; a second would kill the engines the first launched."""
    cluster, engines = stand_in
    with pytest.raises(ddpdemo.RankError):
        cluster.run(rank_1_raises_alone)  # suspect: check the group first
    assert cluster.state == "suspect" and engines.killed == []
    engines.hang_barriers = 1
    assert cluster.run(all_reduce_example)[0].tolist() == [4, 6]
    assert engines.hang_barriers == 0 and engines.killed == [0]


def wait_for_spares(cluster, within=120):
    """Poll (bounded) until the cluster's spares have registered."""
    return waiting.until(cluster.spares_ready, within, every=0.1)


@pytest.mark.fast
def test_a_hang_promotes_the_spares_and_starts_new_ones():
    with ddpdemo.Cluster(world_size=2, backend="gloo", timeout=20) as c:
        assert wait_for_spares(c)
        old, spares = c.pids, c.spare_pids
        assert len(spares) == 2 and not set(spares) & set(old)
        with pytest.raises(ddpdemo.HangError):
            c.run(lonely_barrier, timeout=2)
        assert wait_until_gone(old) == ([], False)   # stuck ones killed
        assert c.run(all_reduce_example)[1].tolist() == [4, 6]
        assert sorted(c.pids) == sorted(spares)      # promoted
        assert c.run(my_rank) == [0, 1]
        new_spares = c.spare_pids
        assert len(new_spares) == 2
        assert not set(new_spares) & set(spares + old)
        everyone = c.pids + new_spares
    assert wait_until_gone(everyone) == ([], False)


def test_without_spares_a_restart_launches_new_engines():
    with ddpdemo.Cluster(world_size=2, backend="gloo", spares=False) as c:
        assert c.spares_ready() and c.spare_pids == []
        old = c.pids
        c.reset()
        assert not set(c.pids) & set(old) and c.spare_pids == []
        assert c.run(all_reduce_example)[0].tolist() == [4, 6]


def test_backend_variable_decides_what_auto_means(monkeypatch):
    """DDPDEMO_BACKEND (set by `ddpdemo.book.execute --backend`) is what a
    notebook's Cluster(backend="auto") uses; a named backend is kept."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    monkeypatch.setenv("DDPDEMO_BACKEND", "nccl")
    with pytest.raises(ValueError, match=f"{gpus} GPU"):
        ddpdemo.Cluster(world_size=gpus + 1)
    assert ddpdemo.Cluster(world_size=gpus + 1, backend="gloo").backend == \
        "gloo"
    monkeypatch.setenv("DDPDEMO_BACKEND", "gloo")
    assert ddpdemo.Cluster(world_size=2).backend == "gloo"
    monkeypatch.setenv("DDPDEMO_BACKEND", "mpi")
    with pytest.raises(ValueError, match="unknown backend 'mpi'"):
        ddpdemo.Cluster(world_size=2)


def random_draws():
    import random

    import numpy
    return random.random(), numpy.random.random()


def test_forked_ranks_draw_their_own_random_state(cluster):
    """Engines forked from one server must not share Python's or numpy's
    random state, as fresh processes would not."""
    (py0, np0), (py1, np1) = cluster.run(random_draws)
    assert py0 != py1 and np0 != np1
