"""ddpdemo.figures: the book's shared figure helpers, checked on the
matplotlib objects they return (single process: no group is needed).
Each test is bounded by pytest-timeout."""

import pytest
from matplotlib.figure import Figure

from ddpdemo.figures import new_figure, rank_color, timeline

pytestmark = [pytest.mark.timeout(60), pytest.mark.fast]

SPANS = [(0, "work", 10.0, 10.2), (0, "barrier", 10.2, 10.6),
         (1, "work", 10.0, 10.6), (1, "barrier", 10.6, 10.601)]


def bars(fig):
    """(rank row, left, width) of every bar, in drawing order."""
    ax = fig.axes[0]
    return [(round(p.get_y() + p.get_height() / 2), p.get_x(),
             p.get_width()) for p in ax.patches]


def test_new_figure_always_gives_2d_axes():
    fig, axes = new_figure(2, 3)
    assert isinstance(fig, Figure) and axes.shape == (2, 3)
    assert new_figure()[1].shape == (1, 1)


def test_rank_colors_are_distinct_and_wrap():
    assert len({rank_color(r) for r in range(8)}) == 8
    assert rank_color(8) == rank_color(0)


def test_timeline_draws_one_bar_per_span_from_the_earliest_time():
    drawn = bars(timeline(SPANS))
    assert [row for row, _, _ in drawn] == [s[0] for s in SPANS]
    for (_, left, width), (_, _, start, end) in zip(drawn, SPANS, strict=True):
        assert left == pytest.approx(start - 10.0)
        assert width >= end - start - 1e-12


def test_timeline_keeps_a_tiny_span_visible():
    drawn = bars(timeline(SPANS))
    total = 10.601 - 10.0        # the latest time drawn
    # the 1 ms barrier on rank 1 is drawn 1% of the axis wide
    assert drawn[3][2] == pytest.approx(0.01 * total)
    # longer spans keep their true width
    assert drawn[1][2] == pytest.approx(0.4)


def test_timeline_legend_names_every_label_once_and_marks_are_drawn():
    fig = timeline(SPANS, "title", marks=[(1, "left", 10.6)])
    legend = fig.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == ["work", "barrier"]
    ax = fig.axes[0]
    assert ax.get_title() == "title"
    assert [t.get_text() for t in ax.texts] == ["left"]
    # rank 0 on top: the y axis runs downwards
    assert ax.get_ylim()[0] > ax.get_ylim()[1]


def test_timeline_labels_only_on_a_later_rank_are_in_the_legend():
    fig = timeline([(0, "write", 0.0, 1.0), (1, "read", 0.1, 0.2)])
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["write", "read"]
