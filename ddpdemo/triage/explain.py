"""Explain a hang or a failed launch from what the job left behind, in
the book's words, or as data (--json).

    python -m ddpdemo.explain DUMPS_DIR stacks.txt torchrun.log
    ddpdemo-explain --json DUMPS_DIR stacks.txt torchrun.log

Any mix of: each rank's Flight Recorder dump (TORCH_FR_DUMP_TEMP_FILE's
prefix + rank; in a directory only files so named are read, not its
folders), stack dumps (`py-spy dump` of every process, with or without
step 0's `RANK=N` lines, or faulthandler's), and torchrun's output. It
says where each rank (or process, by its pid) is, where the ranks part
(the first collective number at which their ledgers differ, per group,
found by the runtime's ledger: ddpdemo.runtime.ledger.first_divergence),
the pattern the book shows live if the evidence shows one, with a link
to that section, and what the evidence cannot tell. It never names a
pattern the evidence contradicts. An input it cannot read it names and
leaves out: while a job still hangs, its stacks alone can be read.
Nothing readable, or dumps of two jobs mixed: one line on stderr, exit
status 2. The triage page's step 0 introduces it; the evaluation
chapter shows it beside its ledger.

What a dump can show depends on the backend. gloo writes none itself: a
dump exists only if the job writes it (ddpdemo.launch does, with
TORCH_FR_DUMP_TEMP_FILE set: on a caught timeout, on SIGTERM, and on
SIGUSR2 at any moment of a hang), and it leaves every entry "scheduled".
NCCL's watchdog writes every rank's dump on a timeout
(TORCH_NCCL_DUMP_ON_TIMEOUT=1). An NCCL entry says "started" only where
the job records start events: TORCH_NCCL_ENABLE_TIMING=1, which
TORCH_NCCL_DESYNC_DEBUG=1 and TORCH_DISTRIBUTED_DEBUG=DETAIL imply
(ProcessGroupNCCL.hpp: "Enable recording start-events for all
ProcessGroupNCCL collectives"; "enableTiming_ is always true if
desyncDebug_"; ProcessGroupNCCL.cpp: `auto desyncDebug =
getCvarBool(TORCH_NCCL_DESYNC_DEBUG, false) || (dist_debug_level_ >=
DebugLevel::Detail);`). Otherwise it stays "scheduled" until "completed"
(FlightRecorderDetail.hpp), like one never launched. tests/test_explain.py
re-finds the quoted header lines in the installed torch.
"""
import argparse
import dataclasses
import json
import os
import sys

from ..runtime import ledger
from ..runtime.errors import ranks_text
from . import jobfiles, launchlog, patterns
from .patterns import SECTIONS

# The hosted book, in one place: GitHub Pages of _config.yml's repository
# (https://github.com/ddpdemo/ddpdemo). SITE_VAR overrides it (a local
# build: file:///.../_build/html/), as does --site.
SITE = "https://ddpdemo.github.io/ddpdemo/"
SITE_VAR = "DDPDEMO_BOOK_URL"
# A dump written under TORCH_DISTRIBUTED_DEBUG=DETAIL names no group.
UNNAMED = ""
DETAIL_NOTE = (
    "the dumps were written under TORCH_DISTRIBUTED_DEBUG=DETAIL: their "
    "entries name no process group, so the job's collectives and DETAIL's "
    "own checks (all_gathers of each collective's fingerprint) share one "
    "numbering and are not compared; DETAIL's check names the mismatch "
    "itself, in each rank's error (\"Detected mismatch between "
    "collectives on ranks\"), and pg_status's last collective per group "
    "is shown with each rank")
# What an NCCL job sets before it starts, so that a dump says "started".
# The installed headers say only that desync debugging turns timing on
# (ProcessGroupNCCL.hpp); DETAIL's part is in the .cpp no CPU build ships.
NCCL_TIMING = "TORCH_NCCL_ENABLE_TIMING=1 (or TORCH_NCCL_DESYNC_DEBUG=1)"


def site():
    """The book's base address: $DDPDEMO_BOOK_URL, else the hosted book."""
    return os.environ.get(SITE_VAR) or SITE


def link(pattern, base=None):
    page, label = SECTIONS[pattern]
    base = base or site()
    return f"{base.rstrip('/')}/book/{page}.html#{label}"


# -- the findings, as data ------------------------------------------------

def findings(paths, base=None, prefix=None):
    """The report on these files as plain data (what --json prints);
    raises jobfiles.BadInput. prefix: the dumps' names before the rank
    (else inferred)."""
    ev = jobfiles.read(paths, prefix)
    known = (set(ev.dumps) | set(ev.stacks) | set(ev.failures)
             | set(ev.said))
    world = list(range(max(known) + 1)) if known else []
    dead = _dead(ev)
    parted = _partings(ev, world, dead)
    if any(UNNAMED in ledger.groups(d) for d in ev.dumps.values()):
        ev.notes.append(DETAIL_NOTE)
    named = []
    for group, found in parted:
        hit = patterns.on_a_parting(ev, group, found)
        if hit:
            named.append(_named(hit, base, "ledger", group, found.seq))
    if not ev.dumps:
        hit = patterns.on_stacks(_processes(ev))
        if hit:
            named.append(_named(hit, base, "stacks"))
    for r, (code, pid, _) in sorted(dead.items()):
        words = (f"rank {r} was killed by "
                 f"{launchlog.signal_meaning(-code)}: a collective the "
                 f"others are in with it cannot complete")
        named.append(_named(patterns.Named("dead-rank", words, (r,),
                                           (pid,)), base, "torchrun"))
    for name, line in ev.launch:
        named.append(_named(patterns.Named(name, _launch_words(name, line)),
                            base, "torchrun", line=line))
    return {
        "read": {"files": ev.sources, "dumps": sorted(ev.dumps),
                 "stacks": sorted(ev.stacks),
                 "unranked": [pid for pid, _ in ev.unranked],
                 "workers": ev.workers, "torchrun": ev.log},
        "not_read": [{"path": p, "why": why} for p, why in ev.unread],
        "notes": ev.notes,
        "ranks": [_rank(ev, r, dead) for r in world],
        "processes": [_unranked(pid, threads)
                      for pid, threads in ev.unranked],
        "partings": [dict(group=g, **f.data(), sentence=f.sentence(),
                          sides=_sides(ev, g, f),
                          running=patterns.running(ev, f.ranks)
                          if f.kind == "missing" else [],
                          raised=_raised(ev, f))
                     for g, f in parted],
        "patterns": named,
        "cannot_tell": _cannot(ev, world, parted, named, dead),
    }


def _named(hit, base, evidence, group=None, seq=None, line=None):
    out = {"pattern": hit.name, "evidence": evidence, "group": group,
           "seq": seq, "ranks": list(hit.ranks), "pids": list(hit.pids),
           "words": hit.words, "unconfirmed": list(hit.unconfirmed),
           "url": link(hit.name, base)}
    if line:
        out["line"] = line
    return out


def _launch_words(name, line):
    if name == "static-rendezvous":
        joined, expected = launchlog.joined(line)
        return (f"the static rendezvous (--master-addr, --master-port) "
                f"waited for {expected} nodes' launchers and {joined} "
                f"came: a node never started, or has another --nnodes "
                f"or --master-addr")
    if name == "rendezvous-timeout":
        return ("c10d's rendezvous ran out of join_timeout: a node never "
                "started, or has another --nnodes or --rdzv-endpoint, or "
                "cannot reach it")
    if name == "client-timeout":
        m = launchlog.FAILURES[name].search(line)
        return (f"this node's launcher could not connect to the "
                f"rendezvous store at {m[1]}:{m[2]} (--master-addr, "
                f"--master-port) in time: node 0 never started or "
                f"listens elsewhere (its --master-port or --nnodes "
                f"differ), or the address cannot be reached from here")
    return ("the master port is taken (EADDRINUSE): another job or "
            "program listens on it; choose another, or --standalone on "
            "one node")


def _dead(ev):
    """{rank: (code, pid, line)}: ranks torchrun reports killed by a
    signal, but for those it stopped itself (SIGTERM once another rank
    had failed, or where its log says it sent it): torchrun's shutdown."""
    return {r: f for r, f in ev.failures.items()
            if f[0] < 0 and not _stopped(ev, r)}


def _stopped(ev, r):
    """-15, or 143 (128 + SIGTERM) where the job caught it and exited, as
    ddpdemo.launch does once it has written its dump."""
    code, pid, _ = ev.failures[r]
    return code in (-15, 143) and (ev.root not in (None, r)
                                   or pid in ev.sigtermed)


def _partings(ev, world, dead):
    """[(group, Finding)] of every group whose ledgers part, earliest
    first. A member with no dump is dead (torchrun says so) or silent."""
    names = set().union(*(ledger.groups(d) for d in ev.dumps.values()))
    # Under TORCH_DISTRIBUTED_DEBUG=DETAIL every entry's group is ('', ''):
    # the job's collectives and its wrapper's own checks (all_gathers of
    # fingerprints on a helper group) share one name, and their numbers
    # interleave, so matching them by number would invent a parting.
    names.discard(UNNAMED)
    found = []
    for group in sorted(names, key=lambda g: (len(g), g)):
        ledgers = {r: ledger.entries(d, group, sites=False)
                   for r, d in ev.dumps.items()}
        ledgers = {r: es for r, es in ledgers.items() if es} \
            if group != ledger.DEFAULT_GROUP else ledgers
        members = world if group == ledger.DEFAULT_GROUP else sorted(ledgers)
        gone = [r for r in members if r not in ev.dumps]
        f = ledger.first_divergence(
            ledgers, dead=[r for r in gone if r in dead],
            silent=[r for r in gone if r not in dead])
        f = _evicted(ev, group, ledgers, f, dead, gone)
        if f.diverged:
            found.append((group, f, _when(ev, group, f.seq)))
    return [(g, f) for g, f, _ in sorted(found, key=lambda x: x[2])]


def last_enqueued(dump, group):
    """The number of the last collective `group` enqueued on a rank, from
    its dump's pg_status (-1: none, or no pg_status): it outlives the
    ring buffer's eviction of the entries."""
    status = (dump or {}).get("pg_status", {}).get(group, {})
    seq = status.get("last_enqueued_collective", -1)
    return seq if isinstance(seq, int) else -1


def _evicted(ev, group, ledgers, found, dead, gone):
    """A rank whose ring buffer dropped all its entries of `group` (other
    groups' traffic) is no rank that "called none": where pg_status says
    it went past the parting, it is left out of the comparison; where
    not, its last number is pg_status's."""
    if found.kind != "missing":
        return found
    past = [r for r in found.ranks if not ledgers.get(r)
            and last_enqueued(ev.dumps.get(r), group) >= found.seq]
    if past:
        ev.notes.append(
            f"{ranks_text(past)}'s entries of "
            + ("the default group" if group == ledger.DEFAULT_GROUP
               else f"group {group}")
            + " were all evicted from the Flight Recorder's ring buffer "
            "(pg_status: last enqueued "
            + ", ".join(f"#{last_enqueued(ev.dumps[r], group)}"
                        for r in past)
            + "), so they are not compared")
        kept = {r: es for r, es in ledgers.items() if r not in past}
        return _evicted(ev, group, kept, ledger.first_divergence(
            kept, dead=[r for r in gone if r in dead],
            silent=[r for r in gone if r not in dead]), dead, gone)
    stopped = tuple(
        s if s.seq else s._replace(seq=max(0, last_enqueued(
            ev.dumps.get(s.rank), group)))
        for s in found.stopped)
    return dataclasses.replace(found, stopped=stopped)


def _raised(ev, found):
    """[{rank, said}] for ranks that never called the parting's
    collective by the ledger, but whose own error names that op and is
    no timeout: the call raised on that rank before the Flight Recorder
    recorded it (gloo's checks of sizes: `ProcessGroupGloo::allgather:
    invalid tensor size`)."""
    if found.kind != "missing" or not found.ops:
        return []
    op = found.ops[0].op.replace("_", "").lower()
    out = {}
    for r in found.ranks:
        for line in ev.said.get(r, []):
            low = line.lower()
            if op in low.replace("_", "") and "timed out" not in low:
                out[r] = line
    return [{"rank": r, "said": line} for r, line in out.items()]


def _entry(ev, rank, group, seq):
    for e in ev.dumps.get(rank, {}).get("entries", []):
        if e["process_group"][0] == group and e["collective_seq_id"] == seq:
            return e
    return None


def _when(ev, group, seq):
    times = [e["time_created_ns"] for r in ev.dumps
             if (e := _entry(ev, r, group, seq))]
    return min(times, default=0)


def _sides(ev, group, found):
    """Each op at the parting with its call site and state."""
    out = []
    for called in found.ops:
        e = _entry(ev, called.ranks[0], group, found.seq)
        out.append({"op": called.text, "ranks": list(called.ranks),
                    "site": ledger.site(e.get("frames") or []),
                    "state": e["state"]})
    return out


def _where(frames):
    """Where a stack stands: its innermost call, and the job's own
    frames below it (up to 3), innermost first."""
    if not frames:
        return None
    top = frames[0]
    own = [f for f in frames if patterns.is_own(f[0])][:3]
    return {"waiting": not patterns.is_own(top[0]),
            "call": {"function": top[2], "file": top[0], "line": top[1]},
            "from": [{"function": fn, "file": p, "line": n}
                     for p, n, fn in own if (p, n, fn) != top]}


def _last(dump):
    """The last collective in a dump (the default group's, if any)."""
    entries = dump["entries"] if dump else []
    if entries and all(e["process_group"][0] == UNNAMED for e in entries):
        # DETAIL: the entries' numbers are not the job's; pg_status's are.
        status = dump.get("pg_status", {}).get(ledger.DEFAULT_GROUP, {})
        seq = status.get("last_enqueued_collective", -1)
        return None if seq < 0 else {
            "group": ledger.DEFAULT_GROUP, "seq": seq, "op": "",
            "site": ""}
    default = [e for e in entries
               if e["process_group"][0] == ledger.DEFAULT_GROUP]
    entries = default or entries
    if not entries:
        return None
    e = max(entries, key=lambda e: e["time_created_ns"])
    one = ledger.entry(e)
    group = e["process_group"][0]
    # gloo's too: a dump written mid-hang leaves the collective still
    # waited on not retired, and pg_status says the last completed.
    status = dump.get("pg_status", {}).get(group, {})
    return {"group": group, "seq": one["seq"],
            "op": ledger.op_text(one["op"], one["what"]),
            "site": one["site"], "pending": not one["retired"],
            "last_completed": status.get("last_completed_collective")}


def _rank(ev, r, dead):
    stack = patterns.main_thread(ev.stacks.get(r, []))
    out = {"rank": r, "pid": ev.pids.get(r), "rank_from":
           ev.rank_from.get(r), "where": _where(stack),
           "last_collective": _last(ev.dumps.get(r)), "ended": None,
           "said": (ev.said.get(r) or [None])[-1]}
    if r in dead:
        out["ended"] = {"how": "killed", "signal":
                        launchlog.signal_name(-dead[r][0]),
                        "meaning": launchlog.signal_meaning(-dead[r][0])}
    elif r in ev.failures and _stopped(ev, r):
        out["ended"] = {"how": "stopped by torchrun", "signal": "SIGTERM",
                        "after_rank": ev.root if ev.root != r else None}
    elif r in ev.failures:
        out["ended"] = {"how": "exited", "status": ev.failures[r][0]}
    return out


def _unranked(pid, threads):
    return {"rank": None, "pid": pid,
            "where": _where(patterns.main_thread(threads))}


def _processes(ev):
    """[(rank or None, pid, main thread's frames)] of every stack."""
    return ([(r, ev.pids.get(r), patterns.main_thread(t))
             for r, t in sorted(ev.stacks.items())]
            + [(None, pid, patterns.main_thread(t)) for pid, t in
               ev.unranked])


def _backends(ev):
    return {e["profiling_name"].split(":")[0]
            for d in ev.dumps.values() for e in d["entries"]}


def _cannot(ev, world, parted, named, dead):
    """What the evidence cannot tell: [{"topic", "text"}]."""
    out = []

    def add(topic, text):
        out.append({"topic": topic, "text": text})

    _cannot_place(ev, world, add)
    no_dump = [r for r in world if r not in ev.dumps and r not in dead]
    if ev.dumps and no_dump:
        add("no-dump", f"the ledger of {ranks_text(no_dump)}: no dump")
    if len(world) == 1:
        add("world", f"whether the job had other ranks, and where they "
            f"stood: only rank {world[0]} is in this evidence (every "
            f"rank's dump or stack names them)")
    if not ev.dumps:
        add("no-dump", "which collective the ranks part at: no Flight "
            "Recorder dump. gloo writes none itself: the job writes it "
            "(at any moment, e.g. on SIGUSR2, or when it catches the "
            "timeout); NCCL's watchdog does on a timeout, with "
            "TORCH_NCCL_DUMP_ON_TIMEOUT=1")
    if not ev.report and not ev.launch:
        add("no-report", "whether a rank died, and how each ended: no "
            "torchrun report")
    _cannot_still_running(ev, parted, add)
    _cannot_started(ev, add)
    for hit in named:
        for text in hit["unconfirmed"]:
            add("unconfirmed", text)
    if parted and not named and not any(
            c["topic"] == "still-running" for c in out):
        add("no-pattern", "why the ranks part: the stacks and call sites "
            "show none of the book's patterns")
    return out


def _cannot_place(ev, world, add):
    """Where a rank stood, and whose a stack is."""
    no_stack = [r for r in world if r not in ev.stacks]
    if no_stack:
        add("no-stack", f"where in their code {ranks_text(no_stack)} "
            f"stood: no stack (a dump has only its collectives' call "
            f"sites)")
    for pid, _ in ev.unranked:
        add("rank-unknown", f"which rank "
            f"{patterns.process_text(pid, rank_unknown=False)} is: "
            f"its stack has no RANK= line (step 0's one-liner writes "
            f"one), and no torchrun report names its pid")
    for r, pids in ev.unsure.items():
        add("rank-unsure", f"which of processes {pids} is rank {r}: each "
            f"has its RANK (workers it started?), so none is shown")


def _cannot_still_running(ev, parted, add):
    """A rank that never called the parting's collective, whose stack
    stands in its own code: it may only be slower."""
    for group, found in parted:
        late = patterns.running(ev, found.ranks) \
            if found.kind == "missing" else []
        if late:
            one = len(late) == 1
            where = ("its stack stands" if one
                     else "their stacks stand")
            add("still-running", f"whether {ranks_text(late)} will still "
                f"reach collective #{found.seq}"
                + ("" if group == ledger.DEFAULT_GROUP
                   else f" of group {group}")
                + f": {where} in the job's own code, not in a collective "
                f"and not finished, so {'it' if one else 'they'} may "
                f"only be slower (computing, loading data); no missing "
                f"partner is named on it")


def _cannot_started(ev, add):
    """What a dump's states cannot say, per backend."""
    backends = _backends(ev)
    # One text whatever the dumps' `retired` flags say: in a dump written
    # after a gloo timeout, whether the failed collective is still
    # pending is a race, and the report must not change with it.
    if "gloo" in backends:
        add("started", "which collectives had started or completed: gloo "
            "leaves every entry \"scheduled\", and a collective that some "
            "rank never called cannot have completed; in a dump written "
            "during the hang the one still waited on is not retired, and "
            "pg_status gives each group's last completed (in one written "
            "after a timeout it may count either way)")
    entries = [e for d in ev.dumps.values() for e in d["entries"]
               if e["profiling_name"].startswith("nccl:")]
    if entries and not any(e.get("time_discovered_started_ns")
                           for e in entries):
        add("started", f"which \"scheduled\" NCCL collectives had "
            f"started on the GPU: without start events an entry stays "
            f"\"scheduled\" until \"completed\", like one never launched; "
            f"set {NCCL_TIMING} before the job")


# -- the report, in words -------------------------------------------------

def render(data):
    """The findings (findings()) as the report's text."""
    out = ["Read: " + "; ".join(_read_text(data["read"])) + "."]
    out += [f"Not read: {u['path']}, because {u['why']}."
            for u in data["not_read"]]
    out += [f"{n[0].upper()}{n[1:]}." for n in data["notes"]]
    out += ["", "Where each rank is:"]
    for r in data["ranks"]:
        out += _rank_lines(r)
    for p in data["processes"]:
        out.append(f"  {patterns.process_text(p['pid'])}: "
                   + _where_text(p["where"]))
    if not data["ranks"] and not data["processes"]:
        out.append("  no rank ran")
    out += ["", "Where the ranks part (Flight Recorder):"]
    out += [f"  {_parting_text(p)}" for p in data["partings"]] or [
        "  not compared: the dumps were written under DETAIL (above)"
        if DETAIL_NOTE in data["notes"] else
        _no_parting_text(data["read"]["dumps"])]
    out += ["", "What it is:"]
    for hit in data["patterns"]:
        where = "" if hit["seq"] is None else (
            ("" if hit["group"] == ledger.DEFAULT_GROUP
             else f"group {hit['group']}, ") + f"#{hit['seq']}: ")
        out += [f"  {where}{hit['words']}.", f"    See {hit['url']}"]
    if not data["patterns"]:
        out.append("  none of the book's patterns fits this evidence.")
    out += ["", "What this cannot tell:"]
    out += [f"  - {c['text']}" for c in data["cannot_tell"]] or [
        "  - nothing more to add"]
    return "\n".join(out)


def _no_parting_text(dumps):
    if not dumps:
        return "  unknown: no Flight Recorder dump"
    if len(dumps) == 1:
        return (f"  unknown: rank {dumps[0]}'s ledger alone, with no other "
                f"rank's to compare")
    return f"  nowhere: the ledgers of {ranks_text(dumps)} agree"


def _read_text(read):
    """What was read, without paths (chapter 5 prints it)."""
    out = []
    if read["dumps"]:
        out.append(f"Flight Recorder dumps of {ranks_text(read['dumps'])}")
    if read["stacks"]:
        out.append(f"stacks of {ranks_text(read['stacks'])}")
    if read["unranked"]:
        out.append(f"stacks of {len(read['unranked'])} processes of "
                   f"unknown rank")
    if read["workers"]:
        out.append(f"{read['workers']} DataLoader workers' stacks, left "
                   f"out")
    if read["torchrun"]:
        out.append("torchrun's output")
    return out or ["nothing"]


def _where_text(where):
    if where is None:
        return "no stack"
    call = where["call"]
    text = (("waiting in " if where["waiting"] else "at ")
            + f"{call['function']} ({call['file']}:{call['line']})")
    if where["from"]:
        text += ", from " + " < ".join(
            f"{f['file']}:{f['line']} in {f['function']}"
            for f in where["from"])
    return text


def _rank_lines(r):
    where = _where_text(r["where"])
    if r["where"] is None and r["last_collective"]:
        last = r["last_collective"]
        group = ("" if last["group"] == ledger.DEFAULT_GROUP
                 else f" of group {last['group']}")
        where += (f"; its last collective{group}: #{last['seq']}"
                  + (f" {last['op']}" if last["op"] else
                     " (pg_status's number; DETAIL's dump names no op)")
                  + (f" (from {last['site']})" if last["site"] else "")
                  + (f", pending (not retired; last completed: "
                     f"#{last['last_completed']})"
                     if last.get("pending") and last.get("last_completed")
                     is not None else ""))
    ended = r["ended"]
    if ended and ended["how"] == "killed":
        where = f"gone: killed by {ended['signal']} (torchrun's report)" \
                + (f"; last stack: {where}" if r["where"] else "")
    elif ended and ended["how"] == "stopped by torchrun":
        where += "; then stopped by torchrun (SIGTERM)" + (
            f" once rank {ended['after_rank']} had failed"
            if ended["after_rank"] is not None else "")
    elif ended:
        where += f"; then exited with status {ended['status']}"
    pid = f" (pid {r['pid']})" if r["pid"] else ""
    lines = [f"  rank {r['rank']}{pid}: {where}"]
    if r["said"]:
        lines.append(f"    it said: {r['said']}")
    return lines


def _parting_text(p):
    name = ("the default group" if p["group"] == ledger.DEFAULT_GROUP
            else f"group {p['group']}")
    parts = [f"{s['op']} on {ranks_text(s['ranks'])}"
             + (f" (from {s['site']})" if s["site"] else "")
             # gloo leaves every entry "scheduled"; NCCL's move on.
             + ("" if s["state"] == "scheduled" else f", {s['state']}")
             for s in p["sides"]]
    for s in p["stopped"]:
        said = next((x["said"] for x in p["raised"]
                     if x["rank"] == s["rank"]), None)
        if said:
            parts.append(f"rank {s['rank']} called it, but it raised "
                         f"there before the Flight Recorder recorded it "
                         f"(it said: {said})")
            continue
        late = s["rank"] in p["running"]
        verb = "has not called it yet" if late else "never called it"
        why = "; its stack is in its own code" if late else ""
        # No op: the entry was evicted, the number is pg_status's.
        op = s["op"] or "(pg_status's number; the entry was evicted)"
        parts.append(f"rank {s['rank']} {verb} (its last: "
                     f"#{s['seq']} {op}{why})" if s["seq"] else
                     f"rank {s['rank']} {verb} (it had called none{why})")
    if p["kind"] in ("dead", "silent"):
        # No parting at #seq: the dumps there are agree up to it, and the
        # rank with no dump cannot be compared (the finding's sentence).
        return (f"{name}: no dump from {ranks_text(p['ranks'])}; the "
                f"others agree up to collective #{p['seq']} ("
                + "; ".join(parts) + ")")
    return f"{name}, collective #{p['seq']}: " + "; ".join(parts)


def explain(paths, base=None):
    """The report on these files, as text (raises jobfiles.BadInput)."""
    return render(findings(paths, base))


# -- the command ----------------------------------------------------------

def parser():
    p = argparse.ArgumentParser(
        prog="python -m ddpdemo.explain",
        description=__doc__.split("\n\n")[2].replace("\n", " "),
        epilog="A Flight Recorder dump is a pickle, and unpickling runs "
               "code: read dumps only from a job you trust.")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="dump directories, dumps, stack files, torchrun's "
                        "output")
    p.add_argument("--json", action="store_true",
                   help="print the findings as JSON data")
    p.add_argument("--prefix", metavar="NAME", default=None,
                   help="the dumps' file names before the rank (the last "
                        "part of TORCH_FR_DUMP_TEMP_FILE; default: what "
                        "the names share)")
    p.add_argument("--site", metavar="URL", default=None,
                   help=f"the book's base address for section links "
                        f"(default: ${SITE_VAR}, else {SITE})")
    return p


def main(argv=None):
    args = parser().parse_args(argv)    # usage errors: stderr, exit 2
    try:
        data = findings(args.paths, args.site, args.prefix)
    except jobfiles.BadInput as error:
        print(f"ddpdemo.explain: {error}", file=sys.stderr)
        return 2
    try:
        print(json.dumps(data, indent=1) if args.json else render(data))
        sys.stdout.flush()
    except BrokenPipeError:
        # `... | head`: the reader stopped reading; no traceback. stdout
        # goes to devnull so that the flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
