"""One visual style for every figure in the book, and the figures that are
not tied to one concept: a per-rank timeline (chapters 3 to 5) and what
each rank holds before and after a collective (chapter 3).

Figures are built with `matplotlib.figure.Figure`, not pyplot, so a cell
that ends with `fig` shows it exactly once, and a notebook's stored text
output for it (`<Figure size ... with N Axes>`) is the same on every run.
Importing this module in a notebook registers a PNG view of such figures
(without it only the text would be stored, and the book would show none).
Figures of one concept live beside it (e.g. ring.py) and use
`new_figure`, `rank_color` and `box` from here.

    before, after = by_collective(cluster.run(five_collectives))
    plot_collectives(before, after)
"""
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle


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
    # A hatch per label, in order; there are at most five labels.
    hatches = dict(zip(labels, ("", "///", "...", "xx", "\\\\"),
                       strict=False))
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
        handles = [Patch(facecolor="0.6", alpha=0.85 if hatches[name] == ""
                         else 0.35, hatch=hatches[name], edgecolor="black",
                         linewidth=0.5, label=name) for name in labels]
        fig.legend(handles=handles, loc="outside lower center",
                   ncol=len(labels), fontsize=8, frameon=False)
    return fig


def box(ax, x, y, color, *, face=None, alpha=1.0, edge=None, linewidth=1.0,
        inset=0.1):
    """A value's box at (x, y) in a grid of unit cells, in a rank's colour:
    filled with `face` (default the colour) at `alpha`, outlined in `edge`
    (default the colour), `inset` short of the cell top and bottom."""
    patch = Rectangle((x + 0.05, y + inset), 0.9, 1 - 2 * inset,
                      facecolor=color if face is None else face, alpha=alpha,
                      edgecolor=color if edge is None else edge,
                      linewidth=linewidth)
    ax.add_patch(patch)
    return patch


def by_collective(results):
    """Regroup per-rank results into (before, after).

    results: one (tensor before, {collective: tensor after}) pair per
    rank, in rank order, as `Cluster.run` returns them. Gives before as a
    list by rank and after as {collective: list by rank}, keeping the
    order in which the ranks listed the collectives.
    """
    before = [b for b, _ in results]
    names = list(results[0][1])
    after = {name: [a[name] for _, a in results] for name in names}
    return before, after


def plot_collectives(before, after, title="what each rank holds"):
    """One row for the tensors before, then one row per collective after.

    Each rank's tensor is a line of boxes in its colour, one value per
    box; a value that changed from before is drawn bold on a filled box.
    The chapter makes the `dist.*` calls itself, on the ranks, and hands
    what they really held to this function. Returns the figure.
    """
    rows = [("before (every collective starts here)", before, None)]
    rows += [(f"after dist.{name}", held, before)
             for name, held in after.items()]
    width = max(len(t.reshape(-1)) for _, held, _ in rows for t in held)
    world_size = len(before)
    fig, axes = new_figure(len(rows), 1, height=0.4 + 0.32 * world_size
                           * len(rows) + 0.3 * len(rows))
    for ax, (label, held, ref) in zip(axes[:, 0], rows, strict=True):
        for rank, tensor in enumerate(held):
            values = tensor.reshape(-1).tolist()
            old = ref[rank].reshape(-1).tolist() if ref is not None else None
            for i, value in enumerate(values):
                changed = old is not None and (i >= len(old)
                                               or old[i] != value)
                box(ax, i, rank, rank_color(rank),
                    alpha=0.35 if changed else 0.08)
                ax.text(i + 0.5, rank + 0.5, number(value), ha="center",
                        va="center", fontsize=8,
                        fontweight="bold" if changed else "normal")
        ax.set_xlim(-0.1, width + 0.1)
        ax.set_ylim(world_size - 0.05, -0.05)
        ax.set_yticks([r + 0.5 for r in range(world_size)],
                      [f"rank {r}" for r in range(world_size)], fontsize=8)
        ax.set_xticks([])
        ax.spines[["bottom", "left"]].set_visible(False)
        ax.set_title(label, fontsize=9, loc="left")
    fig.suptitle(title, fontsize=10)
    return fig


def number(value):
    """A value as a box shows it: floats without trailing zeros."""
    return f"{value:g}" if isinstance(value, float) else str(value)
