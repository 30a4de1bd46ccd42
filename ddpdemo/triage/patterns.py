"""The hangs the book shows live, recognised in what a job left behind:
the patterns `python -m ddpdemo.explain` names (ddpdemo.triage.explain),
each with the book's section.

On a parting (ddpdemo.runtime.ledger.first_divergence's Finding for one
group) each pattern is tried, most specific first, and names itself only
where the ledger agrees with it: "a gradient all_reduce with no partner"
only where no other rank made a collective at that number; where they
made different ones, the ranks disagree, and no pattern of a missing
partner fits. Without a dump, the stacks alone name a pattern only
where its call site tells it apart (a barrier inside
torch_distributed_zero_first while the others wait in other
collectives). Each pattern returns a Named or None.
"""
import dataclasses
import importlib.util
import linecache
import os
import re
import sys

from ..runtime.errors import ranks_text

# Each pattern's section: (notebook, label); tests/test_explain.py checks
# every label is a `(label)=` target of that notebook.
SECTIONS = {
    "zero-first": ("evaluation", "val-deadlock"),
    "ddp-forward": ("evaluation", "ddp-validation-rank0"),
    "no-partner": ("when_ddp_hangs", "uneven-inputs"),
    "host-waits": ("all_reduce", "when-all-reduce-returns"),
    "rank-only-branch": ("evaluation", "silent-variant"),
    "dead-rank": ("job_failures", "rank-killed"),
    "static-rendezvous": ("job_failures", "rendezvous-timeout"),
    "rendezvous-timeout": ("job_failures", "rendezvous-timeout"),
    "port-in-use": ("job_failures", "port-in-use"),
    "client-timeout": ("job_failures", "rendezvous-timeout"),
}
_STDLIB = os.path.dirname(os.__file__)
# Where the host reads a result (a tensor's value, a stream, a handle).
_WAITS = re.compile(r"\.(item|cpu|tolist|wait|synchronize)\(|synchronize\(")


@dataclasses.dataclass
class Named:
    """A pattern the evidence shows: `name` (a key of SECTIONS), the
    ranks and processes (pids, for stacks with no rank) it is about, in
    words, and what about it the evidence cannot confirm."""
    name: str
    words: str
    ranks: tuple = ()
    pids: tuple = ()
    unconfirmed: tuple = ()


def is_own(path):
    """A frame of the job's own code: not torch, not the standard
    library (py-spy writes its paths relative: `re/_compiler.py`)."""
    top = path.replace("\\", "/").split("/")[0]
    return not (path.startswith(("torch/", "<")) or path.startswith(_STDLIB)
                or top.removesuffix(".py") in sys.stdlib_module_names)


def main_thread(threads):
    """The thread running the script: py-spy names it MainThread; in
    faulthandler's dump it is the one whose outermost frame is not
    threading's bootstrap."""
    for name, frames in threads:
        if name == "MainThread":
            return frames
    for _, frames in threads:
        if frames and frames[-1][2] not in ("_bootstrap", "_bootstrap_inner"):
            return frames
    return threads[0][1] if threads else []


def source(path, line):
    """The source line, where this machine has the file (py-spy's paths
    are relative to a folder on sys.path, or to where the top package
    is installed: an editable install is on no folder of sys.path)."""
    for folder in ["", *sys.path, _package_root(path)]:
        if folder is None:
            continue
        text = linecache.getline(os.path.join(folder, path), line).strip()
        if text:
            return text
    return ""


def _package_root(path):
    """The folder holding `path`'s top package, found without importing
    it, or None."""
    top = path.replace("\\", "/").split("/")[0]
    try:
        spec = importlib.util.find_spec(top) if top.isidentifier() else None
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.dirname(next(iter(spec.submodule_search_locations)))


def calls(frames, func, path_end=""):
    # py-spy names methods with their class (`Tensor.backward`).
    return any(fn.split(".")[-1] == func
               and p.replace("\\", "/").endswith(path_end)
               for p, _, fn in frames)


def _frames(ev, rank, group, seq):
    """What shows where `rank` called collective `seq` of `group`: its
    stack (main thread) and the dump's call site of that entry."""
    out = list(main_thread(ev.stacks.get(rank, [])))
    for e in ev.dumps.get(rank, {}).get("entries", []):
        if (e["process_group"][0] == group
                and e["collective_seq_id"] == seq):
            out += [(f["filename"], f["line"], f["name"])
                    for f in e.get("frames") or []]
    return out


def _others(found, side):
    """The ranks of the parting not on `side`."""
    ranks = set(found.ranks)
    for called in found.ops:
        ranks |= set(called.ranks)
    return ranks - set(side.ranks)


def running(ev, ranks):
    """Those of `ranks` whose stack stands in the job's own code: not in
    a collective, not finished. A rank that never called a collective
    may only be slower there (computing, loading data), so a pattern of
    a missing partner is not named on it."""
    out = []
    for r in ranks:
        stack = main_thread(ev.stacks.get(r, []))
        if stack and is_own(stack[0][0]):
            out.append(r)
    return out


def _unseen(ev, ranks):
    """Those of `ranks` with no stack: whether they had left, or were
    only slower, nothing shows."""
    return [r for r in ranks if not main_thread(ev.stacks.get(r, []))]


def _left_or_slow(ev, found):
    """What a pattern of a missing partner cannot confirm: None where a
    rank that never called it is still running its own code (no such
    pattern then), else the caveats (ranks with no stack)."""
    if found.kind != "missing":
        return ()
    if running(ev, found.ranks):
        return None
    unseen = _unseen(ev, found.ranks)
    if not unseen:
        return ()
    return (f"whether {ranks_text(unseen)} had left the loop or were "
            f"only slower to reach collective #{found.seq}: no stack of "
            f"{ranks_text(unseen)}",)


# -- on a parting: (ev, group, Finding, side) -> Named or None -------------

def zero_first(ev, group, found, side):
    # A barrier the others never reach, unless they still run their own
    # code (rank 0 may only be early: slow-first on stacks alone).
    if _left_or_slow(ev, found) is None:
        return None
    caveats = ()
    if side.op == "barrier" and all(
            calls(_frames(ev, r, group, found.seq),
                  "torch_distributed_zero_first") for r in side.ranks):
        if found.kind == "disagree":
            # The others made another collective at this number: either
            # they never enter the barrier, or they made one collective
            # more before it (one more batch), as rank-only-branch says.
            others = [c for c in found.ops if c is not side]
            caveats = ("which side's collective is the extra one: the "
                       "ledgers show only that they differ ("
                       + ", ".join(f"{c.text} on {ranks_text(c.ranks)}"
                                   for c in others)
                       + " at this number may be one collective more "
                       "before the same barrier)",)
            return Named("zero-first", f"a barrier inside "
                         f"torch_distributed_zero_first on "
                         f"{ranks_text(side.ranks)}, where the others "
                         f"made another collective: the val_dataloader "
                         f"deadlock if they never enter it",
                         side.ranks, unconfirmed=caveats)
        return Named("zero-first", f"a barrier inside "
                     f"torch_distributed_zero_first on "
                     f"{ranks_text(side.ranks)} alone, which the other "
                     f"ranks never enter (the val_dataloader deadlock)",
                     side.ranks, unconfirmed=caveats)
    return None


def ddp_forward(ev, group, found, side):
    """Only where the others went elsewhere: another collective at that
    number, or (missing) none while not running their own code: DDP's
    training forward broadcasts too, and a partner only slower is no
    evidence of a validation on some ranks."""
    caveats = _left_or_slow(ev, found)
    if caveats is None:
        return None
    if side.op == "broadcast" and all(
            calls(_frames(ev, r, group, found.seq), "forward",
                  "torch/nn/parallel/distributed.py") for r in side.ranks):
        return Named("ddp-forward", f"DDP's buffer broadcast in a forward "
                     f"on {ranks_text(side.ranks)} alone (validating "
                     f"through the DDP wrapper on some ranks only)",
                     side.ranks, unconfirmed=caveats)
    return None


def no_partner(ev, group, found, side):
    """Only where no other rank made a collective at that number, and
    none of them is still running its own code (only slower)."""
    caveats = _left_or_slow(ev, found)
    if caveats is None:
        return None
    if found.kind == "missing" and side.op == "all_reduce" and all(
            calls(_frames(ev, r, group, found.seq), "backward")
            for r in side.ranks):
        return Named("no-partner", f"a gradient all_reduce in backward on "
                     f"{ranks_text(side.ranks)} with no partner: the other "
                     f"ranks made no collective at this number (one more "
                     f"batch on {ranks_text(side.ranks)})", side.ranks,
                     unconfirmed=caveats)
    return None


def host_waits(ev, group, found, side):
    if found.kind != "missing":
        return None
    for r in side.ranks:
        stack = main_thread(ev.stacks.get(r, []))
        if not stack or not is_own(stack[0][0]):
            continue
        line = source(stack[0][0], stack[0][1]).split("#")[0].strip()
        if _WAITS.search(line):
            return Named("host-waits", f"rank {r}'s host waits for the "
                         f"result of collective #{found.seq} at "
                         f"{stack[0][0]}:{stack[0][1]} (`{line}`), which "
                         f"the other ranks never called", (r,))
    return None


def rank_only_branch(ev, group, found, side):
    """The ranks made different collectives at one number. Which side's
    is the extra one the ledgers cannot say: where one side is a
    gradient all_reduce in backward, that side may have had one more
    batch (uneven inputs) instead."""
    if found.kind != "disagree":
        return None
    parts = ", ".join(f"{c.text} on {ranks_text(c.ranks)}"
                      for c in found.ops)
    unconfirmed = ["which side's collective is the extra one: the ledgers "
                   "show only that they differ"]
    for c in found.ops:
        if c.op == "all_reduce" and all(
                calls(_frames(ev, r, group, found.seq), "backward")
                for r in c.ranks):
            unconfirmed.append(
                f"whether {ranks_text(c.ranks)} ran a collective the "
                f"others skipped, or had one more batch on "
                f"{ranks_text(c.ranks)} (its gradient all_reduce met the "
                f"others' next collective: chapter 8's uneven inputs)")
    return Named("rank-only-branch", f"the ranks disagree at this "
                 f"number ({parts}): some ranks run a collective that the "
                 f"others do not, as in code only they run (such as `if "
                 f"rank == 0:`); where the two had matched, nothing would "
                 f"hang and the pairing would be silently wrong",
                 tuple(sorted(r for c in found.ops for r in c.ranks)),
                 unconfirmed=tuple(unconfirmed))


ON_A_PARTING = (zero_first, ddp_forward, no_partner, host_waits,
                rank_only_branch)


def on_a_parting(ev, group, found):
    """The first pattern, most specific first, that one side of the
    parting shows, or None. A parting with one side and nobody left out
    is no parting."""
    if len(found.ops) + len(found.ranks) < 2:
        return None
    for test in ON_A_PARTING:
        for side in found.ops:
            if not _others(found, side):
                continue
            named = test(ev, group, found, side)
            if named:
                return named
    return None


# -- on stacks alone --------------------------------------------------------

def _waiting_in(frames):
    """The torch.distributed function a stack waits in, or "backward"
    for one in autograd's backward (on gloo, where DDP's gradient
    all_reduce waits), or None."""
    if frames and frames[0][0].startswith("torch/distributed/"):
        return frames[0][2].split(".")[-1]
    if frames and frames[0][0].startswith("torch/autograd/") and calls(
            frames, "backward"):
        return "backward"
    return None


def on_stacks(processes):
    """A pattern the stacks alone show, or None: processes [(rank or
    None, pid, frames)]. A barrier inside torch_distributed_zero_first
    in some processes, while every other waits in another collective:
    the barrier is one only they reach. (Where the others are not in a
    collective, the first process may only be early: rank 0 still
    builds the data the others wait for.)"""
    inside = [p for p in processes if _waiting_in(p[2]) == "barrier"
              and calls(p[2], "torch_distributed_zero_first")]
    rest = [p for p in processes if p not in inside]
    if not inside or not rest or not all(
            _waiting_in(p[2]) and not calls(
                p[2], "torch_distributed_zero_first") for p in rest):
        return None
    who = ", ".join(_process_text(p) for p in inside)
    # Which rank an unranked process is, explain's "rank-unknown" says.
    unconfirmed = ["that the ranks part at this barrier: only a Flight "
                   "Recorder dump shows it"]
    return Named("zero-first", f"a barrier inside "
                 f"torch_distributed_zero_first on {who}, while "
                 + ", ".join(f"{_process_text(p)} waits in "
                             f"{_waiting_in(p[2])}" for p in rest)
                 + ": a barrier that only it reaches (the val_dataloader "
                 "deadlock: there rank 0 is the one in the barrier)",
                 tuple(p[0] for p in inside if p[0] is not None),
                 tuple(p[1] for p in inside if p[1] is not None),
                 tuple(unconfirmed))


def _process_text(p):
    rank, pid, _ = p
    return f"rank {rank}" if rank is not None else process_text(pid)


def process_text(pid, rank_unknown=True):
    """`process 1234 (rank unknown)`; faulthandler's dumps give no pid."""
    if pid is None:
        return "a process of unknown pid" + (" and rank" if rank_unknown
                                             else "")
    return f"process {pid}" + (" (rank unknown)" if rank_unknown else "")
