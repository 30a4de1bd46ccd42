"""The two ways a distributed run goes wrong, as exceptions a notebook can
catch: some ranks never finish (HangError), or some ranks fail (RankError).

Introduced in chapter 0; the deadlock chapters read their messages.
"""
import linecache
import os
import re

from . import engine

# Frames below the reader's code that every stack dump shares; showing
# them would bury the one line that matters. Found by reference: the
# entry points' own code objects name their file, so moving engine.py
# cannot silently turn every hang report into "had not started".
_ENTRY_NAMES = {fn.__code__.co_name
                for fn in (engine.call, engine.run_source)}


def package_path(path):
    """`ddpdemo/runtime/engine.py`: a file's path from the folder that
    holds the package, with forward slashes; the same on every host (a
    rank on another host has this virtualenv at the same or another
    prefix), so a frame is matched by this suffix."""
    # The folder above the package: as many levels up as this module's
    # dotted name has parts, so moving this file cannot shift the root.
    root = os.path.abspath(__file__)
    for _ in __name__.split("."):
        root = os.path.dirname(root)
    return os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")


def in_module(path, module):
    """Whether a frame's file (as a rank wrote it) is `module`'s file."""
    return path.replace("\\", "/").endswith(
        "/" + package_path(module.__file__))
_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) '
                    r'in (?P<func>\S+)')
_SITE = re.compile(r".*[/\\](?:site|dist)-packages[/\\]")
_CELL = re.compile(r".*[/\\]ipykernel_\d+[/\\]\d+\.py$")


def short_path(path):
    """Shorten a path to what a reader recognises: `torch/...` for
    installed packages, `<notebook cell>` for a cell (its temporary file
    name holds the kernel's pid, and `In [n]` differs between a reader's
    run and nbval's, so neither may appear in stored output)."""
    if _CELL.match(path):
        return "<notebook cell>"
    if path.startswith("<ranks "):
        return "<%%ranks cell>"
    shortened = _SITE.sub("", path)
    if shortened != path:
        return shortened
    match = re.search(r"[/\\](ddpdemo[/\\].*)$", path)
    return match.group(1) if match else path


def parse_stack(dump):
    """From a faulthandler dump, the frames of the thread running the
    reader's code, outermost first, as (path, line, function) tuples.

    faulthandler lists threads one block at a time, most recent call
    first; the thread we want is the one passing through an entry point
    of ddpdemo.runtime.engine.
    """
    for block in dump.split("\n\n"):
        frames = []
        for text in block.splitlines():
            match = _FRAME.match(text)
            if match:
                frames.append((match["file"], int(match["line"]),
                               match["func"]))
        for i, (path, _, func) in enumerate(frames):
            if func in _ENTRY_NAMES and in_module(path, engine):
                return list(reversed(frames[:i]))
    return []


def format_stack(frames, indent="    "):
    """Render frames like a Python traceback, with the source line where
    this process can read it (cells are in IPython's line cache)."""
    lines = []
    for path, line, func in frames:
        lines.append(f'{indent}File "{short_path(path)}", line {line}, '
                     f'in {func}')
        source = linecache.getline(path, line).strip()
        if source:
            lines.append(f"{indent}    {source}")
    return "\n".join(lines)


class HangError(TimeoutError):
    """Some ranks did not finish within the timeout.

    `.ranks` is the sorted list of ranks still blocked; `.stacks` maps each
    of them to its frames (outermost first) where a dump could be taken.
    `.ledger` is the Flight Recorder ledger, or None; where building it
    failed, `.ledger_error` says why (`"KeyError: 'entries'"`), and so
    does the message.
    """

    def __init__(self, ranks, timeout, world_size, stacks=None, ledger=None,
                 restarts=True, ledger_error=None):
        self.ledger = ledger    # flight hook: a ddpdemo.ledger.Ledger
        self.ledger_error = ledger_error    # why there is none, if it failed
        self.restarts = restarts    # False: engines we did not start
        self.ranks = sorted(ranks)
        self.timeout = timeout
        self.world_size = world_size
        self.stacks = stacks or {}
        super().__init__(self._message())

    def _message(self):
        finished = [r for r in range(self.world_size) if r not in self.ranks]
        head = (f"{len(self.ranks)} of {self.world_size} ranks did not finish "
                f"within {self.timeout:g} s: {ranks_text(self.ranks)} "
                f"(finished: {ranks_text(finished) if finished else 'none'}).")
        parts = [head]
        for rank in self.ranks:
            frames = self.stacks.get(rank)
            if frames:
                where = frames[-1]
                parts.append(f"rank {rank} is blocked in {where[2]}(), "
                             f"called from:")
                parts.append(format_stack(frames))
            elif frames == []:   # dumped, but not inside this run's code
                parts.append(f"rank {rank} had not started this code yet "
                             f"(its engine was still busy)")
            else:
                parts.append(f"rank {rank}: no stack available")
        if self.ledger is not None:                      # flight hook
            parts.append(str(self.ledger))
        if self.ledger_error is not None:
            parts.append(no_ledger(self.ledger_error))
        if self.restarts:
            parts.append("The cluster restarts its engines and forms a new "
                         "group before the next run (variables on the ranks "
                         "are lost).")
        else:
            parts.append("This cluster cannot restart engines it did not "
                         "start (profile=...): restart the ipyparallel "
                         "cluster, then create a new Cluster.")
        return "\n".join(parts)

    def summary(self):
        """The first line of the message and, per stuck rank, the chain of
        calls it is blocked in, one function a line (file names only): the
        short form chapters 4, 5 and 8 print."""
        lines = [str(self).splitlines()[0]]
        for rank in self.ranks:
            lines.append(f"rank {rank} is blocked in:")
            for path, _, func in self.stacks.get(rank) or []:
                lines.append(f"    {func}()  "
                             f"({os.path.basename(short_path(path))})")
        return "\n".join(lines)


class RankError(RuntimeError):
    """Some ranks raised, or their processes died.

    `.errors` maps rank to a one-line description; `.blocked` lists ranks
    that were still running, typically waiting for a failed peer.
    `.ledger` and `.ledger_error` as for HangError.
    """

    def __init__(self, errors, blocked=(), ledger=None, ledger_error=None):
        self.ledger = ledger    # flight hook: a ddpdemo.ledger.Ledger
        self.ledger_error = ledger_error    # why there is none, if it failed
        self.errors = dict(sorted(errors.items()))
        self.blocked = sorted(blocked)
        lines = [f"{len(self.errors)} rank(s) failed:"]
        lines += [f"  rank {r}: {text}" for r, text in self.errors.items()]
        if self.blocked:
            lines.append(f"  still running, probably waiting for them: "
                         f"{ranks_text(self.blocked)} "
                         f"(the cluster restarts them)")
        if ledger is not None and ledger.diverged:           # flight hook
            lines.append(str(ledger))   # a plain exception: no table
        if ledger_error is not None:
            lines.append(no_ledger(ledger_error))
        super().__init__("\n".join(lines))


def no_ledger(reason):
    """The line a report has in place of its ledger when building it
    failed (ddpdemo.runtime.outcome): say so, and why, rather than leave
    the reader to wonder where the ledger went."""
    return (f"No ledger: the ranks' Flight Recorder ledger could not be "
            f"built ({reason}).")


def ranks_text(ranks):
    """`rank 1` or `ranks [0, 2]`: how every message names ranks."""
    ranks = sorted(ranks)
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranks}"
