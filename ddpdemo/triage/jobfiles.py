"""Reading what a hung or failed job leaves behind: each rank's Flight
Recorder dump, stack dumps (py-spy's `dump`, or faulthandler's), and
torchrun's output. The input side of `python -m ddpdemo.explain`
(ddpdemo.explain), introduced on the book's triage page, step 0.

`read(paths)` sorts every file by what it holds, not by its name, with
one exception: a pickle is unpickled only where its name is a dump's
(prefix + rank), and a directory's folders are not searched. What
it cannot read (a missing file, an empty directory, a truncated dump, one
from another torch, a stack file with no Python frame) it notes and
leaves out, so that what a job leaves while it still hangs (stacks, no
dumps yet, no report yet) can be read; it raises BadInput (one line)
only when nothing is left to read, or for dumps of two jobs mixed (which
of them is the job's, it cannot tell).
Frames are (path, line, function), innermost first, paths shortened as
the book prints them (`torch/...`, `ddpdemo/...`).
"""
import functools
import importlib
import importlib.util
import itertools
import os
import pickle
import re
import sys

from ..runtime.errors import FRAME, short_path
from . import launchlog


class BadInput(ValueError):
    """What cannot be read, in one line naming the file."""


class Evidence:
    """dumps {rank: dump dict}; stacks {rank: [(thread name, frames)]},
    pids {rank: pid} and rank_from {rank: how its rank is known} for
    them; unranked [(pid, threads)] (stacks with no rank to them);
    failures {rank: (exit code, pid, traceback line)} from torchrun's
    report, with `root` the rank it names first, `report` whether there
    was one, and `sigtermed` the pids torchrun says it sent SIGTERM;
    launch [(failure, line)]: torchrun's own failures before any rank
    ran (launchlog.FAILURES); said {rank: [lines]} the ranks' own
    `[rank N]`/`[rankN]:` lines; sources: a line per file read; unread
    [(path, why)] the inputs left out; notes: other lines on what was
    read (a log with no report); unsure {rank: [pids]} where several
    processes claim one rank."""

    def __init__(self):
        self.dumps, self.stacks, self.unranked = {}, {}, []
        self.pids, self.rank_from = {}, {}
        self.failures, self.root, self.said = {}, None, {}
        self.log, self.report, self.sigtermed = False, False, set()
        self.launch = []
        self.sources, self.notes, self.unsure = [], [], {}
        self.unread, self.workers = [], 0
        self.blocks = {}     # rank: [(pid, threads, from)], before choosing
        self.prefix, self.prefixes = None, {}   # of the dumps' names


def read(paths, prefix=None):
    """Evidence from files and directories: a directory's own files, not
    its folders'; of those, only files named as dumps are unpickled.
    prefix: the dumps' names before the rank (TORCH_FR_DUMP_TEMP_FILE's
    last part); else each folder's is inferred (_prefixes)."""
    evidence = Evidence()
    evidence.prefix = prefix
    files = _files(evidence, paths)
    evidence.prefixes = _prefixes(evidence, files) if prefix is None else {}
    for path, named_as_dump in files:
        _add_file(evidence, path, named_as_dump)
    _check_one_job(evidence)
    _choose_blocks(evidence)
    if not (evidence.dumps or evidence.blocks or evidence.unranked
            or evidence.failures or evidence.said or evidence.launch):
        said = "; ".join(f"{p}: {why}" for p, why in evidence.unread)
        raise BadInput(said if len(evidence.unread) == 1 else
                       f"nothing to read: {said}")
    _place_by_pid(evidence)
    return evidence


# A dump's file name: TORCH_FR_DUMP_TEMP_FILE's prefix, then the rank.
DUMP_NAME = re.compile(r"^(.*?)(\d+)$")


def _prefixes(evidence, files):
    """{folder: the prefix of its dumps' names}: what the names share,
    less trailing digits, unless keeping some makes the ranks 0 to n-1
    (TORCH_FR_DUMP_TEMP_FILE=/x/v2 writes v20, v21: ranks 0 and 1, not
    20 and 21), which a note then says."""
    by_folder = {}
    for path, named in files:
        name = os.path.basename(path)
        if named and DUMP_NAME.match(name):
            by_folder.setdefault(os.path.dirname(path), []).append(name)
    out = {}
    for folder, names in by_folder.items():
        if len(names) < 2:
            continue
        # the characters every name shares from its start (not a path)
        # (names differ in length: the shortest bounds the prefix)
        common = "".join(c[0] for c in itertools.takewhile(
            lambda chars: len(set(chars)) == 1,
            zip(*names, strict=False)))
        base = common.rstrip("0123456789")
        out[folder] = base
        for k in range(len(common), len(base), -1):
            ranks = sorted(int(n[k:]) for n in names)
            if ranks == list(range(len(names))):
                out[folder] = common[:k]
                evidence.notes.append(
                    f"the dumps in {folder or '.'} were read as prefix "
                    f"`{common[:k]}` + rank (ranks 0 to {len(names) - 1}), "
                    f"not `{base}` + rank: --prefix says which")
                break
    return out


def _files(evidence, paths):
    """[(path, whether its name is a dump's)]: the files given (a file
    named on the command line is the reader's choice), and each given
    directory's files, not recursively."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            found = sorted(e.path for e in os.scandir(path) if e.is_file())
            if not found:
                evidence.unread.append((path, "an empty directory"))
            files += [(f, bool(DUMP_NAME.match(os.path.basename(f))))
                      for f in found]
        elif os.path.isfile(path):
            files.append((path, True))
        else:
            evidence.unread.append((path, "no such file or directory"))
    unique, seen = [], set()
    for f in files:     # a file named twice (a folder and its file): once
        if os.path.realpath(f[0]) not in seen:
            seen.add(os.path.realpath(f[0]))
            unique.append(f)
    return unique


def _add_file(evidence, path, named_as_dump):
    """A dump (a pickle: protocol 2 and later start with 0x80) or text.
    A pickle is unpickled only where its name is a dump's: unpickling
    runs code, so a dump is read only from a trusted job."""
    try:
        with open(path, "rb") as f:
            head = f.read(1)
        if head == b"\x80" and not named_as_dump:
            raise BadInput(f"{path}: a pickle not named as a dump "
                           f"(prefix + rank), so not unpickled")
        if head == b"\x80":
            _add_dump(evidence, path)
        else:
            _add_text(evidence, path)
    except OSError as error:
        evidence.unread.append((path, error.strerror.lower()))
    except BadInput as error:
        evidence.unread.append(
            (path, str(error).removeprefix(f"{path}: ")))


def _place_by_pid(evidence):
    """A stack with no rank to it: torchrun's report gives failed
    ranks' pids. (A Flight Recorder dump holds no pid: torch 2.13's has
    version, pg_config, pg_status, comm_lib_version and entries.)"""
    pids = {pid: rank for rank, (_, pid, _) in evidence.failures.items()}
    for pid, threads in list(evidence.unranked):
        rank = pids.get(pid)
        if rank is not None and rank not in evidence.stacks:
            evidence.stacks[rank] = threads
            evidence.pids[rank] = pid
            evidence.rank_from[rank] = "torchrun's report (its pid)"
            evidence.unranked.remove((pid, threads))


# -- Flight Recorder dumps ---------------------------------------------------

# The dump format the torch this was written against writes: a dump of
# that format is taken without importing torch (2.3 s of a 2.6 s answer
# on a 2-core machine); any other format is checked against the installed
# torch itself. tests/test_explain.py checks the two agree here.
KNOWN_VERSION = "2.10"


@functools.cache
def writer_version():
    """The dump format this torch writes (its dumps' "version")."""
    from torch._C._distributed_c10d import _dump_fr_trace
    return pickle.loads(_dump_fr_trace(includeCollectives=False,
                                       includeStackTraces=False,
                                       onlyActive=False))["version"]


@functools.cache
def torch_read_dump():
    """torch's own reader of one dump (flight_recorder's loader.py), so
    what its analyzer reads, this reads. Where torch is not imported yet,
    its loader and the logger module it needs are loaded from the
    installed torch's files alone: they use only the standard library,
    and importing torch would take most of the command's time."""
    name = "torch.distributed.flight_recorder.components"
    if "torch" in sys.modules:
        return importlib.import_module(name + ".loader").read_dump
    spec = importlib.util.find_spec("torch")
    folder = os.path.join(spec.submodule_search_locations[0], "distributed",
                          "flight_recorder", "components")
    modules = {}
    for part in ("fr_logger", "loader"):
        # fr_logger under its own name, where loader's import finds it
        # without importing its parent packages; loader under a private
        # one. Both are dropped from sys.modules again.
        full = f"{name}.{part}" if part == "fr_logger" else "_ddpdemo_loader"
        part_spec = importlib.util.spec_from_file_location(
            full, os.path.join(folder, part + ".py"))
        module = importlib.util.module_from_spec(part_spec)
        sys.modules[full] = module
        modules[full] = module
        part_spec.loader.exec_module(module)
    for full in modules:
        del sys.modules[full]
    return modules["_ddpdemo_loader"].read_dump


def _add_dump(evidence, path):
    # Its rank comes from the file name, as in torch (prefix, rank).
    # (torch's analyzer, build_db, is not used: on the dumps of a plain
    # torchrun job on gloo it fails with KeyError: ('0', 0), chapter 5.)
    read_dump = torch_read_dump()
    name = os.path.basename(path)
    prefix = (evidence.prefix if evidence.prefix is not None
              else evidence.prefixes.get(os.path.dirname(path)))
    if prefix is None or not name.startswith(prefix):
        prefix = name.rstrip("0123456789")
    if prefix == name or not name[len(prefix):].isdigit():
        given = evidence.prefix or "TORCH_FR_DUMP_TEMP_FILE"
        raise BadInput(f"{path}: a Flight Recorder dump's name is its "
                       f"prefix ({given}'s) + rank")
    if prefix.endswith("-"):
        raise BadInput(f"{path}: a negative rank in its name: no rank's "
                       f"dump (prefix + rank)")
    try:
        dump = read_dump(prefix, path)
    except (EOFError, pickle.UnpicklingError, ValueError) as error:
        raise BadInput(f"{path}: truncated or not a Flight Recorder dump "
                       f"({type(error).__name__})") from None
    except (KeyError, TypeError) as error:
        raise BadInput(f"{path}: not a Flight Recorder dump (no "
                       f"{error} in it)") from None
    version = (KNOWN_VERSION if dump["version"] == KNOWN_VERSION
               else writer_version())
    if dump["version"] != version:
        raise BadInput(f"{path}: written by another torch (Flight "
                       f"Recorder format {dump['version']}; this torch "
                       f"reads and writes {version})")
    _check_entries(path, dump["entries"])
    dump["pg_status"] = _pg_status(path)
    rank = dump["rank"]
    if rank in evidence.dumps:
        raise BadInput(f"{path}: a second dump for rank {rank}: dumps of "
                       f"different jobs are mixed")
    evidence.dumps[rank] = dump
    evidence.sources.append(f"{path}: Flight Recorder dump of rank {rank}")


def _pg_status(path):
    """The dump's pg_status, which torch's loader leaves out: per group,
    the numbers of the last collective enqueued, started and completed
    (-1: none). It outlives the ring buffer's eviction of entries, and
    it names the groups a DETAIL dump's entries do not. {} if absent."""
    with open(path, "rb") as f:
        status = pickle.load(f).get("pg_status")
    if not isinstance(status, dict):
        return {}
    return {str(g): s for g, s in status.items() if isinstance(s, dict)}


# What explain reads of each entry, and the type it must have.
ENTRY_FIELDS = {"process_group": (tuple, list), "collective_seq_id": int,
                "profiling_name": str, "state": str, "time_created_ns": int,
                "timeout_ms": int, "is_p2p": bool}


def _check_entries(path, entries):
    """A dump whose header is right may still hold malformed entries (cut
    by hand, written by other code): name the first, in one line."""
    if not isinstance(entries, list):
        raise BadInput(f"{path}: malformed Flight Recorder dump (its "
                       f"entries are not a list)")
    for i, e in enumerate(entries):
        bad = [k for k, kind in ENTRY_FIELDS.items()
               if not isinstance(e, dict) or not isinstance(e.get(k), kind)]
        if not bad and len(e["process_group"]) != 2:
            bad = ["process_group"]
        if bad:
            raise BadInput(f"{path}: malformed Flight Recorder dump (entry "
                           f"{i}: no valid {', '.join(bad)})")


def _check_one_job(evidence):
    """Dumps of one job agree on when they met: a collective that every
    rank went past started on each within its timeout of the others (a
    rank that came later would have found the others gone). Seconds
    apart beyond that, the dumps cannot be of one job. SKEW allows for
    hosts' clocks (NTP keeps them far closer)."""
    by_rank = {r: {e["collective_seq_id"]: e for e in d["entries"]
                   if e["process_group"][0] == "0" and not e["is_p2p"]}
               for r, d in evidence.dumps.items()}
    _check_timeouts(by_rank)
    if len(by_rank) < 2 or not all(by_rank.values()):
        return
    shared = set.intersection(*(set(s) for s in by_rank.values()))
    lowest_top = min(max(es) for es in by_rank.values())
    past = [s for s in sorted(shared) if s < lowest_top]
    if not past:
        return
    at = {r: es[past[0]] for r, es in by_rank.items()}
    created = {r: e["time_created_ns"] / 1e9 for r, e in at.items()}
    bound = max(e["timeout_ms"] for e in at.values()) / 1e3 + SKEW
    if max(created.values()) - min(created.values()) > bound:
        early = min(created, key=created.get)
        late = max(created, key=created.get)
        raise BadInput(f"the dumps of rank {early} and rank {late} are of "
                       f"different jobs: they reached collective "
                       f"#{past[0]} {created[late] - created[early]:.0f} s "
                       f"apart, past its timeout")


SKEW = 2.0   # s


def _check_timeouts(by_rank):
    """One job's default group has one timeout on every rank (init's
    `timeout`, which each entry's timeout_ms carries): ranks whose
    entries share none are of different jobs."""
    timeouts = {r: {e["timeout_ms"] for e in es.values()}
                for r, es in by_rank.items() if es}
    ranks = sorted(timeouts)
    for r in ranks[1:]:
        if not timeouts[r] & timeouts[ranks[0]]:
            def text(t):
                return ", ".join(f"{ms / 1e3:g} s" for ms in sorted(t))
            raise BadInput(
                f"the dumps of rank {ranks[0]} and rank {r} are of "
                f"different jobs: their default group's timeout differs "
                f"({text(timeouts[ranks[0]])} against {text(timeouts[r])})")


# -- stacks and logs ---------------------------------------------------------

_PYSPY_PROCESS = re.compile(r"^Process (\d+): ")
_PYSPY_THREAD = re.compile(r'^Thread (?:0x)?[0-9a-fA-F]+ \(.*\): "(.*)"')
_PYSPY_FRAME = re.compile(r"^\s+(\S.*?) \((.+):(\d+)\)$")
_FH_THREAD = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-f]+ ")
_FH_FRAME = FRAME
_RANK_HEAD = re.compile(r"^(?:RANK=|rank[ :=]*)(\d+)\s*$")
_SAID = re.compile(r"^\[rank ?(\d+)\]:? ?(.*)$")
_SAID_ANY = re.compile(_SAID.pattern, re.M)
_ROOT = "Root Cause (first observed failure):"
# What torchrun writes before any report: its banner, its agent's lines.
_TORCHRUN = re.compile(r"Setting OMP_NUM_THREADS environment variable|"
                       r"torch/distributed/elastic/|SignalException")


def _add_text(evidence, path):
    with open(path, errors="replace") as f:
        text = f.read()
    if "ChildFailedError" in text or _ROOT in text:
        _add_log(evidence, text)
        evidence.sources.append(f"{path}: torchrun's output")
        return
    found = _add_stacks(evidence, path, text)
    if found:
        evidence.sources.append(f"{path}: stacks of {found}")
        return
    failures = launchlog.failures(text)
    if failures:
        evidence.launch += failures
        _add_log(evidence, text)
        evidence.sources.append(f"{path}: torchrun's output (it failed "
                                f"before any rank ran)")
        return
    if not text.strip():     # e.g. torchrun's tee before any output
        raise BadInput(f"{path}: an empty file")
    _add_log_without_report(evidence, path, text)


def _add_log_without_report(evidence, path, text):
    if not (_TORCHRUN.search(text) or _SAID_ANY.search(text)):
        raise BadInput(f"{path}: no Python frames in it (neither py-spy's "
                       f"nor faulthandler's), nor torchrun's report")
    # torchrun's output with no report: it writes one only once a rank
    # has failed, not while the job hangs, nor when interrupted.
    signal = re.search(r"SignalException: .*got signal: (\d+)", text)
    why = (f"torchrun was interrupted (signal {signal[1]}) and wrote none"
           if signal else "torchrun writes it only once a rank has "
           "failed (does the job still run?)")
    if not _SAID_ANY.search(text):
        raise BadInput(f"{path}: torchrun's output with no report and no "
                       f"rank's lines in it: {why}")
    _add_log(evidence, text)
    evidence.sources.append(f"{path}: the ranks' lines in torchrun's "
                            f"output")
    evidence.notes.append(f"no report in {path}, because {why}")


def _add_stacks(evidence, path, text):
    """Blocks of threads, one per process: py-spy's `Process N:` starts
    one; `RANK=N` (or `rank N`) on a line of its own says whose it is, as
    step 0's one-liner writes it; else a file name ending in the rank
    (one process in the file); else its rank is not known here."""
    processes = _parse_processes(text)
    name_rank = re.search(r"(\d+)(?:\.\w+)?$", os.path.basename(path))
    if len(processes) == 1 and processes[0][0] is None and name_rank:
        processes[0][0] = int(name_rank[1])
        processes[0].append("the stack file's name")
    return ", ".join(_add_process(evidence, *p) for p in processes)


def _add_process(evidence, rank, pid, threads, known_from="a RANK= line"):
    """File one process's stack: by rank, as a worker, or by pid alone;
    returns what it was, in words."""
    if rank is None:
        evidence.unranked.append((pid, threads))
        return f"process {pid} (rank unknown)" if pid else "an unknown rank"
    if _is_worker(threads):
        evidence.workers += 1
        return f"a DataLoader worker of rank {rank} (left out)"
    evidence.blocks.setdefault(rank, []).append((pid, threads, known_from))
    return f"rank {rank}"


def _parse_processes(text):
    """[[rank or None, pid or None, threads]], one per process, in the
    order written; processes without a Python frame left out."""
    processes = []
    for line in text.splitlines():
        if m := _RANK_HEAD.match(line.strip()):
            processes.append([int(m[1]), None, []])
        elif m := _PYSPY_PROCESS.match(line):
            if not processes or processes[-1][1] or processes[-1][2]:
                processes.append([None, None, []])
            processes[-1][1] = int(m[1])
        elif thread := _thread_name(line):
            if not processes:
                processes.append([None, None, []])
            processes[-1][2].append((thread, []))
        elif frame := _frame_of(line):
            _frame(processes, frame)
    return [p for p in processes if any(fr for _, fr in p[2])]


def _thread_name(line):
    """A thread's name, where `line` starts one (py-spy names it;
    faulthandler gives its id)."""
    if m := _PYSPY_THREAD.match(line):
        return m[1]
    if _FH_THREAD.match(line):
        return line.split(" (")[0]
    return None


def _frame_of(line):
    """(path, line, function), where `line` is a frame of either tool."""
    if m := _PYSPY_FRAME.match(line):
        return m[2], int(m[3]), m[1]
    if m := _FH_FRAME.match(line):
        return m[1], int(m[2]), m[3]
    return None


def _is_worker(threads):
    """A DataLoader worker: a process forked by a rank, with the rank's
    RANK and command line, running torch's worker loop."""
    return any(func == "_worker_loop" and "torch/utils/data" in path
               for _, frames in threads for path, _, func in frames)


def _choose_blocks(evidence):
    """One stack per rank. Several processes with one RANK (workers of
    some other kind): the one inside torch.distributed, if only one is;
    else none, and `unsure` says which processes claimed the rank."""
    for rank, blocks in evidence.blocks.items():
        if len(blocks) > 1:
            blocks = [b for b in blocks if any(
                path.startswith("torch/distributed/")
                for _, frames in b[1] for path, _, _ in frames)]
        if len(evidence.blocks[rank]) > 1:
            # Never silently: two jobs' stacks in one file, or a rank's
            # helper processes, both claim the rank.
            pids = [b[0] for b in evidence.blocks[rank]]
            evidence.notes.append(
                f"{len(pids)} stack blocks claim rank {rank} (pids "
                f"{', '.join(map(str, pids))}): "
                + (f"process {blocks[0][0]}'s is shown, the only one "
                   f"inside torch.distributed" if len(blocks) == 1 else
                   "none is shown")
                + ": the stacks may be of more than one job")
        if len(blocks) == 1:
            pid, evidence.stacks[rank], how = blocks[0]
            evidence.pids[rank] = pid
            evidence.rank_from[rank] = how
        else:
            evidence.unsure[rank] = [b[0] for b in evidence.blocks[rank]]


def _frame(processes, frame):
    if processes and processes[-1][2]:
        path, line, func = frame
        processes[-1][2][-1][1].append((short_path(path), line, func))


def _add_log(evidence, text):
    """torchrun's report: each failure's rank, exit code, pid and
    traceback line; the Root Cause block names the first. And the ranks'
    own lines, `[rank N] ...` (ddpdemo's scripts) or `[rankN]: ...`
    (torch's prefix)."""
    evidence.log = True
    for line in text.splitlines():
        if m := _SAID.match(line):
            evidence.said.setdefault(int(m[1]), []).append(m[2].strip())
    evidence.sigtermed |= {int(pid) for pid in re.findall(
        r"Sending process (\d+) closing signal SIGTERM", text)}
    if _ROOT not in text:
        return
    evidence.report = True
    failures, root = text.split(_ROOT)
    for part, is_root in ((failures.split("Failures:", 1)[-1], False),
                          (root, True)):
        for block in re.split(r"\n\[\d+\]:\n", "\n" + part):
            rank = re.search(r"rank\s*:\s*(\d+)", block)
            code = re.search(r"exitcode\s*:\s*(-?\d+) \(pid: (\d+)\)",
                             block)
            if not (rank and code):
                continue
            trace = re.search(r"traceback\s*:\s*(.*)", block)
            evidence.failures[int(rank[1])] = (
                int(code[1]), int(code[2]), trace[1].strip() if trace else "")
            if is_root and evidence.root is None:
                evidence.root = int(rank[1])
