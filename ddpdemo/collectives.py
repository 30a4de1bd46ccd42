"""Before and after: what each rank holds around a collective, as a figure.
Chapter 1, "all_reduce and its relatives".

Plumbing only: the chapter makes the `dist.*` calls itself, on the ranks,
and hands what the ranks really held to `plot_collectives`.

    before, after = by_collective(cluster.run(five_collectives))
    plot_collectives(before, after)
"""
from .figures import new_figure, rank_color


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
    Returns the figure.
    """
    rows = [("before (every collective starts here)", before, None)]
    rows += [(f"after dist.{name}", held, before)
             for name, held in after.items()]
    width = max(len(t.reshape(-1)) for _, held, _ in rows for t in held)
    world_size = len(before)
    fig, axes = new_figure(len(rows), 1, height=0.4 + 0.32 * world_size
                           * len(rows) + 0.3 * len(rows))
    for ax, (label, held, ref) in zip(axes[:, 0], rows):
        for rank, tensor in enumerate(held):
            values = tensor.reshape(-1).tolist()
            old = ref[rank].reshape(-1).tolist() if ref is not None else None
            for i, value in enumerate(values):
                changed = old is not None and (i >= len(old)
                                               or old[i] != value)
                _box(ax, i, rank, value, rank_color(rank), changed)
        ax.set_xlim(-0.1, width + 0.1)
        ax.set_ylim(world_size - 0.05, -0.05)
        ax.set_yticks([r + 0.5 for r in range(world_size)],
                      [f"rank {r}" for r in range(world_size)], fontsize=8)
        ax.set_xticks([])
        ax.spines[["bottom", "left"]].set_visible(False)
        ax.set_title(label, fontsize=9, loc="left")
    fig.suptitle(title, fontsize=10)
    return fig


def _box(ax, x, y, value, color, changed):
    from matplotlib.patches import Rectangle
    ax.add_patch(Rectangle((x + 0.05, y + 0.1), 0.9, 0.8, facecolor=color,
                           alpha=0.35 if changed else 0.08,
                           edgecolor=color, linewidth=1.0))
    ax.text(x + 0.5, y + 0.5, f"{value:g}" if isinstance(value, float)
            else str(value), ha="center", va="center", fontsize=8,
            fontweight="bold" if changed else "normal")
