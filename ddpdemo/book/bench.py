"""Side-by-side measurements behind the book's speed claims (chapters 0 and 1).

    python -m ddpdemo.book.bench            # quick: a few repetitions
    python -m ddpdemo.book.bench --full     # more repetitions, more sizes
    python -m ddpdemo.book.bench --no-book  # skip the strict nbval run
    python -m ddpdemo.book.bench --chapters 00 03   # nbval of these only

Every number is a median of several runs taken in this one run on this
machine, so ratios compare like with like: recovery with and without
spare engines, a cluster against torchrun. The table is for people; the
last line is one JSON object for machines. Targets (issues 8 and 15) are
checked and printed next to each value.
"""
import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

from ..bandwidth import (busbw, fit_alpha_beta, human_size,  # noqa: F401
                        memcpy_gbps, plot_busbw, time_all_reduce,
                        time_ring_and_builtin)
from ..runtime.errors import package_root
from ..scripts import collect

WORLD_SIZE = 4
HANG_TIMEOUT = 5.0            # s, the lonely barrier's bound
SIZES_QUICK = [2 ** k for k in (10, 14, 18, 22, 26)]        # 1 KiB..64 MiB
SIZES_FULL = [2 ** k for k in range(10, 27, 2)]
RING_BYTES = 16 * 2 ** 20
TARGETS = {"ready_vs_torchrun": ("<=", 1.5), "torchrun_vs_rerun": (">=", 50),
           "recover_s": ("<=", 1.0), "recover_p95_s": ("<=", 0.3),
           "book_nbval_oneshots": ("<=", 16.0),
           "fr_rerun_ratio": ("<=", 1.05), "explain_8x2000_s": ("<=", 2.0),
           "check_2000_lines_s": ("<=", 1.0)}
# s a hang may take past its timeout: stacks and ledgers are gathered
# side by side (issue 24), so 4 ranks are named as fast as 2.
DETECT_SLACK = 0.3
ROOT = package_root()          # the checkout: book/, _toc.yml


# -- what runs on the ranks ----------------------------------------------

def oneshot():
    """What torchrun runs: form the group, one all_reduce, leave."""
    from .. import launch
    import torch
    import torch.distributed as dist
    rank, _, device = launch.init()
    t = torch.arange(2, device=device) + 1 + 2 * rank
    dist.all_reduce(t)
    out = os.environ.get("DDPDEMO_ONESHOT_OUT")   # the test's check
    if out:
        with open(os.path.join(out, f"rank-{rank}.txt"), "w") as f:
            f.write(str(t.tolist()))
    launch.finish()


def _all_reduce_once():
    import torch
    import torch.distributed as dist
    t = torch.arange(2) + 1 + 2 * dist.get_rank()
    dist.all_reduce(t)
    return t.tolist()


def _small_all_reduces(iters):
    """Median seconds of one 8-byte all_reduce on this rank, where the
    recorder's per-collective cost is the largest share."""
    import statistics
    import torch
    import torch.distributed as dist
    t, times = torch.ones(2), []
    for _ in range(iters):
        start = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _lonely_barrier():
    import torch.distributed as dist
    if dist.get_rank() == 0:
        dist.barrier()


# -- measurements ----------------------------------------------------------

def cluster_ready(reps, **kwargs):
    """(median seconds to the first all_reduce result, a running cluster)."""
    import ddpdemo
    times = []
    for i in range(reps):
        start = time.perf_counter()
        cluster = ddpdemo.Cluster(world_size=WORLD_SIZE, backend="gloo",
                                  timeout=60, **kwargs).start()
        cluster.run(_all_reduce_once)
        times.append(time.perf_counter() - start)
        if i < reps - 1:
            cluster.stop()
    return statistics.median(times), cluster


def torchrun_oneshot(reps):
    """Median seconds of one torchrun launch of `oneshot` on 4 ranks."""
    times = []
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={WORLD_SIZE}", "-m", __spec__.name,
           "--oneshot"]
    for _ in range(reps):
        start = time.perf_counter()
        done = collect(cmd, timeout=300, cwd=ROOT)[0]   # as a notebook would
        times.append(time.perf_counter() - start)
        done.check_returncode()
    return statistics.median(times)


def wait_for_spares(cluster, within=120.0):
    """Block until the cluster's spare engines have registered (bounded),
    so a measured recovery is the one a reader gets after reading."""
    from ..runtime import waiting
    waiting.until(cluster.spares_ready, within, every=0.1)


def hang_and_recover(cluster, reps, p95=False):
    """(median seconds to HangError, median seconds from it to the next
    result[, their 95th percentile]): a lonely barrier, then an
    all_reduce on the new group."""
    import ddpdemo
    detect, recover = [], []
    for _ in range(reps):
        wait_for_spares(cluster)
        start = time.perf_counter()
        with contextlib.suppress(ddpdemo.HangError):
            cluster.run(_lonely_barrier, timeout=HANG_TIMEOUT)
        raised = time.perf_counter()
        cluster.run(_all_reduce_once)
        detect.append(raised - start)
        recover.append(time.perf_counter() - raised)
    medians = statistics.median(detect), statistics.median(recover)
    return (*medians, percentile(recover, 95)) if p95 else medians


def percentile(values, p):
    """The p-th percentile, inclusive (with few values: near the max)."""
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def overhead(world_size=4, reruns=15, iters=200):
    """The Flight Recorder's cost: two clusters side by side,
    recorder on (torch's default size) and off, measured in alternation so
    load on the machine falls on both alike. Medians: the notebook's rerun
    of a 4-rank all_reduce (ms) and one small all_reduce inside the ranks
    (us, the slowest rank's)."""
    import statistics
    from .. import Cluster
    from ..runtime import flight
    sizes = {"on": flight.DEFAULT_BUFFER, "off": 0}
    clusters = {k: Cluster(world_size, backend="gloo", timeout=60,
                           flight_recorder=v) for k, v in sizes.items()}
    runs = {k: [] for k in sizes}
    inner = {k: [] for k in sizes}
    try:
        for c in clusters.values():
            c.start()
            c.run(_small_all_reduces, 20)                  # warm up
        for _ in range(reruns):
            for k, c in clusters.items():
                start = time.perf_counter()
                c.run(_all_reduce_once)
                runs[k].append(time.perf_counter() - start)
        for _ in range(3):
            for k, c in clusters.items():
                inner[k].append(max(c.run(_small_all_reduces, iters)))
    finally:
        for c in clusters.values():
            c.stop()
    r = {}
    for k in sizes:
        r[f"rerun_ms_fr_{k}"] = statistics.median(runs[k]) * 1e3
        r[f"allreduce_us_fr_{k}"] = statistics.median(inner[k]) * 1e6
    r["fr_rerun_ratio"] = r["rerun_ms_fr_on"] / r["rerun_ms_fr_off"]
    r["fr_allreduce_ratio"] = (r["allreduce_us_fr_on"]
                               / r["allreduce_us_fr_off"])
    return r


def spare_memory_mb(cluster):
    """Memory of the cluster's spare engines, summed, in MB: (resident,
    unique to them)."""
    from ..runtime.processes import rss_bytes
    wait_for_spares(cluster)
    return (rss_bytes(cluster.spare_pids) / 1e6,
            rss_bytes(cluster.spare_pids, unique=True) / 1e6)


_DURATION = re.compile(r"^([\d.]+)s (?:setup|call|teardown)\s+"
                       r"(\S+\.ipynb)::")


def book_nbval(chapters=()):
    """Strict nbval of the book's notebooks (those of _toc.yml, in its
    order) in one pytest run: ({notebook: seconds}, total seconds,
    passed, CPU seconds). A notebook's seconds are the sum of its cells'
    setup, call and teardown times (pytest --durations); the CPU seconds
    are those of every process that started while it ran (CpuMeter).
    Needs the book extra."""
    from .execute import book_notebooks
    paths = [p for p in book_notebooks(ROOT)
             if not chapters or p.name.startswith(tuple(chapters))]
    names = [p.name for p in paths]
    start = time.perf_counter()
    with CpuMeter() as cpu:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "--durations=0",
             "--durations-min=0", *[os.path.relpath(p, ROOT) for p in paths]],
            capture_output=True, text=True, cwd=ROOT, timeout=1800)
    total = time.perf_counter() - start
    return (chapter_seconds(done.stdout, names), total, done.returncode == 0,
            cpu.seconds)


class CpuMeter:
    """CPU seconds (user + system) of every process that starts while the
    meter is on below `root` (this process unless given): kernels,
    engines, torchrun and its ranks, pytest. What other programs start
    meanwhile is not counted (another pytest worker's ranks, another
    session's jobs), though their load still slows the run: like every
    number here, take it on a machine doing nothing else. A thread
    samples them every `every` s; a process seen below `root` once is
    counted to its end, even if its parent exits first. A process's last
    sample is what it counts for, so one that lives shorter than that, or
    its last fraction, is missed: the sum is a lower bound, which is
    what the floor below needs."""

    def __init__(self, every=0.2, root=None):
        self.every = every
        self.root = os.getpid() if root is None else root
        self._cpu = {}
        self._done = threading.Event()

    def __enter__(self):
        import psutil
        # What runs already is not counted: (pid, start time) pairs, since
        # a pid can be reused by a process started later.
        self._before = {(p.pid, p.info["create_time"]) for p in
                        psutil.process_iter(["create_time"])}
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name="ddpdemo-cpu-meter")
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        # One sample more at most: a pass over the process table.
        self._thread.join(timeout=60)
        if self._thread.is_alive():
            raise TimeoutError("the CPU meter's last sample took over 60 s")

    def _loop(self):
        while True:
            self.sample()
            if self._done.wait(self.every):
                return

    def sample(self):
        import psutil
        try:
            below = {p.pid for p in
                     psutil.Process(self.root).children(recursive=True)}
        except psutil.NoSuchProcess:
            below = set()
        for p in psutil.process_iter(["create_time", "cpu_times"]):
            key = (p.pid, p.info["create_time"])
            times = p.info["cpu_times"]
            if key in self._before or times is None:
                continue
            if p.pid in below or key in self._cpu:
                self._cpu[key] = times.user + times.system

    @property
    def seconds(self):
        return sum(self._cpu.values())


def torch_import_cpu(reps=3):
    """Median CPU seconds (user + system) of a fresh interpreter that
    imports torch and exits: what every process that imports torch pays
    before it does anything (each kernel, fork server, torchrun agent and
    rank the book starts)."""
    import resource
    cpu = []
    for _ in range(reps):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "import torch"], check=True,
                       timeout=300)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime
                   + after.ru_stime - before.ru_stime)
    return statistics.median(cpu)


def cores():
    """The cores this process may run on (what the book's run could use)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # macOS
        return os.cpu_count()


def chapter_seconds(durations, names):
    """{notebook: seconds} summed from pytest's --durations lines."""
    per = {n: 0.0 for n in names}
    for line in durations.splitlines():
        match = _DURATION.match(line.strip())
        if match:
            name = os.path.basename(match[2])
            per[name] = per.get(name, 0.0) + float(match[1])
    return per


def measure(full=False, book=True, chapters=()):
    reps = 5 if full else 3
    r = {}
    r.update(explain_speed())
    r.update(check_speed())
    r["torchrun_oneshot_s"] = torchrun_oneshot(reps)
    r["cluster_ready_s"], cluster = cluster_ready(reps)
    r["ready_vs_torchrun"] = r["cluster_ready_s"] / r["torchrun_oneshot_s"]
    try:
        reruns = []
        for _ in range(30 if full else 15):
            start = time.perf_counter()
            cluster.run(_all_reduce_once)
            reruns.append(time.perf_counter() - start)
        r["rerun_ms"] = statistics.median(reruns) * 1e3
        r["torchrun_vs_rerun"] = r["torchrun_oneshot_s"] * 1e3 / r["rerun_ms"]
        r["spare_rss_MB"], r["spare_uss_MB"] = spare_memory_mb(cluster)
        r["hang_detect_s"], r["recover_s"], r["recover_p95_s"] = \
            hang_and_recover(cluster, 20 if full else 5, p95=True)
        r["hang_timeout_s"] = HANG_TIMEOUT
        r["default_timeout_s"] = _default_timeout()
        sizes = SIZES_FULL if full else SIZES_QUICK
        per_rank = cluster.run(time_all_reduce, sizes, 10 if full else 5,
                               timeout=600)
        r["allreduce_busbw_GBps"] = {
            str(size): busbw(size, max(p[size] for p in per_rank),
                             WORLD_SIZE) for size in sizes}
        r["memcpy_GBps"] = memcpy_gbps()
        ring = cluster.run(time_ring_and_builtin, RING_BYTES,
                           10 if full else 5, timeout=600)
        r["ring_vs_builtin"] = (max(p["ring"] for p in ring)
                                / max(p["builtin"] for p in ring))
    finally:
        cluster.stop()
    # The same recovery without spares, in this run: the side-by-side.
    _, plain = cluster_ready(1, spares=False)
    try:
        _, r["recover_no_spares_s"] = hang_and_recover(plain, 3 if full
                                                       else 2)
    finally:
        plain.stop()
    r["recover_speedup"] = r["recover_no_spares_s"] / r["recover_s"]
    # The Flight Recorder's cost, on and off.
    r.update(overhead(WORLD_SIZE, 30 if full else 15))
    if book:
        (per, r["book_nbval_s"], r["book_nbval_passed"],
         r["book_cpu_s"]) = book_nbval(chapters)
        r["chapter_nbval_s"] = per
        # In one-shots (issue 37): the machine's speed divides out. The
        # one-shot timed before the book and again after it, the mean.
        r["oneshot_after_book_s"] = torchrun_oneshot(reps)
        oneshots = r["torchrun_oneshot_s"], r["oneshot_after_book_s"]
        r["book_nbval_oneshots"] = book_in_oneshots(r["book_nbval_s"],
                                                    *oneshots)
        # The least time the book's CPU seconds take with every core busy
        # all along, in the same one-shots: no scheduling (more workers, a
        # better order) brings the book under this; only less CPU does.
        r["cores"] = cores()
        r["torch_import_cpu_s"] = torch_import_cpu(reps)
        r["book_cpu_floor_oneshots"] = book_in_oneshots(
            r["book_cpu_s"] / r["cores"], *oneshots)
    return r


def book_in_oneshots(book_s, *oneshots_s):
    """The book's nbval time in torchrun one-shots: over the mean of the
    one-shots timed beside it."""
    return book_s / statistics.mean(oneshots_s)


def explain_speed(world_size=8, entries=2000, reps=3):
    """`python -m ddpdemo.explain` on 8 ranks' dumps of 2000 entries
    (issue 33): real entries, with their call sites, that a one-rank gloo
    group records here; copied as ranks 0..7, the last rank one
    collective short. Median seconds of the analysis in this process
    (torch imported), and of the whole command in a fresh interpreter
    (which reads the dumps with torch's loader without importing torch:
    ddpdemo.jobfiles.torch_read_dump)."""
    import pickle
    import tempfile
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import _dump_fr_trace
    from .. import explain
    os.environ["TORCH_FR_BUFFER_SIZE"] = str(entries)  # read at init
    with tempfile.TemporaryDirectory(prefix="ddpdemo-explain-") as folder:
        dist.init_process_group("gloo", rank=0, world_size=1,
                                store=dist.HashStore())
        try:
            t = torch.ones(4)
            for _ in range(entries):
                dist.all_reduce(t)
            dump = pickle.loads(_dump_fr_trace(
                includeCollectives=True, includeStackTraces=True,
                onlyActive=False))
        finally:
            dist.destroy_process_group()
        for rank in range(world_size):
            cut = dump["entries"][:entries - (rank == world_size - 1)]
            with open(os.path.join(folder, f"rank_{rank}"), "wb") as f:
                pickle.dump(dict(dump, entries=cut), f)
        here, command, text = _here_and_as_command(
            lambda: explain.explain([folder]), ["ddpdemo.explain", folder],
            reps, check=True)
        assert f"collective #{entries}:" in text, text
    return {"explain_8x2000_s": here, "explain_command_s": command}


def _here_and_as_command(call, argv, reps, check=False):
    """Median seconds of call() in this process and of `python -m *argv`
    in a fresh interpreter (bounded: 60 s a run), over `reps` runs each,
    and call()'s last result. check=True: the command must exit 0."""
    times, whole, result = [], [], None
    for _ in range(reps):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", *argv], capture_output=True,
                       check=check, timeout=60)
        whole.append(time.perf_counter() - start)
    return statistics.median(times), statistics.median(whole), result


# One block of a training script for check_speed: a rank-0-first helper,
# a loader built through it, an epoch loop with DDP, a rank-0 branch;
# block i calls block i-1's loader, so calls nest 40 deep. Block 0's
# rank-0 loader passes `rank` (the chapter 5 bug): one finding.
_BLOCK = """
@contextmanager
def zero_first_{i}(local_rank):
    if local_rank not in [-1, 0]:
        dist.barrier()
    yield
    if local_rank == 0:
        dist.barrier()


def loader_{i}(path, rank=-1, batch_size=8):
    with zero_first_{i}(rank):
        dataset = list(range(batch_size))
    if {i} > 0:
        dataset += loader_{p}(path, rank=rank)
    sampler = None if rank == -1 else DistributedSampler(dataset)
    return DataLoader(dataset, sampler=sampler)


def train_{i}(model, epochs, opt):
    rank = int(os.environ.get("RANK", -1))
    local_rank = int(os.environ.get("LOCAL_RANK", -1))
    torch.cuda.set_device(local_rank)
    model = DDP(model.cuda(), device_ids=[local_rank])
    train_loader = loader_{i}("train", rank=rank)
    if rank in [-1, 0]:
        val_loader = loader_{i}("val", rank={val})
    for epoch in range(epochs):
        train_loader.sampler.set_epoch(epoch)
        for images, labels in train_loader:
            loss = model(images).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        total = torch.zeros(2, device=local_rank)
        dist.all_reduce(total)
        if rank == 0:
            print(epoch, total.tolist())
            torch.save(model.module.state_dict(), "last.pt")
        dist.barrier()
    return model
"""
_HEAD = """import os
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
"""


def check_script(lines=2000):
    """A training script of `lines` lines for `ddpdemo.check` (issue 47):
    blocks of the shape above, each calling the one before."""
    blocks, i = [_HEAD], 0
    while sum(b.count("\n") for b in blocks) < lines:
        blocks.append(_BLOCK.format(i=i, p=max(i - 1, 0),
                                    val="rank" if i == 0 else -1))
        i += 1
    text = "".join(blocks).splitlines()[:lines]
    return "\n".join(text) + "\n"


def check_speed(lines=2000, reps=3):
    """`python -m ddpdemo.check` on a script of 2000 lines (issue 47):
    median seconds of the check in this process, and of the whole
    command in a fresh interpreter."""
    import tempfile
    from ..triage import check
    with tempfile.TemporaryDirectory(prefix="ddpdemo-check-") as folder:
        path = os.path.join(folder, "train.py")
        with open(path, "w") as f:
            f.write(check_script(lines))
        here, command, found = _here_and_as_command(
            lambda: check.check([path]), ["ddpdemo.check", path], reps)
    assert [f["rule"] for f in found] == ["collective-on-some-ranks"], found
    return {"check_2000_lines_s": here, "check_command_s": command}


def _default_timeout():
    """The installed torch's default process-group timeout for gloo."""
    from torch.distributed.constants import default_pg_timeout
    return default_pg_timeout.total_seconds()


# -- judging and printing ----------------------------------------------------

def targets(results):
    """{key: (op, bound, how the bound reads)} for these results: the
    fixed TARGETS, and a hang detected within its timeout + DETECT_SLACK."""
    out = {key: (op, bound, f"{bound:g}")
           for key, (op, bound) in TARGETS.items()}
    if "hang_timeout_s" in results:
        out["hang_detect_s"] = ("<=",
                                results["hang_timeout_s"] + DETECT_SLACK,
                                f"timeout + {DETECT_SLACK:g} s")
    return out


def verdicts(results):
    """{key: True/False} for each target the results can be judged on."""
    return {key: (results[key] <= bound if op == "<="
                  else results[key] >= bound)
            for key, (op, bound, _) in targets(results).items()
            if key in results}


def table(results):
    lines = [f"{'measurement':<28}{'value':>14}  target"]
    checks, goals = verdicts(results), targets(results)
    for key, value in results.items():
        if isinstance(value, dict):
            for name, v in value.items():
                label = (human_size(int(name)) if name.isdigit()
                         else name.split("_")[0])
                lines.append(f"{key + ' ' + label:<28}"
                             f"{v:>14.4g}")   # small sizes: 0.0002 GB/s
            continue
        target = ""
        if key in checks:
            op, _, reads = goals[key]
            target = f"{op} {reads}: {'met' if checks[key] else 'MISSED'}"
        lines.append(f"{key:<28}{value:>14.3f}  {target}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--no-book", action="store_true")
    parser.add_argument("--chapters", nargs="*", default=(),
                        help="notebook name prefixes to run nbval on")
    parser.add_argument("--oneshot", action="store_true",
                        help=argparse.SUPPRESS)   # what torchrun runs
    args, _ = parser.parse_known_args(argv)
    if args.oneshot:
        return oneshot()
    os.environ.setdefault("IPP_NONINTERACTIVE", "1")
    results = measure(full=args.full, book=not args.no_book,
                      chapters=args.chapters)
    print(table(results))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
