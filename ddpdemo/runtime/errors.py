"""The two ways a distributed run goes wrong, as exceptions a notebook can
catch: some ranks never finish (HangError), or some ranks fail (RankError).

Introduced in chapter 0; the deadlock chapters read their messages.
"""
import dataclasses
import linecache
import os
import re
import signal

from . import engine

# Frames below the reader's code that every stack dump shares; showing
# them would bury the one line that matters. Found by reference: the
# entry points' own code objects name their file, so moving engine.py
# cannot silently turn every hang report into "had not started".
_ENTRY_NAMES = {fn.__code__.co_name
                for fn in (engine.call, engine.run_source)}


def package_root():
    """The directory that holds the ddpdemo package (a checkout's root):
    the one place that finds it, for the hang report's paths, the
    engines' PYTHONPATH (processes) and the benchmark's notebooks."""
    # As many levels up as this module's dotted name has parts, so moving
    # this file within the package cannot shift the root.
    root = os.path.abspath(__file__)
    for _ in __name__.split("."):
        root = os.path.dirname(root)
    return root


def package_path(path):
    """`ddpdemo/runtime/engine.py`: a file's path from the folder that
    holds the package, with forward slashes; the same on every host (a
    rank on another host has this virtualenv at the same or another
    prefix), so a frame is matched by this suffix."""
    return os.path.relpath(os.path.abspath(path),
                           package_root()).replace(os.sep, "/")


def signal_name(signum):
    """`SIGKILL` for 9: the one way ddpdemo names a signal (the hang
    report, processes.describe_exit, the torchrun scripts). Numbers that
    `signal.Signals` lacks (the real-time signals, 34-64 on Linux) are
    named from SIGRTMIN/SIGRTMAX, and anything else as `signal N`, so a
    rank killed by any signal can be described instead of raising."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        pass
    low = getattr(signal, "SIGRTMIN", None)
    high = getattr(signal, "SIGRTMAX", None)
    if low is not None and low <= signum <= high:
        return (f"SIGRTMIN+{signum - low}" if signum - low <= high - signum
                else f"SIGRTMAX-{high - signum}")
    return f"signal {signum}"


def in_module(path, module):
    """Whether a frame's file (as a rank wrote it) is `module`'s file."""
    return path.replace("\\", "/").endswith(
        "/" + package_path(module.__file__))


# One frame of a faulthandler dump (or a traceback): file, line, function;
# the triage commands read a reader's dumps with this same pattern.
FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) '
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
            match = FRAME.match(text)
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


@dataclasses.dataclass(frozen=True)
class Failure:
    """What went wrong on one rank, as data: the exception's type name,
    its message and the traceback's text as the rank formatted it. type
    None: no exception behind it (a process that died, `message` says
    how), and no traceback. RankError keeps one per rank."""
    type: str | None
    message: str
    traceback: str = ""

    @property
    def line(self):
        """`ValueError: message` (its first line, 300 characters at most):
        how RankError's message names it."""
        if self.type is None:
            return self.message
        first = self.message.strip().splitlines()
        return f"{self.type}: {first[0] if first else ''}"[:300]

    def __str__(self):
        return self.line


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
        self.ledger = ledger    # flight hook: a ddpdemo.runtime.ledger.Ledger
        self.ledger_error = ledger_error    # why there is none, if it failed
        self.restarts = restarts    # False: engines we did not start
        self.ranks = sorted(ranks)
        self.timeout = timeout
        self.world_size = world_size
        self.stacks = stacks or {}
        super().__init__(self._message())

    def _head(self):
        """The message's first line, from the ranks and the timeout."""
        finished = [r for r in range(self.world_size) if r not in self.ranks]
        return (f"{len(self.ranks)} of {self.world_size} ranks did not "
                f"finish within {self.timeout:g} s: "
                f"{ranks_text(self.ranks)} (finished: "
                f"{ranks_text(finished) if finished else 'none'}).")

    def _message(self):
        parts = [self._head()]
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
        lines = [self._head()]
        for rank in self.ranks:
            lines.append(f"rank {rank} is blocked in:")
            for path, _, func in self.stacks.get(rank) or []:
                lines.append(f"    {func}()  "
                             f"({os.path.basename(short_path(path))})")
        return "\n".join(lines)


class RankError(RuntimeError):
    """Some ranks raised, or their processes died.

    `.failures` maps rank to its Failure (the exception's type, message
    and traceback text); `.errors` maps rank to the Failure's one line,
    which the message shows; `.blocked` lists ranks that were still
    running, typically waiting for a failed peer. `errors` given as text
    (a line with no exception behind it) becomes Failure(None, text).
    `.ledger` and `.ledger_error` as for HangError.
    """

    def __init__(self, errors, blocked=(), ledger=None, ledger_error=None):
        self.ledger = ledger    # flight hook: a ddpdemo.runtime.ledger.Ledger
        self.ledger_error = ledger_error    # why there is none, if it failed
        self.failures = {
            r: f if isinstance(f, Failure) else Failure(None, str(f))
            for r, f in sorted(errors.items())}
        self.errors = {r: f.line for r, f in self.failures.items()}
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
