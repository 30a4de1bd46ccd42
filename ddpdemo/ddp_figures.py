"""The figures of chapter 9, drawn from what the recording comm hook
(ddpdemo.ddp) wrote down on the ranks: parameters grouped into gradient
buckets, and a timeline of backward against the buckets' all_reduce.

Same style as every figure in the book (ddpdemo.figures): a bare
matplotlib Figure, rank colours, one text column wide.
"""
from .figures import RANK_COLORS, new_figure, rank_color


def buckets(layouts, title="Parameters in DDP's gradient buckets"):
    """One row per layout, each a list of buckets in the order DDP
    all-reduces them, each bucket a list of (parameter name, bytes).
    Parameters are drawn side by side, as wide as their gradients, in
    the bucket's order; the colour says the bucket. Returns the figure.
    Chapter 9."""
    layouts = dict(layouts)
    fig, axes = new_figure(height=1.0 + 0.7 * len(layouts))
    ax = axes[0, 0]
    for row, layout in enumerate(layouts.values()):
        left = 0
        for index, bucket in enumerate(layout):
            for name, size in bucket:
                ax.barh(row, size, left=left, height=0.6,
                        color=RANK_COLORS[index % len(RANK_COLORS)],
                        edgecolor="black", linewidth=0.5)
                if size > 0.06 * sum(s for b in layout for _, s in b):
                    ax.text(left + size / 2, row, name, ha="center",
                            va="center", fontsize=7)
                left += size
            ax.text(left, row - 0.36, f"bucket {index} ", ha="right",
                    va="bottom", fontsize=7)
    ax.set_yticks(range(len(layouts)), list(layouts))
    ax.set_ylim(len(layouts) - 0.5, -0.75)
    ax.set_xlabel("bytes of gradient, in all_reduce order")
    ax.set_title(title)
    return fig


def overlap(records, title="Backward and the buckets' all_reduce"):
    """records: one per rank, a dict with "backward" (start, end) of the
    gradient computation, "grads" (name -> time the gradient was ready)
    and "buckets" (dicts with index, start, end), all perf_counter times
    of that rank. Two lanes per rank: computing gradients (a tick per
    gradient) and all_reduce (a bar per bucket). Each rank's time starts
    at its own backward start (clocks of different processes are not
    compared); each bucket has a sub-row of its own, bucket 0 on top.
    Returns the figure. Chapter 9."""
    fig, axes = new_figure(height=1.0 + 1.1 * len(records))
    ax = axes[0, 0]
    labels = []
    for rank, rec in enumerate(records):
        t0 = rec["backward"][0]
        compute, comm = 2 * rank, 2 * rank + 1
        start, end = rec["backward"]
        ax.barh(compute, end - start, left=0, height=0.5, alpha=0.35,
                color=rank_color(rank), edgecolor="black", linewidth=0.5)
        for t in rec["grads"].values():
            ax.plot([t - t0] * 2, [compute - 0.25, compute + 0.25],
                    color="black", lw=1)
        n = max(1, len(rec["buckets"]))
        for i, b in enumerate(rec["buckets"]):   # one sub-row per bucket
            y = comm - 0.35 + (i + 0.5) * 0.7 / n
            ax.barh(y, b["end"] - b["start"], left=b["start"] - t0,
                    height=0.7 / n, color=rank_color(rank), hatch="///",
                    edgecolor="black", linewidth=0.5)
            ax.text(b["start"] - t0, y, f"b{b['index']} ", fontsize=6,
                    ha="right", va="center")
        labels += [f"rank {rank} gradients", f"rank {rank} all_reduce"]
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(len(labels) - 0.5, -0.7)
    ax.set_xlabel("seconds since this rank's backward started "
                  "(ticks: a gradient is ready)")
    ax.set_title(title)
    return fig
