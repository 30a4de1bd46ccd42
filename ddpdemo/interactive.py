"""Interactive figures for the hosted book: step through the ring, hover a
timeline, read a ledger, in the browser, with no kernel and no network.

    ring(steps)                    # chapter 3: a slider and a play button
    timeline(spans, marks=...)     # chapter 5: hover or focus a mark
    overlap(records)               # chapter 9: buckets over backward
    ledger(hang.ledger)            # chapter 10: the Flight Recorder's ledger

Each returns an `Interactive`: its HTML (what JupyterLab and the built
page show) is an SVG drawn by a few KB of plain JavaScript
(interactive.js), carried inline with the data; its text (what nbval also
compares) says what the figure shows. No plotting library: plotly.js or
bokeh would add 1 to 3.5 MB to a page, and ipywidgets need a widget
manager from a CDN; this costs a few KB and asks no other host.

nbval compares the HTML too, so it is deterministic: element ids come
from a hash of the data, never from a counter or a clock. Timings vary
from run to run, so they travel apart, in one
`<script type="application/json" data-timings>` block of numbers that
book/sanitize.cfg masks, and nowhere else (the descriptions that name a
time are written by the script in the browser). Figures from the ranks'
real data: the matplotlib figures (figures.py, ring.py, ddp_figures.py)
stay, as the static picture for readers without scripts.

The Chinese site shows these outputs in Chinese: its script
(ddpdemo/book/static/zhfigures.js) matches every sentence written here
whole; a new or reworded sentence needs its rule there, and
tests/test_zhfigures.py fails until it has one. The ledger's finding is
not matched but rendered: its figure carries it as data
(ddpdemo.runtime.ledger.Finding), beside its English sentence.
"""
import hashlib
import html
import json
import pathlib

from .figures import number, rank_color
from .runtime.ledger import SHOWN

_JS = pathlib.Path(__file__).with_name("interactive.js").read_text()
_CSS = """
.ddp-fig{margin:1em 0;font-family:sans-serif;max-width:660px}
.ddp-fig svg{width:100%;height:auto;display:block}
.ddp-fig .ddp-controls{display:flex;gap:.8em;align-items:center}
.ddp-fig input[type=range]{flex:1}
.ddp-fig .ddp-live{min-height:3.2em;font-size:.9em;padding:.3em .5em;
background:#f4f4f4;border-left:3px solid #888}
.ddp-fig [tabindex]:focus{outline:none}
.ddp-fig [tabindex]:focus-visible,.ddp-fig .ddp-on{stroke:#000;
stroke-width:2.5;outline:2px solid #000;outline-offset:1px}
.ddp-fig button:focus-visible,.ddp-fig input:focus-visible{
outline:2px solid #000;outline-offset:2px}
.ddp-fig table{border-collapse:collapse;font-size:.85em}
.ddp-fig td,.ddp-fig th{border:1px solid #ccc;padding:.2em .5em}
.ddp-fig td.ddp-bad{background:#fde2e2}
""".strip()


def _section(name):
    """One `//# name` section of interactive.js."""
    parts = _JS.split("\n//# ")
    body = next(p for p in parts if p.startswith(name + "\n"))
    return body.split("\n", 1)[1].strip()


def _json(value):
    """JSON safe inside <script>: no `</script>` or `<!--` can end or
    upset the element; JSON.parse reads the escapes back."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return (text.replace("&", "\\u0026").replace("<", "\\u003c")
            .replace(">", "\\u003e"))


class Interactive:
    """An interactive figure: `html` for the browser, `text` for humans
    and for plain-text outputs. `data` is what the figure was given (the
    part that nbval compares), `timings` the numbers that vary."""

    def __init__(self, kind, title, data, text, *, timings=None,
                 controls="", body="", initial=""):
        self.kind, self.title, self.data = kind, title, data
        self.timings, self.text = timings, text
        digest = hashlib.sha256(_json([kind, title, data]).encode())
        self.id = f"ddp-{kind}-{digest.hexdigest()[:12]}"
        timed = ("" if timings is None else
                 '<script type="application/json" data-timings>'
                 f"{_json([round(t, 6) for t in timings])}</script>")
        draw = ", " + _section(kind) if kind != "ledger" else ""
        root = (f"document.currentScript ? document.currentScript"
                f".parentElement : document.getElementById('{self.id}')")
        self.html = (
            f'<div class="ddp-fig" id="{self.id}">'
            f"<style>{_CSS}</style>"
            f'<p class="ddp-title"><strong>{html.escape(title)}</strong></p>'
            # role img hides an svg's children from screen readers: only
            # where none of them is focusable
            + (f'<svg role="{"img" if kind == "ring" else "group"}" '
               f'aria-label="{html.escape(title)}" '
               f'viewBox="0 0 560 370"></svg>' if kind != "ledger" else "")
            + body + controls
            + f'<div class="ddp-live" aria-live="polite">'
              f"{html.escape(initial)}</div>"
            f'<script type="application/json" data-figure>{_json(data)}'
            f"</script>{timed}"
            f"<script>{_section('common')}({root}{draw});</script></div>")

    def _repr_html_(self):
        return self.html

    def __repr__(self):
        return self.text


def ring(stats, title="ring all-reduce, step by step"):
    """Step through a ring all-reduce from the RingStats of every rank
    (rank order, snapshots kept), as ring.plot_ring_steps draws it all at
    once: each rank a row of chunks round the ring, the chunk it sends at
    this step outlined and named on the arrow, the chunk it received in
    bold, chunks that hold the final sum filled. A slider and a play
    button. Chapter 1."""
    n = len(stats)
    labels = ["start"] + [f"{phase} {step}"
                          for phase, step, *_ in stats[0].steps]
    values = [[st.snapshots[s] for st in stats] for s in range(len(labels))]
    sent = [[None] * n] + [[st.steps[s][2] for st in stats]
                           for s in range(len(labels) - 1)]
    received = [[None] * n] + [[st.steps[s][3] for st in stats]
                               for s in range(len(labels) - 1)]
    final = values[-1][0]
    descriptions = []
    for s, label in enumerate(labels):
        held = {r: [c for c in range(n) if values[s][r][c] == final[c]]
                for r in range(n)}
        done = ("chunks that hold the final sum: " + ", ".join(
            f"rank {r} {cs}" for r, cs in held.items() if cs)
            if any(held.values()) else "no chunk holds the final sum yet")
        if s == 0:
            descriptions.append(f"start: each rank holds only its own "
                                f"values, in all {n} chunks; {done}.")
            continue
        verb = "adds it into" if label.startswith("reduce") else "copies it to"
        moves = "; ".join(
            f"rank {r} sends chunk {sent[s][r]} "
            f"({number(values[s - 1][r][sent[s][r]])}) to rank "
            f"{(r + 1) % n}, which {verb} its chunk {sent[s][r]}"
            for r in range(n))
        descriptions.append(f"{label} (step {s} of {len(labels) - 1}): "
                            f"{moves}. After it, {done}.")
    data = dict(n=n, labels=labels, values=values,
                text=[[[number(v) for v in row] for row in step]
                      for step in values],
                sent=sent, received=received, final=final,
                colors=[rank_color(r) for r in range(n)],
                descriptions=descriptions)
    last = len(labels) - 1
    controls = (
        '<div class="ddp-controls"><button type="button" aria-pressed='
        '"false">Play</button><input type="range" min="0" max='
        f'"{last}" value="0" step="1" aria-label="step of the ring">'
        f'<span class="ddp-step">{labels[0]}</span></div>')
    text = (f"{title}: {n} ranks, the start and {last} steps "
            f"({last // 2} reduce-scatter, {last // 2} all-gather); a slider "
            f"and a play button step through them.\n"
            + "\n".join(descriptions))
    return Interactive("ring", title, data, text, controls=controls,
                       initial=descriptions[0])


def _took(seconds, unit):
    scale = 1000 if unit == "ms" else 1
    return f"took {seconds * scale:.1f} {unit}"


def timeline(spans, title="", marks=(), unit="s"):
    """figures.timeline's per-rank bars, interactive: hover or focus a bar
    or a mark to read the rank, the event and its times. spans: (rank,
    label, start, end) in seconds; marks: (rank, label, time). Time starts
    at the earliest span. Chapter 3."""
    spans, marks = list(spans), list(marks)
    ranks = sorted({s[0] for s in spans} | {m[0] for m in marks})
    labels = sorted({s[1] for s in spans}, key=[s[1] for s in spans].index)
    t0 = min([s[2] for s in spans] + [m[2] for m in marks])
    scale = 1000 if unit == "ms" else 1
    row = {r: i for i, r in enumerate(ranks)}
    data = dict(
        rows=[[f"rank {r}", rank_color(r)] for r in ranks], unit=unit,
        axis=f"{'milli' if unit == 'ms' else ''}seconds",
        legend=labels,
        spans=[[row[r], 0, 1, labels.index(lab), f"rank {r}, {lab}"]
               for r, lab, _, _ in spans],
        marks=[[row[r], f"rank {r}, {lab}", lab] for r, lab, _ in marks])
    timings = [(t - t0) * scale for _, _, a, b in spans for t in (a, b)]
    timings += [(t - t0) * scale for *_, t in marks]
    text = "\n".join(
        [f"{title}: one row per rank; hover or focus a bar or mark."]
        + [f"rank {r}, {lab}: {_took(b - a, unit)}" for r, lab, a, b in spans]
        + [f"rank {r}, {lab}" for r, lab, _ in marks])
    return Interactive("timeline", title, data, text, timings=timings,
                       initial="Hover over a bar or a mark, or focus it "
                               "with Tab, to read a rank's event.")


def overlap(records, title="Backward and the buckets' all_reduce"):
    """ddp_figures.overlap, interactive: per rank a lane of gradients (a
    mark as each is ready) and a lane of the buckets' all_reduce (a bar
    per bucket, its own sub-row); hover or focus one to read it. Times in
    ms from each rank's own backward start. Chapter 7."""
    rows, spans, marks, timings, text = [], [], [], [], [title + ":"]
    for rank, rec in enumerate(records):
        t0, color = rec["backward"][0], rank_color(rank)
        compute, comm = len(rows), len(rows) + 1
        rows += [[f"rank {rank} gradients", color],
                 [f"rank {rank} all_reduce", color]]
        spans.append([compute, 0, 1, 1, f"rank {rank}, computing gradients"])
        timings += [0.0, (rec["backward"][1] - t0) * 1000]
        n = max(1, len(rec["buckets"]))
        for i, b in enumerate(rec["buckets"]):
            spans.append([comm, i, n, 0, f"rank {rank}, bucket "
                          f"{b['index']}'s all_reduce"])
            timings += [(b["start"] - t0) * 1000, (b["end"] - t0) * 1000]
            text.append(f"rank {rank}, bucket {b['index']}: all_reduce "
                        f"{_took(b['end'] - b['start'], 'ms')}")
        for name in rec["grads"]:
            marks.append([compute, f"rank {rank}, gradient of {name} ready",
                          ""])
    # marks after every span: the renderer reads timings in that order
    for rec in records:
        timings += [(t - rec["backward"][0]) * 1000
                    for t in rec["grads"].values()]
    data = dict(rows=rows, unit="ms", spans=spans, marks=marks,
                legend=["a bucket's all_reduce", "computing gradients"],
                axis="milliseconds since this rank's backward started")
    return Interactive("timeline", title, data, "\n".join(text),
                       timings=timings,
                       initial="Hover over a bucket or a gradient's mark, "
                               "or focus it with Tab, to read it.")


def ledger(ledger, title="Flight Recorder ledger, rank by rank"):
    """The ledger (ddpdemo.runtime.ledger.Ledger) as a table: a row per
    collective number, a column per rank; a row where the ranks disagree,
    or where a rank has nothing, is marked; hover or focus a cell to read
    it in full. Chapter 5."""
    ranks = list(range(ledger.world_size))
    top = max((e[-1]["seq"] for e in ledger.by_rank.values() if e),
              default=0)
    seqs = list(range(max(1, top - SHOWN + 1), top + 1)) if top else []
    cells = []
    for seq in seqs:
        row = []
        for r in ranks:
            es = ledger.by_rank.get(r)
            e = next((e for e in es or [] if e["seq"] == seq), None)
            row.append(_ledger_cell(ledger, r, seq, e))
        cells.append(row)
    data = dict(ranks=ranks, seqs=seqs,
                cells=[[cell[:2] for cell in row] for row in cells],
                divergence=ledger.divergence,
                finding=ledger.finding.data())
    head = "".join(f'<th scope="col" style="color:{rank_color(r)}">rank {r}'
                   f"</th>" for r in ranks)
    body = []
    for seq, row in zip(seqs, cells, strict=True):
        bad = len({key for *_, key in row}) > 1
        tds = "".join(
            f'<td tabindex="0" data-say="{html.escape(say)}"'
            f'{" class=ddp-bad" if bad else ""}>{html.escape(short)}</td>'
            for short, say, _ in row)
        body.append(f'<tr><th scope="row">#{seq}</th>{tds}</tr>')
    table = (f'<table aria-label="{html.escape(title)}"><thead><tr>'
             f'<th scope="col">#</th>{head}</tr></thead><tbody>'
             + "".join(body) + "</tbody></table>")
    return Interactive("ledger", title, data, str(ledger), body=table,
                       initial=ledger.divergence[0].upper()
                       + ledger.divergence[1:])


def _ledger_cell(ledger, rank, seq, e):
    """(short text, full sentence, what must match across ranks) for one
    rank's collective #seq."""
    if rank in ledger.dead:
        return "(dead)", f"rank {rank} died; its ledger died with it.", None
    if rank in ledger.silent:
        return "(no answer)", f"rank {rank} did not answer.", None
    if e is None:
        mine = ledger.by_rank.get(rank) or []
        last = f"it stopped at #{mine[-1]['seq']}" if mine else "none"
        return "-", (f"rank {rank}, collective #{seq}: never called; "
                     f"{last}."), None
    short = " ".join(filter(None, [e["op"], e["what"],
                                   "" if e["retired"] else "(pending)"]))
    full = (f"rank {rank}, collective #{seq}: {e['backend']} {e['op']}"
            f"{' of ' + e['what'] if e['what'] else ''}, state "
            f"{e['state']}, "
            + ("retired (done)" if e["retired"] else "pending (not done)")
            + (f", called from {e['site']}" if e["site"] else "") + ".")
    return short, full, (e["op"], e["what"])
