"""Reading torch's Flight Recorder: each rank's ledger of collectives, side
by side, and one sentence naming where the ranks first diverge.

Pure functions over the dumps the ranks produce (`ddpdemo.flight.record`),
so they can be tested on recorded dumps without a process group. The
field names are the dump's own (`collective_seq_id`, `profiling_name`,
`input_sizes`, ...), the ones torch's offline analyzer reads in
`torch/distributed/flight_recorder/components/types.py`; like it, we match
collectives across ranks by `collective_seq_id` within one process group.
Introduced in chapter 5, "Diagnosis 4: the Flight Recorder".
"""
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


def entries(dump, group="default_pg"):
    """One rank's collectives in `group` (the default group unless named),
    oldest first, as small dicts: seq, op, what (sizes and dtypes),
    retired (no longer tracked by the backend), site (or "")."""
    out = []
    for e in dump.get("entries", []):
        if e.get("is_p2p") or e["process_group"][1] != group:
            continue
        sizes = ",".join(str(list(s)) for s in e.get("input_sizes", []))
        dtypes = sorted(set(e.get("input_dtypes", [])))
        out.append(dict(seq=e["collective_seq_id"],
                        op=e["profiling_name"].split(":", 1)[-1],
                        backend=e["profiling_name"].split(":", 1)[0],
                        what=" ".join([sizes] + dtypes).strip(),
                        state=e["state"], retired=e.get("retired", False),
                        site=site(e.get("frames") or [])))
    return sorted(out, key=lambda e: e["seq"])


class Ledger:
    """Every rank's recorded collectives and the first divergence.

    records: {rank: what `flight.record` returned, or None (no answer)};
    dead: ranks whose process is gone. `str(ledger)` is the side-by-side
    view and the sentence; `.divergence` is the sentence alone.
    """

    def __init__(self, world_size, records, dead=()):
        self.world_size = world_size
        self.dead = sorted(dead)
        self.records = {r: records.get(r) for r in range(world_size)
                        if r not in self.dead}
        self.off = sorted(r for r, rec in self.records.items()
                          if rec is not None and rec["buffer_size"] <= 0)
        self.silent = sorted(r for r, rec in self.records.items()
                             if rec is None)
        self.by_rank = {r: entries(rec["dump"])
                        for r, rec in self.records.items()
                        if rec is not None and r not in self.off}
        self.divergence = self._diverge()

    # -- the sentence ---------------------------------------------------
    def _diverge(self):
        if self.off:
            return (f"the Flight Recorder is off on {ranks_text(self.off)} "
                    f"(buffer size 0), so no collectives were recorded "
                    f"and there is no ledger to compare.")
        ledgers = self.by_rank
        if not ledgers:
            return "no rank answered, so there is no ledger to compare."
        # Compare only what every answering rank still holds: the ring
        # buffer forgets the oldest entries first.
        first = max((e[0]["seq"] for e in ledgers.values() if e), default=1)
        last = {r: (e[-1] if e else None) for r, e in ledgers.items()}
        top = max((e["seq"] for e in last.values() if e), default=0)
        for seq in range(first, top + 1):
            at = {r: next((e for e in es if e["seq"] == seq), None)
                  for r, es in ledgers.items()}
            kinds = {}
            for r, e in at.items():
                if e is not None:
                    kinds.setdefault((e["op"], e["what"]), []).append(r)
            if len(kinds) > 1:
                parts = [f"{op}{' ' + what if what else ''} "
                         f"on {ranks_text(rs)}"
                         for (op, what), rs in kinds.items()]
                return (f"the ranks disagree at collective #{seq}: "
                        + ", ".join(parts) + ".")
            missing = [r for r, e in at.items() if e is None]
            if missing:
                (op, _), reached = next(iter(kinds.items()))
                before = "; ".join(
                    f"rank {r} stopped at #{last[r]['seq']} "
                    f"({last[r]['op']})" if last[r] else f"rank {r} "
                    f"recorded none" for r in missing)
                return (f"{ranks_text(reached)} reached collective #{seq} "
                        f"({op}), which {ranks_text(missing)} never called: "
                        f"{before}.")
        lead = ("" if not self.dead else
                f"{ranks_text(self.dead)} died, and its ledger with it; ")
        if self.dead and top:
            op = next(e["op"] for e in last.values() if e and e["seq"] == top)
            return (lead + f"the others all reached collective #{top} "
                    f"({op}) and agree up to it.")
        if self.silent:
            return (f"{ranks_text(self.silent)} did not answer; the others "
                    f"agree up to collective #{top}.")
        if not top:
            return "no collectives recorded yet."
        return (f"no divergence: every rank recorded the same collectives, "
                f"#{first} to #{top}, in the same order."
                + self._sites_differ(first, top))

    def _sites_differ(self, first, top):
        """Collectives pair by sequence number, whatever called them: say
        where one number joined different call sites (when recorded)."""
        for seq in range(first, top + 1):
            sites = {}
            for r, es in self.by_rank.items():
                e = next((e for e in es if e["seq"] == seq), None)
                if e is not None and e["site"]:
                    sites.setdefault(e["site"], []).append(r)
            if len(sites) > 1:
                return (f" But #{seq} paired different call sites: "
                        + ", ".join(f"{s} on {ranks_text(rs)}"
                                    for s, rs in sites.items()) + ".")
        return ""

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
                    e["op"], e["what"],
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
        """True when the sentence names a divergence or a dead rank."""
        return bool(self.dead) or not self.divergence.startswith(
            ("no ", "the Flight"))

    def __str__(self):
        backend = next((es[0]["backend"] for es in self.by_rank.values()
                        if es), None)
        lines = [f"Flight Recorder ledger"
                 f"{' (' + backend + ')' if backend else ''}:"]
        lines += ["  " + row for row in self.table()]
        sentence = self.divergence[0].upper() + self.divergence[1:]
        lines.append(("First divergence: " + self.divergence)
                     if self.diverged and not self.dead else sentence)
        return "\n".join(lines)

    def __repr__(self):
        return str(self)
