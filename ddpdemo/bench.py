"""Side-by-side measurements behind the book's speed claims (chapter 7).

    python -m ddpdemo.bench            # quick: a few repetitions
    python -m ddpdemo.bench --full     # more repetitions, more sizes
    python -m ddpdemo.bench --no-book  # skip the strict nbval run

Every number is a median of several runs taken in this one run on this
machine, so ratios compare like with like. The table is for people; the
last line is one JSON object for machines. Targets (issue 8) are checked
and printed next to each ratio.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WORLD_SIZE = 4
HANG_TIMEOUT = 5.0            # s, the lonely barrier's bound
SIZES_QUICK = [2 ** k for k in (10, 14, 18, 22, 26)]        # 1 KiB..64 MiB
SIZES_FULL = [2 ** k for k in range(10, 27, 2)]
RING_BYTES = 16 * 2 ** 20
TARGETS = {"ready_vs_torchrun": ("<=", 1.5), "torchrun_vs_rerun": (">=", 50),
           "recover_s": ("<=", 10.0), "book_nbval_s": ("<=", 240.0),
           "fr_rerun_ratio": ("<=", 1.05)}   # flight hook: issue 12
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def oneshot():
    """What torchrun runs: form the group, one all_reduce, leave."""
    from . import launch
    import torch
    import torch.distributed as dist
    rank, _, device = launch.init()
    t = torch.arange(2, device=device) + 1 + 2 * rank
    dist.all_reduce(t)
    launch.finish()


def _all_reduce_once():
    import torch
    import torch.distributed as dist
    t = torch.arange(2) + 1 + 2 * dist.get_rank()
    dist.all_reduce(t)
    return t.tolist()


def _lonely_barrier():
    import torch.distributed as dist
    if dist.get_rank() == 0:
        dist.barrier()


def _median_seconds(fn, nbytes, iters):
    """Median seconds of fn(t), t a float32 tensor of nbytes, on this
    rank: one warm-up call, then each timed call starts from a barrier so
    the ranks start it together."""
    import torch
    import torch.distributed as dist
    t = torch.ones(nbytes // 4)
    fn(t)
    times = []
    for _ in range(iters):
        dist.barrier()
        start = time.perf_counter()
        fn(t)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _time_all_reduce(sizes, iters):
    """Seconds per dist.all_reduce for each size in bytes, on this rank."""
    import torch.distributed as dist
    return {size: _median_seconds(dist.all_reduce, size, iters)
            for size in sizes}


def _time_ring_and_builtin(nbytes, iters):
    import torch.distributed as dist
    from .ring import ring_all_reduce
    return {name: _median_seconds(fn, nbytes, iters)
            for name, fn in (("ring", ring_all_reduce),
                             ("builtin", dist.all_reduce))}


def busbw(nbytes, seconds, world_size):
    """nccl-tests' bus bandwidth for all_reduce, in GB/s: algbw = bytes /
    time, times 2(N-1)/N, the share of the data each rank must send."""
    return nbytes / seconds * 2 * (world_size - 1) / world_size / 1e9


def memcpy_gbps(nbytes=64 * 2 ** 20, iters=5):
    """Bytes copied per second by one tensor copy, the bound gloo's
    all_reduce works against on one machine (it moves data in memory)."""
    import torch
    src, dst = torch.ones(nbytes // 4), torch.empty(nbytes // 4)
    dst.copy_(src)
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - start)
    return nbytes / statistics.median(times) / 1e9


def cluster_ready(reps):
    """(seconds to the first all_reduce result, a running cluster)."""
    import ddpdemo
    times = []
    for i in range(reps):
        start = time.perf_counter()
        cluster = ddpdemo.Cluster(world_size=WORLD_SIZE, backend="gloo",
                                  timeout=60).start()
        cluster.run(_all_reduce_once)
        times.append(time.perf_counter() - start)
        if i < reps - 1:
            cluster.stop()
    return statistics.median(times), cluster


def torchrun_oneshot(reps):
    times = []
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={WORLD_SIZE}", "-m", "ddpdemo.bench",
           "--oneshot"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, timeout=300,
                       env=env, cwd=ROOT)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def hang_and_recover(cluster, reps):
    import ddpdemo
    detect, recover = [], []
    for _ in range(reps):
        start = time.perf_counter()
        try:
            cluster.run(_lonely_barrier, timeout=HANG_TIMEOUT)
        except ddpdemo.HangError:
            pass
        raised = time.perf_counter()
        cluster.run(_all_reduce_once)
        detect.append(raised - start)
        recover.append(time.perf_counter() - raised)
    return statistics.median(detect), statistics.median(recover)


def book_nbval():
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "book", "-q"],
                   check=True, capture_output=True, cwd=ROOT, timeout=1800)
    return time.perf_counter() - start


def measure(full=False, book=True):
    reps = 5 if full else 3
    r = {}
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
        r["hang_detect_s"], r["recover_s"] = hang_and_recover(
            cluster, 3 if full else 1)
        r["hang_timeout_s"] = HANG_TIMEOUT
        r["default_timeout_s"] = _default_timeout()
        sizes = SIZES_FULL if full else SIZES_QUICK
        per_rank = cluster.run(_time_all_reduce, sizes, 10 if full else 5,
                               timeout=600)
        r["allreduce_busbw_GBps"] = {
            str(size): busbw(size, max(p[size] for p in per_rank),
                             WORLD_SIZE) for size in sizes}
        r["memcpy_GBps"] = memcpy_gbps()
        ring = cluster.run(_time_ring_and_builtin, RING_BYTES,
                           10 if full else 5, timeout=600)
        r["ring_vs_builtin"] = (max(p["ring"] for p in ring)
                                / max(p["builtin"] for p in ring))
    finally:
        cluster.stop()
    from . import flight                    # flight hook: recorder on/off
    r.update(flight.overhead(WORLD_SIZE, 30 if full else 15))
    if book:
        r["book_nbval_s"] = book_nbval()
    return r


def _default_timeout():
    """The installed torch's default process-group timeout for gloo."""
    from torch.distributed.constants import default_pg_timeout
    return default_pg_timeout.total_seconds()


def verdicts(results):
    """{key: True/False} for each target the results can be judged on."""
    out = {}
    for key, (op, bound) in TARGETS.items():
        if key in results:
            value = results[key]
            out[key] = value <= bound if op == "<=" else value >= bound
    if "hang_detect_s" in results:
        out["hang_detect_s"] = (results["hang_detect_s"]
                                <= results["hang_timeout_s"] + 3)
    return out


def table(results):
    lines = [f"{'measurement':<28}{'value':>14}  target"]
    checks = verdicts(results)
    for key, value in results.items():
        if isinstance(value, dict):
            for size, bw in value.items():
                lines.append(f"{key + ' ' + human_size(int(size)):<28}"
                             f"{bw:>14.4g}")   # small sizes: 0.0002 GB/s
            continue
        target = ""
        if key in TARGETS:
            op, bound = TARGETS[key]
            target = f"{op} {bound:g}: {'met' if checks[key] else 'MISSED'}"
        elif key == "hang_detect_s":
            target = (f"<= timeout + 3 s: "
                      f"{'met' if checks[key] else 'MISSED'}")
        lines.append(f"{key:<28}{value:>14.3f}  {target}")
    return "\n".join(lines)


def human_size(nbytes):
    """1024 -> "1 KiB": message sizes as people read them."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024:
            return f"{nbytes:g} {unit}"
        nbytes /= 1024
    return f"{nbytes:g} TiB"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--no-book", action="store_true")
    parser.add_argument("--oneshot", action="store_true",
                        help=argparse.SUPPRESS)   # what torchrun runs
    args, _ = parser.parse_known_args(argv)
    if args.oneshot:
        return oneshot()
    os.environ.setdefault("IPP_NONINTERACTIVE", "1")
    results = measure(full=args.full, book=not args.no_book)
    print(table(results))
    print(json.dumps(results))


if __name__ == "__main__":
    main()


def fit_alpha_beta(sizes, seconds):
    """Fit T(n) = c + n * beta to all_reduce times: c (s), the fixed cost
    of one all_reduce, which the ring model calls 2(N-1) alpha (one alpha
    per message, 2(N-1) messages); beta, seconds per byte. Least squares
    on relative errors (weights 1/T), so that the small messages, whose
    times are all c, weigh as much as the large ones. Chapter 7."""
    import numpy as np
    t = np.asarray(seconds, float)
    beta, c = np.polyfit(np.asarray(sizes, float), t, 1, w=1 / t)
    return float(c), float(beta)


def plot_busbw(sizes, runs, memcpy=None,
               title="all_reduce bus bandwidth against message size"):
    """Bus bandwidth (nccl-tests' definition) per message size, one line
    per run, runs = {world_size: seconds per size}, measured; with the
    memory-copy bound as a line. Chapter 7."""
    from .figures import new_figure, rank_color
    fig, axes = new_figure(height=3.2)
    ax = axes[0, 0]
    for i, (world_size, seconds) in enumerate(runs.items()):
        bw = [busbw(n, t, world_size) for n, t in zip(sizes, seconds)]
        ax.plot(sizes, bw, marker="o", color=rank_color(i),
                label=f"gloo all_reduce, {world_size} ranks")
    if memcpy:
        ax.axhline(memcpy, color="black", ls="--", lw=1,
                   label="memcpy on this machine")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes, [human_size(n) for n in sizes], fontsize=8)
    ax.set_xlabel("message size")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return fig
