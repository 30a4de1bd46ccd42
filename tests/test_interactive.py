"""ddpdemo.interactive: the HTML is the same for the same data (strict
nbval compares it), differs for different data, carries exactly the data
it was given, escapes text, and keeps the varying timings in the one block
book/sanitize.cfg masks. The browser side is tests/test_site.py's."""
import configparser
import json
import os
import pickle
import re

import pytest

from ddpdemo import interactive
from ddpdemo.runtime.ledger import Ledger
from ddpdemo.ring import RingStats

pytestmark = [pytest.mark.timeout(60), pytest.mark.fast]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FR = os.path.join(ROOT, "tests", "data", "fr_gloo_2ranks.pkl")


def fake_ring(n=4, base=10):
    """RingStats as ring_all_reduce fills them, replayed in one process:
    rank r starts with base**r in every one-element chunk."""
    held = [[base ** r] * n for r in range(n)]
    stats = [RingStats(keep_snapshots=True, world_size=n, rank=r)
             for r in range(n)]
    for r in range(n):
        stats[r].snapshots.append(list(held[r]))
    for phase, offset in (("reduce-scatter", 0), ("all-gather", 1)):
        for step in range(n - 1):
            moves = [((r + offset - step) % n, (r - step - 1 + offset) % n)
                     for r in range(n)]
            sent = [held[r][moves[r][0]] for r in range(n)]
            for r in range(n):
                recv = moves[r][1]
                incoming = sent[(r - 1) % n]
                held[r][recv] = (held[r][recv] + incoming
                                 if phase == "reduce-scatter" else incoming)
                stats[r].steps.append((phase, step + 1, moves[r][0], recv, 8))
                stats[r].snapshots.append(list(held[r]))
    return stats


def block(html, attr):
    found = re.findall(rf'<script type="application/json" {attr}>(.*?)'
                       r"</script>", html, re.S)
    assert len(found) == 1, found
    return json.loads(found[0])


SPANS = [(0, "work (sleep)", 10.0, 10.2),
         (0, "in dist.barrier()", 10.2, 10.6),
         (1, "work (sleep)", 10.0, 10.6),
         (1, "in dist.barrier()", 10.6, 10.61)]
MARKS = [(0, "left", 10.6), (1, "left", 10.61)]


def test_fake_ring_sums():
    stats = fake_ring()
    assert all(st.snapshots[-1] == [1111] * 4 for st in stats)


def test_ring_is_deterministic_and_embeds_its_data():
    stats = fake_ring()
    a, b = interactive.ring(stats), interactive.ring(fake_ring())
    assert a.html == b.html and a.id == b.id and a.text == b.text
    data = block(a.html, "data-figure")
    assert data["values"] == [[st.snapshots[s] for st in stats]
                              for s in range(7)]
    assert data["sent"][1:] == [[st.steps[s][2] for st in stats]
                                for s in range(6)]
    assert data["labels"][0] == "start" and data["labels"][-1] == \
        "all-gather 3"
    assert data["final"] == [1111] * 4
    assert "rank 0 sends chunk 0 (1) to rank 1" in data["descriptions"][1]
    assert 'type="range" min="0" max="6"' in a.html
    assert "the start and 6 steps (3 reduce-scatter, 3 all-gather)" in repr(a)


def test_ring_differs_for_different_data():
    a, b = interactive.ring(fake_ring()), interactive.ring(fake_ring(base=7))
    assert a.id != b.id and a.html != b.html
    assert interactive.ring(fake_ring(3)).id != a.id


def test_title_and_labels_are_escaped():
    evil = "</script><b>x</b>&"
    fig = interactive.timeline([(0, evil, 0.0, 1.0)], title=evil)
    assert evil not in fig.html
    assert "&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;&amp;" in fig.html
    # In the JSON block the label survives whole, and cannot close it.
    assert block(fig.html, "data-figure")["spans"][0][4] == f"rank 0, {evil}"
    assert fig.html.count("</script>") == 3    # data, timings, renderer


def test_timeline_keeps_timings_apart_and_sanitised():
    fig = interactive.timeline(SPANS, "barrier", marks=MARKS)
    other = interactive.timeline([(r, lab, a + 5.0, b + 5.5)
                                  for r, lab, a, b in SPANS], "barrier",
                                 marks=[(r, lab, t * 2)
                                        for r, lab, t in MARKS])
    assert block(fig.html, "data-timings") == pytest.approx(
        [0, 0.2, 0.2, 0.6, 0, 0.6, 0.6, 0.61, 0.6, 0.61])
    # Same ranks and events, other times: only the timings block differs,
    # and book/sanitize.cfg's pattern masks exactly it.
    assert fig.id == other.id and fig.html != other.html
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "book", "sanitize.cfg"))
    patterns = [(cfg[s]["regex"], cfg[s]["replace"]) for s in cfg.sections()]

    def clean(text):
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text
    assert clean(fig.html) == clean(other.html)
    assert clean(fig.html) != fig.html
    assert clean(fig.html).replace("<TIMINGS>", "") == re.sub(
        r"(data-timings>)[^<]*", r"\1", fig.html)
    assert clean(fig.text) == clean(other.text)
    assert "rank 1, in dist.barrier(): took 0.0 s" in fig.text
    data = block(fig.html, "data-figure")
    assert [s[4] for s in data["spans"]] == [f"rank {r}, {lab}"
                                             for r, lab, _, _ in SPANS]
    assert [m[1] for m in data["marks"]] == ["rank 0, left", "rank 1, left"]


def test_overlap_orders_timings_as_the_renderer_reads_them():
    records = [{"backward": (1.0, 1.004), "grads": {"w": 1.001, "b": 1.003},
                "buckets": [{"index": 0, "start": 1.002, "end": 1.005},
                            {"index": 1, "start": 1.0035, "end": 1.006}]}]
    fig = interactive.overlap(records)
    assert block(fig.html, "data-timings") == pytest.approx(
        [0, 4, 2, 5, 3.5, 6, 1, 3])
    data = block(fig.html, "data-figure")
    assert [s[4] for s in data["spans"]] == [
        "rank 0, computing gradients", "rank 0, bucket 0's all_reduce",
        "rank 0, bucket 1's all_reduce"]
    assert [m[1] for m in data["marks"]] == [
        "rank 0, gradient of w ready", "rank 0, gradient of b ready"]
    assert "rank 0, bucket 1: all_reduce took 2.5 ms" in fig.text


def test_ledger_table_marks_the_divergence():
    with open(FR, "rb") as f:
        lonely = pickle.load(f)["lonely"]
    ledger = Ledger(2, lonely)
    fig = interactive.ledger(ledger)
    assert repr(fig) == str(ledger)
    data = block(fig.html, "data-figure")
    assert data["divergence"] == ledger.divergence
    # The finding travels as data too, for the Chinese site to render.
    assert data["finding"] == ledger.finding.data()
    assert data["finding"]["kind"] == "missing"
    assert data["seqs"] == [1, 2, 3]
    last = data["cells"][-1]
    assert last[1][0] == "-" and "never called" in last[1][1]
    assert fig.html.count("ddp-bad") == 2 * 1 + 1    # one row + the CSS
    assert interactive.ledger(Ledger(2, lonely)).html == fig.html
