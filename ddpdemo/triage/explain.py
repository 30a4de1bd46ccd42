"""Explain a hang from what the job left behind, in the book's words.

    python -m ddpdemo.explain DUMPS_DIR stacks.txt torchrun.log
    ddpdemo-explain DUMPS_DIR stacks.txt torchrun.log

Any mix of: each rank's Flight Recorder dump (TORCH_FR_DUMP_TEMP_FILE's
prefix + rank), stack dumps (py-spy `dump` of every rank, or
faulthandler's), and torchrun's output (its ChildFailedError report and
the ranks' lines). It prints, in order: where each rank is (stuck in
which call, from which line, or gone), where the ranks part (the first
collective number at which their Flight Recorder ledgers differ, per
group, with the ranks on each side), the pattern the book shows live if
the evidence shows one, with a link to that section, and what the
evidence cannot tell. It never names a pattern the evidence does not
show. An input it cannot read (a dump folder not written yet, a log with
no report yet) it names and leaves out: while a job still hangs, its
stacks alone can be read. Nothing readable, or dumps of two jobs mixed:
one line on stderr, exit status 2. The symptom page's step 0 introduces
it; chapter 5 shows it beside its ledger.

What a GPU job's dumps add, which gloo's cannot show: NCCL's watchdog
writes every rank's dump itself on a timeout (TORCH_NCCL_DUMP_ON_TIMEOUT,
with TORCH_NCCL_ENABLE_MONITORING=1 and a trace buffer; ProcessGroupNCCL.hpp:
"Control whether dumping debug info on watchdog timeout is enabled"),
and its entries move from "scheduled" to "started" and "completed" as
CUDA events fire (FlightRecorder.hpp: `completed_state, "completed"`,
`scheduled_state, "scheduled"`, `started_state, "started"`;
`time_discovered_started_ns`), so a dump says which collective each rank
had launched but never finished. gloo leaves every entry "scheduled"
(chapter 5 asserts it); here a collective's end is read from the others'
ledgers instead: one that a rank never called cannot have completed.
On gloo the job writes its dumps itself: ddpdemo.launch does, with
TORCH_FR_DUMP_TEMP_FILE set, on a timeout, on SIGTERM and on SIGUSR2.
"""
import linecache
import os
import re
import sys

from ..runtime import ledger
from ..runtime.errors import ranks_text
from . import jobfiles

# The hosted book, in one place: GitHub Pages of _config.yml's repository
# (https://github.com/ddpdemo/ddpdemo).
SITE = "https://ddpdemo.github.io/ddpdemo/"
# Each pattern's section: (notebook, label); tests/test_explain.py checks
# every label is a `(label)=` target of that notebook.
SECTIONS = {
    "zero-first": ("05_val_dataloader_deadlock", "val-deadlock"),
    "ddp-forward": ("08_when_ddp_hangs", "ddp-validation-rank0"),
    "no-partner": ("08_when_ddp_hangs", "uneven-inputs"),
    "host-waits": ("01_all_reduce", "when-all-reduce-returns"),
    "rank-0-only": ("05_val_dataloader_deadlock", "silent-variant"),
    "dead-rank": ("00_live_cluster", "when-a-rank-fails"),
}
_STDLIB = os.path.dirname(os.__file__)
# Where the host reads a result (a tensor's value, a stream, a handle).
_WAITS = re.compile(r"\.(item|cpu|tolist|wait|synchronize)\(|synchronize\(")


def link(pattern):
    page, label = SECTIONS[pattern]
    return f"{SITE}book/{page}.html#{label}"


def _is_own(path):
    """A frame of the job's own code: not torch, not the standard
    library (py-spy writes its paths relative: `re/_compiler.py`)."""
    top = path.replace("\\", "/").split("/")[0]
    return not (path.startswith(("torch/", "<")) or path.startswith(_STDLIB)
                or top.removesuffix(".py") in sys.stdlib_module_names)


def _main_thread(threads):
    """The thread running the script: py-spy names it MainThread; in
    faulthandler's dump it is the one whose outermost frame is not
    threading's bootstrap."""
    for name, frames in threads:
        if name == "MainThread":
            return frames
    for _name, frames in threads:
        if frames and frames[-1][2] not in ("_bootstrap", "_bootstrap_inner"):
            return frames
    return threads[0][1] if threads else []


def _where(frames):
    """`barrier (torch/...:4879), from a.py:3 in f < b.py:9 in main`."""
    top = frames[0]
    own = [f for f in frames if _is_own(f[0])][:3]
    text = f"{top[2]} ({top[0]}:{top[1]})"
    if own and own[0] != top:
        text += ", from " + " < ".join(f"{p}:{n} in {fn}"
                                       for p, n, fn in own)
    return text


def _source(path, line):
    """The source line, where this machine has the file (py-spy's paths
    are relative to a folder on sys.path)."""
    for folder in ["", *sys.path]:
        text = linecache.getline(os.path.join(folder, path), line).strip()
        if text:
            return text
    return ""


class Parting:
    """Where one group's ledgers first differ: `seq`; `sides` [(op,
    ranks, site, state)] for the ranks that called it; `missing`
    {rank: (last seq, op) or None} for those that never did; `no_dump`
    members with no dump."""

    def __init__(self, group, seq, sides, missing, no_dump, when):
        self.group, self.seq, self.sides = group, seq, sides
        self.missing, self.no_dump, self.when = missing, no_dump, when
        self.pattern = None

    def text(self):
        name = ("the default group" if self.group == "0"
                else f"group {self.group}")
        parts = []
        for op, ranks, site, state in self.sides:
            # gloo leaves every entry "scheduled"; NCCL's move on.
            parts.append(f"{op} on {ranks_text(ranks)}"
                         + (f" (from {site})" if site else "")
                         + ("" if state == "scheduled" else f", {state}"))
        for r, last in self.missing.items():
            parts.append(f"rank {r} never called it (its last: "
                         f"#{last[0]} {last[1]})" if last else
                         f"rank {r} never called it (it had called none)")
        if self.no_dump:
            parts.append(f"no dump from {ranks_text(self.no_dump)}")
        return f"{name}, collective #{self.seq}: " + "; ".join(parts)


def partings(dumps, world):
    """Every group's first parting, earliest first. Seq numbers are
    looked up in dicts: 8 ranks of 2000 entries take milliseconds (the
    Ledger's view scans each rank's list per number)."""
    groups = {}
    for rank, dump in dumps.items():
        for e in dump["entries"]:
            if not e.get("is_p2p"):
                groups.setdefault(e["process_group"][0], {}).setdefault(
                    rank, {})[e["collective_seq_id"]] = e
    found = []
    for group, have in groups.items():
        members = world if group == "0" else sorted(have)
        no_dump = [r for r in members if r not in have]
        first = max(min(es) for es in have.values())
        top = max(max(es) for es in have.values())
        for seq in range(first, top + 1):
            at = {r: es.get(seq) for r, es in have.items()}
            present = {r: e for r, e in at.items() if e is not None}
            kinds = {}
            for r, e in present.items():
                kinds.setdefault(_op(e), []).append(r)
            pending = [e for e in present.values() if not e["retired"]]
            if len(kinds) > 1 or len(present) < len(at) or (
                    no_dump and pending):
                found.append(_parting(group, seq, kinds, at, have, no_dump))
                break
        else:
            if no_dump:
                found.append(_parting(group, top, kinds, at, have, no_dump))
    return sorted(found, key=lambda p: p.when)


def _op(e):
    """`all_reduce [4] Float`: op, sizes and dtypes, as the ledger
    (ddpdemo.ledger.entries) writes them; two ranks at one number with
    different ones are not in the same collective."""
    sizes = ",".join(str(list(s)) for s in e.get("input_sizes", []))
    return " ".join([e["profiling_name"].split(":", 1)[-1], sizes,
                     *sorted(set(e.get("input_dtypes", [])))]).strip()


def _parting(group, seq, kinds, at, have, no_dump):
    sides = []
    for op, ranks in kinds.items():
        e = at[ranks[0]]
        # (Not whether it was retired: after a gloo collective fails,
        # whether the dump still holds it as pending is a race.)
        sides.append((op, ranks, ledger.site(e.get("frames") or []),
                      e["state"]))
    missing = {}
    for r, e in at.items():
        if e is None:
            before = [s for s in have[r] if s < seq]
            missing[r] = ((max(before), _op(have[r][max(before)]))
                          if before else None)
    when = min(e["time_created_ns"] for e in at.values() if e is not None)
    return Parting(group, seq, sides, missing, no_dump, when)


# -- patterns: each returns (what it is, in words) or None ------------------

def _frames(ev, rank, parting):
    """What shows where `rank` called the parting collective: its stack
    (main thread) and the dump's call site of that entry."""
    out = list(_main_thread(ev.stacks.get(rank, [])))
    entries = ev.dumps.get(rank, {}).get("entries", [])
    for e in entries:
        if (e["process_group"][0] == parting.group
                and e["collective_seq_id"] == parting.seq):
            out += [(f["filename"], f["line"], f["name"])
                    for f in e.get("frames") or []]
    return out


def _calls(frames, func, path_end=""):
    # py-spy names methods with their class (`Tensor.backward`).
    return any(fn.split(".")[-1] == func
               and p.replace("\\", "/").endswith(path_end)
               for p, _, fn in frames)


def zero_first(ev, parting, op, ranks):
    if op.split()[0] == "barrier" and all(
            _calls(_frames(ev, r, parting), "torch_distributed_zero_first")
            for r in ranks):
        return (f"a barrier inside torch_distributed_zero_first on "
                f"{ranks_text(ranks)} alone, which the other ranks never "
                f"enter (the val_dataloader deadlock)")


def ddp_forward(ev, parting, op, ranks):
    if op.split()[0] == "broadcast" and all(
            _calls(_frames(ev, r, parting), "forward",
                   "torch/nn/parallel/distributed.py") for r in ranks):
        return (f"DDP's buffer broadcast in a forward on "
                f"{ranks_text(ranks)} alone (validating through the DDP "
                f"wrapper on some ranks only)")


def no_partner(ev, parting, op, ranks):
    if op.split()[0] == "all_reduce" and all(
            _calls(_frames(ev, r, parting), "backward") for r in ranks):
        return (f"a gradient all_reduce in backward on {ranks_text(ranks)} "
                f"with no partner: the other ranks never joined it")


def host_waits(ev, parting, op, ranks):
    for r in ranks:
        stack = _main_thread(ev.stacks.get(r, []))
        if not stack or not _is_own(stack[0][0]):
            continue
        line = _source(stack[0][0], stack[0][1]).split("#")[0].strip()
        if _WAITS.search(line):
            return (f"rank {r}'s host waits for the result of collective "
                    f"#{parting.seq} at {stack[0][0]}:{stack[0][1]} "
                    f"(`{line}`), and that collective never completed: not "
                    f"every rank called it")


def rank_0_only(ev, parting, op, ranks):
    """Rank 0 alone called it while the others ran other code: a
    different collective at that number, or waiting in another one."""
    others = [r for r in parting.missing]
    elsewhere = len(parting.sides) > 1 or (others and all(
        _main_thread(ev.stacks.get(r, []))[:1]
        and _main_thread(ev.stacks[r])[0][0].startswith("torch/distributed")
        for r in others))
    if ranks == [0] and elsewhere:
        return (f"a collective ({op.split()[0]}) in code that only rank 0 "
                f"runs, such as `if rank == 0:`, while the others run "
                f"other collectives")


PATTERNS = {"zero-first": zero_first, "ddp-forward": ddp_forward,
            "no-partner": no_partner, "host-waits": host_waits,
            "rank-0-only": rank_0_only}


def recognise(ev, parting):
    """The first pattern, most specific first, that one side of the
    parting shows; (name, words) or None."""
    for name, test in PATTERNS.items():
        for op, ranks, _, _ in parting.sides:
            if len(parting.sides) + len(parting.missing) < 2:
                continue       # one side only: nobody left out
            words = test(ev, parting, op, ranks)
            if words:
                return name, words
    return None


_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 9: "SIGKILL",
            11: "SIGSEGV", 15: "SIGTERM"}


def stopped(ev):
    """Ranks torchrun itself stopped: SIGTERM, once another rank had
    failed (its report names that one first) or where its log says it
    sent it. Not dead ranks: that is torchrun's shutdown."""
    return {r for r, (code, pid, _) in ev.failures.items()
            if code == -15 and (ev.root not in (None, r)
                                or pid in ev.sigtermed)}


def dead(ev):
    """Ranks torchrun reports killed by a signal, but for those it
    stopped itself: {rank: words}."""
    gone = stopped(ev)
    return {r: f"killed by signal {-code} "
               f"({_SIGNALS.get(-code, 'a signal')})"
            for r, (code, _, _) in ev.failures.items()
            if code < 0 and r not in gone}


# -- the report ----------------------------------------------------------

def explain(paths):
    """The report on these files, as text (raises jobfiles.BadInput)."""
    ev = jobfiles.read(paths)
    known = (set(ev.dumps) | set(ev.stacks) | set(ev.failures)
             | set(ev.said))
    world = list(range(max(known) + 1)) if known else []
    died, halted = dead(ev), stopped(ev)
    out = ["Read: " + "; ".join(_read(ev)) + "."]
    out += [f"Not read: {path}, because {why}." for path, why in ev.unread]
    out += [f"{note[0].upper()}{note[1:]}." for note in ev.notes]
    out += ["", "Where each rank is:"]
    for r in world:
        stack = _main_thread(ev.stacks.get(r, []))
        where = (("waiting in " if stack[0][0].startswith("torch/")
                  else "at ") + _where(stack)) if stack else (
            "no stack" + _last(ev.dumps.get(r)))
        if r in died:
            where = f"gone: {died[r]} (torchrun); last stack: {where}"
        elif r in halted:
            where += (f"; then stopped by torchrun (SIGTERM) once rank "
                      f"{ev.root} had failed" if ev.root not in (None, r)
                      else "; then stopped by torchrun (SIGTERM)")
        elif r in ev.failures:
            where += f"; then exited with status {ev.failures[r][0]}"
        out.append(f"  rank {r}: {where}")
        said = ev.said.get(r)
        if said:
            out.append(f"    it said: {said[-1]}")
    parted = partings(ev.dumps, world) if ev.dumps else []
    out += ["", "Where the ranks part (Flight Recorder):"]
    out += ([f"  {p.text()}" for p in parted] if parted else
            ["  nowhere: every rank's ledger agrees" if ev.dumps
             else "  unknown: no Flight Recorder dump"])
    out += ["", "What it is:"]
    named = []
    for p in parted:
        p.pattern = recognise(ev, p)
        if p.pattern:
            named.append(p.pattern[0])
            where = "" if p.group == "0" else f"group {p.group}, "
            out += [f"  {where}#{p.seq}: {p.pattern[1]}.",
                    f"    See {link(p.pattern[0])}"]
    for r, words in died.items():
        named.append("dead-rank")
        out += [f"  rank {r} died ({words}): a collective the others "
                f"are in with it cannot complete.",
                f"    See {link('dead-rank')}"]
    if not named:
        out.append("  none of the book's patterns fits this evidence.")
    out += ["", "What this cannot tell:"] + [
        f"  - {line}" for line in _cannot(ev, world, parted, died)]
    return "\n".join(out)


def _last(dump):
    """`; its last collective: #2 barrier (from f > g)`, from a dump:
    the default group's, if it has any."""
    entries = dump["entries"] if dump else []
    entries = [e for e in entries if e["process_group"][0] == "0"] or entries
    if not entries:
        return ""
    e = max(entries, key=lambda e: e["time_created_ns"])
    site = ledger.site(e.get("frames") or [])
    group = "" if e["process_group"][0] == "0" else \
        f" of group {e['process_group'][0]}"
    return (f"; its last collective{group}: #{e['collective_seq_id']} "
            f"{_op(e)}" + (f" (from {site})" if site else ""))


def _read(ev):
    out = []
    if ev.dumps:
        out.append(f"Flight Recorder dumps of {ranks_text(ev.dumps)}")
    if ev.stacks:
        out.append(f"stacks of {ranks_text(ev.stacks)}")
    if ev.workers:
        out.append(f"{ev.workers} DataLoader workers' stacks, left out")
    if ev.log:
        out.append("torchrun's output")
    return out or ["nothing"]


def _cannot(ev, world, parted, died):
    out = []
    no_stack = [r for r in world if r not in ev.stacks]
    if no_stack:
        out.append(f"where in their code {ranks_text(no_stack)} stood: "
                   f"no stack (a dump has only its collectives' call sites)")
    for pid, _ in ev.unranked:
        out.append(f"whose stack process {pid} is: put `RANK=N` on the "
                   f"line before each, as step 0's one-liner does")
    no_dump = [r for r in world if r not in ev.dumps and r not in died]
    if ev.dumps and no_dump:
        out.append(f"the ledger of {ranks_text(no_dump)}: no dump")
    if not ev.dumps:
        out.append("which collective the ranks part at: no Flight "
                   "Recorder dump")
    for r, pids in ev.unsure.items():
        out.append(f"which of processes {pids} is rank {r}: each has its "
                   f"RANK (workers it started?), so none is shown")
    if not ev.report:
        out.append("whether a rank died, and how each ended: no torchrun "
                   "report")
    if any(e["profiling_name"].startswith("gloo:")
           for d in ev.dumps.values() for e in d["entries"]):
        out.append("which collectives had started or completed: gloo "
                   "leaves every entry \"scheduled\" (an NCCL job's dumps "
                   "say \"started\", \"completed\")")
    if parted and not died and not any(p.pattern for p in parted):
        out.append("why the ranks part: the stacks and call sites show "
                   "none of the book's patterns")
    return out or ["nothing more to add"]


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[1] if args else __doc__)
        return 0 if args else 2
    try:
        print(explain(args))
    except jobfiles.BadInput as error:
        print(f"ddpdemo.explain: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
