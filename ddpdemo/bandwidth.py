"""How fast all_reduce moves data: nccl-tests' bus bandwidth, the memory
copy bound gloo works against on one machine, the alpha-beta model, the
timers the ranks run, and the bandwidth figure. Chapter 1.

    per_rank = cluster.run(time_all_reduce, sizes, iters)   # on the ranks
    busbw(nbytes, max(p[nbytes] for p in per_rank), world_size)
"""
import statistics
import time


def busbw(nbytes, seconds, world_size):
    """nccl-tests' bus bandwidth for all_reduce, in GB/s: algbw = bytes /
    time, times 2(N-1)/N, the share of the data each rank must send."""
    return nbytes / seconds * 2 * (world_size - 1) / world_size / 1e9


def human_size(nbytes):
    """1024 -> "1 KiB": message sizes as people read them."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024:
            return f"{nbytes:g} {unit}"
        nbytes /= 1024
    return f"{nbytes:g} TiB"


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


def fit_alpha_beta(sizes, seconds):
    """Fit T(n) = c + n * beta to all_reduce times: c (s), the fixed cost
    of one all_reduce, which the ring model calls 2(N-1) alpha (one alpha
    per message, 2(N-1) messages); beta, seconds per byte. Least squares
    on relative errors (weights 1/T), so that the small messages, whose
    times are all c, weigh as much as the large ones. Chapter 1."""
    import numpy as np
    t = np.asarray(seconds, float)
    beta, c = np.polyfit(np.asarray(sizes, float), t, 1, w=1 / t)
    return float(c), float(beta)


# -- run on the ranks ----------------------------------------------------

def median_seconds(fn, nbytes, iters):
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


def time_all_reduce(sizes, iters):
    """Seconds per dist.all_reduce for each size in bytes, on this rank."""
    import torch.distributed as dist
    return {size: median_seconds(dist.all_reduce, size, iters)
            for size in sizes}


def time_ring_and_builtin(nbytes, iters):
    """Seconds per call of the hand-made ring and of dist.all_reduce."""
    import torch.distributed as dist
    from .ring import ring_all_reduce
    return {name: median_seconds(fn, nbytes, iters)
            for name, fn in (("ring", ring_all_reduce),
                             ("builtin", dist.all_reduce))}


# -- figure --------------------------------------------------------------

def plot_busbw(sizes, runs, memcpy=None,
               title="all_reduce bus bandwidth against message size"):
    """Bus bandwidth (nccl-tests' definition) per message size, one line
    per run, runs = {world_size: seconds per size}, measured; with the
    memory-copy bound as a line. Chapter 1."""
    from .figures import new_figure, rank_color
    fig, axes = new_figure(height=3.2)
    ax = axes[0, 0]
    for i, (world_size, seconds) in enumerate(runs.items()):
        bw = [busbw(n, t, world_size)
              for n, t in zip(sizes, seconds, strict=True)]
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
