"""Reading torch's Flight Recorder: each rank's ledger of collectives, side
by side, and one sentence naming where the ranks first diverge.

Pure functions over the dumps the ranks produce (`flight.record`),
so they can be tested on recorded dumps without a process group. The
field names are the dump's own (`collective_seq_id`, `profiling_name`,
`input_sizes`, ...), the ones torch's offline analyzer reads in
`torch/distributed/flight_recorder/components/types.py`; like it, we match
collectives across ranks by `collective_seq_id` within one process group.
Introduced in chapter 5, "Diagnosis 4: the Flight Recorder".

What the comparison finds is data (`Finding`: a kind, a collective
number, ranks, ops), which the report's English (`Finding.sentence`,
here) and the Chinese site's figures (ddpdemo/book/static/zhfigures.js)
each render in one place; RankError and the diagnosis exercises read the
data, never the sentence.
"""
import collections
import dataclasses
import os

from . import flight
from .errors import in_module, ranks_text, short_path
from . import engine

SHOWN = 4            # collectives per rank in the side-by-side view
_HIDDEN = ("torch/", "contextlib.py")
# ddpdemo's own frames between the reader's code and the collective,
# found by reference (errors.in_module), so a move cannot unhide them.
_HIDDEN_MODULES = (engine, flight)


def site(frames):
    """`caller > callee`: the two innermost frames outside torch, where a
    collective was called from (frames are innermost first in the dump)."""
    names = [f["name"] for f in frames
             if not any(h in short_path(f["filename"]).replace(os.sep, "/")
                        for h in _HIDDEN)
             and not any(in_module(f["filename"], m)
                         for m in _HIDDEN_MODULES)
             and not short_path(f["filename"]).startswith("torch")]
    return " > ".join(reversed(names[:2]))


DEFAULT_GROUP = "0"   # the default group's name in a dump's entries


def entries(dump, group=DEFAULT_GROUP, sites=True):
    """One rank's collectives in `group` (its name in the dump, the
    first of an entry's `process_group`: "0" is the default group),
    oldest first, as small dicts: seq, op, what (sizes and dtypes),
    retired (no longer tracked by the backend), site (or ""; left ""
    with sites=False, which `python -m ddpdemo.explain` passes for
    thousands of entries and fills in only where the ranks part)."""
    out = []
    for e in dump.get("entries", []):
        if e.get("is_p2p") or e["process_group"][0] != group:
            continue
        out.append(entry(e, sites))
    return sorted(out, key=lambda e: e["seq"])


def entry(e, sites=True):
    """One dump entry as `entries` gives it."""
    sizes = ",".join(str(list(s)) for s in e.get("input_sizes", []))
    dtypes = sorted(set(e.get("input_dtypes", [])))
    backend, _, op = e["profiling_name"].rpartition(":")
    return dict(seq=e["collective_seq_id"], op=op, backend=backend,
                what=" ".join([sizes, *dtypes]).strip(),
                state=e["state"], retired=e.get("retired", False),
                site=site(e.get("frames") or []) if sites else "")


def groups(dump):
    """The names of the groups `dump` recorded collectives of."""
    return {e["process_group"][0] for e in dump.get("entries", [])
            if not e.get("is_p2p")}


def op_text(op, what=""):
    """`all_reduce [4] Float`: how an op is printed, by the ledger and by
    `python -m ddpdemo.explain` alike."""
    return f"{op} {what}" if what else op


# What the ranks that called one collective number called there.
Called = collections.namedtuple("Called", "op what ranks")
Called.text = property(lambda self: op_text(self.op, self.what))
# Where a rank that never called it stopped: its last number and op (0
# and "" when it recorded none).
Stopped = collections.namedtuple("Stopped", "rank seq op")
# One call site that a collective number joined, and on which ranks.
Site = collections.namedtuple("Site", "site ranks")


@dataclasses.dataclass(frozen=True)
class Finding:
    """What comparing the ranks' ledgers found, as data. `kind`:

        off         the Flight Recorder is off on `ranks`
        unanswered  no rank answered
        disagree    at collective `seq` the ranks called different `ops`
        missing     `ops[0].ranks` reached `seq`, which `ranks` never
                    called; `stopped` says where each of them stopped
        dead        `ranks` died; the others reached `seq` (`ops[0]`)
                    and agree up to it
        silent      `ranks` did not answer; the others agree up to `seq`
        empty       no collectives recorded yet
        agree       every rank recorded `first` to `seq` alike; `sites`:
                    the call sites that number `site_seq` paired, where
                    they differ
    """
    kind: str
    seq: int = 0
    ranks: tuple = ()
    ops: tuple = ()          # Called, at seq
    stopped: tuple = ()      # Stopped, one per rank in `ranks` (missing)
    first: int = 0
    site_seq: int = 0
    sites: tuple = ()        # Site, at site_seq

    # The kinds that name where the ranks part (a dead rank does too,
    # whatever the kind: Ledger.diverged).
    DIVERGED = frozenset({"disagree", "missing", "dead", "silent"})

    @property
    def diverged(self):
        return self.kind in self.DIVERGED

    def data(self):
        """The finding as plain JSON data (what a figure carries): the
        named tuples become objects."""
        def plain(value):
            if hasattr(value, "_asdict"):
                return {k: plain(v) for k, v in value._asdict().items()}
            if isinstance(value, (tuple, list)):
                return [plain(v) for v in value]
            return value
        return {f.name: plain(getattr(self, f.name))
                for f in dataclasses.fields(self)}

    def sentence(self):
        """The finding in English: the one place the report's sentence is
        written (lower case; the report capitalises it)."""
        k = self.kind
        if k == "off":
            return (f"the Flight Recorder is off on {ranks_text(self.ranks)} "
                    f"(buffer size 0), so no collectives were recorded "
                    f"and there is no ledger to compare.")
        if k == "unanswered":
            return "no rank answered, so there is no ledger to compare."
        if k == "disagree":
            parts = [f"{c.text} on {ranks_text(c.ranks)}" for c in self.ops]
            return (f"the ranks disagree at collective #{self.seq}: "
                    + ", ".join(parts) + ".")
        if k == "missing":
            before = "; ".join(
                f"rank {s.rank} stopped at #{s.seq}"
                + (f" ({s.op})" if s.op else "") if s.seq
                else f"rank {s.rank} recorded none" for s in self.stopped)
            if not self.ops:
                return (f"{ranks_text(self.ranks)} never called "
                        f"collective #{self.seq}: {before}.")
            reached = self.ops[0]
            return (f"{ranks_text(reached.ranks)} reached collective "
                    f"#{self.seq} ({reached.op}), which "
                    f"{ranks_text(self.ranks)} never called: {before}.")
        if k == "dead":
            return (f"{ranks_text(self.ranks)} died, and its ledger with "
                    f"it; the others all reached collective #{self.seq} "
                    f"({self.ops[0].op}) and agree up to it.")
        if k == "silent":
            return (f"{ranks_text(self.ranks)} did not answer; the others "
                    f"agree up to collective #{self.seq}.")
        if k == "empty":
            return "no collectives recorded yet."
        sites = "" if not self.sites else (
            f" But #{self.site_seq} paired different call sites: "
            + ", ".join(f"{s.site} on {ranks_text(s.ranks)}"
                        for s in self.sites) + ".")
        return (f"no divergence: every rank recorded the same collectives, "
                f"#{self.first} to #{self.seq}, in the same order." + sites)


def first_divergence(ledgers, dead=(), silent=()):
    """The first divergence of one group's ledgers, as a Finding: the one
    comparison the book's Ledger and `python -m ddpdemo.explain` both
    make. ledgers {rank: `entries`}; dead: ranks whose process is gone;
    silent: ranks with no ledger (no answer, no dump). Compares only what
    every rank still holds: the ring buffer forgets the oldest entries
    first. Numbers are looked up in dicts: 8 ranks of 2000 entries take
    milliseconds."""
    by_seq = {r: {e["seq"]: e for e in es} for r, es in ledgers.items()}
    first = max((min(d) for d in by_seq.values() if d), default=1)
    top = max((max(d) for d in by_seq.values() if d), default=0)
    for seq in range(first, top + 1):
        at = {r: d.get(seq) for r, d in by_seq.items()}
        called = _called(at)
        if not called:
            # No rank holds this number (another group's, under one
            # name): nothing to compare, and no rank reached it.
            continue
        if len(called) > 1:
            return Finding("disagree", seq=seq, ops=called)
        missing = [r for r, e in at.items() if e is None]
        if missing:
            return Finding("missing", seq=seq, ranks=tuple(missing),
                           ops=called, stopped=tuple(
                               _stopped(r, by_seq[r]) for r in missing))
    reached = _called({r: d.get(top) for r, d in by_seq.items()})
    if dead and top:
        return Finding("dead", seq=top, ranks=tuple(dead), ops=reached)
    if silent:
        return Finding("silent", seq=top, ranks=tuple(silent), ops=reached)
    if not top:
        return Finding("empty")
    return Finding("agree", seq=top, first=first,
                   **_sites_differ(by_seq, first, top))


def _called(at):
    """What the ranks called at one number: Called per (op, what)."""
    kinds = {}
    for r, e in at.items():
        if e is not None:
            kinds.setdefault((e["op"], e["what"]), []).append(r)
    return tuple(Called(op, what, tuple(rs))
                 for (op, what), rs in kinds.items())


def _stopped(rank, by_seq):
    if not by_seq:
        return Stopped(rank, 0, "")
    last = by_seq[max(by_seq)]
    return Stopped(rank, last["seq"], last["op"])


def _sites_differ(by_seq, first, top):
    """Collectives pair by sequence number, whatever called them: the
    first number that joined different call sites (when recorded)."""
    for seq in range(first, top + 1):
        sites = {}
        for r, d in by_seq.items():
            e = d.get(seq)
            if e is not None and e["site"]:
                sites.setdefault(e["site"], []).append(r)
        if len(sites) > 1:
            return dict(site_seq=seq, sites=tuple(
                Site(s, tuple(rs)) for s, rs in sites.items()))
    return {}


class Ledger:
    """Every rank's recorded collectives and the first divergence.

    records: {rank: what `flight.record` returned, {"error": why} (its
    responder failed: `.failed` keeps why), or None (no answer)};
    dead: ranks whose process is gone. `str(ledger)` is the side-by-side
    view and the sentence; `.finding` is what the comparison found, as
    data, and `.divergence` its sentence.
    """

    def __init__(self, world_size, records, dead=()):
        self.world_size = world_size
        self.dead = sorted(dead)
        self.records = {r: records.get(r) for r in range(world_size)
                        if r not in self.dead}
        # A rank whose responder failed said why (flight.collect): it has
        # no record, and the report gives its reason.
        self.failed = {r: rec["error"] for r, rec in self.records.items()
                       if rec is not None and "error" in rec}
        self.records.update(dict.fromkeys(self.failed))
        self.off = sorted(r for r, rec in self.records.items()
                          if rec is not None and rec["buffer_size"] <= 0)
        self.silent = sorted(r for r, rec in self.records.items()
                             if rec is None)
        self.by_rank = {r: entries(rec["dump"])
                        for r, rec in self.records.items()
                        if rec is not None and r not in self.off}
        self.finding = self._compare()
        self.divergence = self.finding.sentence()

    # -- the finding ------------------------------------------------------
    def _compare(self):
        if self.off:
            return Finding("off", ranks=tuple(self.off))
        if not self.by_rank:
            return Finding("unanswered")
        return first_divergence(self.by_rank, self.dead, self.silent)

    # -- the view ---------------------------------------------------------
    def table(self, shown=SHOWN):
        """The last `shown` collective numbers, one row each, one column a
        rank: `op sizes dtypes [state] [(pending)] [@ site]`; `-` where a
        rank has no such collective."""
        ledgers = self.by_rank
        top = max((e[-1]["seq"] for e in ledgers.values() if e), default=0)
        if not top:
            return []
        seqs = range(max(1, top - shown + 1), top + 1)
        columns = {}
        for r in range(self.world_size):
            if r in self.dead:
                columns[r] = ["(dead)"] + [""] * (len(seqs) - 1)
                continue
            if r in self.silent:
                columns[r] = ["(no answer)"] + [""] * (len(seqs) - 1)
                continue
            cells = []
            for seq in seqs:
                e = next((e for e in ledgers[r] if e["seq"] == seq), None)
                # gloo leaves every state at "scheduled"; NCCL moves it on
                cells.append("-" if e is None else " ".join(filter(None, [
                    op_text(e["op"], e["what"]),
                    "" if e["state"] == "scheduled" else e["state"],
                    "" if e["retired"] else "(pending)",
                    f"@ {e['site']}" if e["site"] else ""])))
            columns[r] = cells
        width = {r: max(len(f"rank {r}"), *map(len, c))
                 for r, c in columns.items()}
        head = "  #  " + "  ".join(f"rank {r}".ljust(width[r])
                                   for r in columns)
        rows = [head.rstrip()]
        for i, seq in enumerate(seqs):
            rows.append((f"{seq:>3}  " + "  ".join(
                columns[r][i].ljust(width[r]) for r in columns)).rstrip())
        return rows

    @property
    def diverged(self):
        """True when the finding names where the ranks part, or a rank
        died."""
        return bool(self.dead) or self.finding.diverged

    def __str__(self):
        backend = next((es[0]["backend"] for es in self.by_rank.values()
                        if es), None)
        lines = [f"Flight Recorder ledger"
                 f"{' (' + backend + ')' if backend else ''}:"]
        lines += ["  " + row for row in self.table()]
        sentence = self.divergence[0].upper() + self.divergence[1:]
        lines.append(("First divergence: " + self.divergence)
                     if self.diverged and not self.dead else sentence)
        lines += [f"rank {r}'s Flight Recorder could not be read: {error}"
                  for r, error in sorted(self.failed.items())]
        return "\n".join(lines)

    def __repr__(self):
        return str(self)
