"""One visual style for every figure in the book, and the figures that more
than one chapter draws (a per-rank timeline). Chapters 1 to 6.

Figures are built with `matplotlib.figure.Figure`, not pyplot, so a cell
that ends with `fig` shows it exactly once, and a notebook's stored text
output for it (`<Figure size ... with N Axes>`) is the same on every run.
Importing this module in a notebook registers a PNG view of such figures
(without it only the text would be stored, and the book would show none).
Chapter-specific figures live beside the concept they draw (e.g. ring.py)
and use `new_figure` and `rank_color` from here.
"""
from matplotlib.figure import Figure
from matplotlib.patches import Patch

def _show_in_notebooks():
    """Let IPython render a bare Figure as PNG, as pyplot's inline backend
    would, without switching backends or touching pyplot's state."""
    try:
        from IPython import get_ipython
        from IPython.core.pylabtools import print_figure
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["image/png"].for_type(
            Figure, lambda fig: print_figure(fig, "png", bbox_inches="tight"))


_show_in_notebooks()

RANK_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52",
               "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
WIDTH = 7.0   # inches: fits the book's text column


def rank_color(rank):
    """The colour of a rank, the same in every figure of the book."""
    return RANK_COLORS[rank % len(RANK_COLORS)]


def new_figure(nrows=1, ncols=1, height=None, **kwargs):
    """A figure and its axes (always a 2-D array), in the book's style."""
    fig = Figure(figsize=(WIDTH, height or 1.0 + 1.6 * nrows),
                 layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    for ax in axes.flat:
        ax.spines[["top", "right"]].set_visible(False)
    return fig, axes


def timeline(spans, title="", marks=()):
    """Per-rank horizontal bars from real timestamps.

    spans: (rank, label, start, end) in seconds, e.g. "sleep" then
    "barrier" for each rank; marks: (rank, label, time) points, drawn as
    ticks. One row per rank, rank 0 on top; time starts at the earliest
    span. Colour says the rank, hatching the label (legend below the
    axes). A span shorter than 1% of the axis is drawn 1% wide, so that
    a quick step (a read, a barrier nobody waited in) stays visible.
    Returns the figure.
    """
    spans = list(spans)
    ranks = sorted({s[0] for s in spans} | {m[0] for m in marks})
    times = [s[2] for s in spans] + [s[3] for s in spans] + [m[2] for m in
                                                             marks]
    t0 = min(times)
    min_width = 0.01 * (max(times) - t0)
    fig, axes = new_figure(height=1.3 + 0.55 * len(ranks))
    ax = axes[0, 0]
    labels = sorted({s[1] for s in spans}, key=[s[1] for s in spans].index)
    hatches = dict(zip(labels, ("", "///", "...", "xx", "\\\\")))
    for rank, label, start, end in spans:
        ax.barh(rank, max(end - start, min_width), left=start - t0,
                height=0.6, color=rank_color(rank),
                alpha=0.85 if hatches[label] == "" else 0.35,
                hatch=hatches[label], edgecolor="black", linewidth=0.5)
    for rank, label, t in marks:
        ax.plot([t - t0] * 2, [rank - 0.4, rank + 0.4], color="black", lw=1.5)
        ax.annotate(label, (t - t0, rank - 0.42), fontsize=8, ha="center",
                    va="bottom")
    ax.set_yticks(ranks, [f"rank {r}" for r in ranks])
    # room above each row for the marks' labels; rank 0 on top
    ax.set_ylim(ranks[-1] + 0.5, ranks[0] - 0.5 - 0.35 * bool(marks))
    ax.set_xlabel("seconds")
    ax.set_title(title)
    if labels:
        # Grey swatches: the hatching names the step, whatever the rank.
        handles = [Patch(facecolor="0.6", alpha=0.85 if hatches[l] == ""
                         else 0.35, hatch=hatches[l], edgecolor="black",
                         linewidth=0.5, label=l) for l in labels]
        fig.legend(handles=handles, loc="outside lower center",
                   ncol=len(labels), fontsize=8, frameon=False)
    return fig
