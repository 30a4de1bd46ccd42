"""Quoting the installed torch: what the book cannot run here (NCCL, GPUs,
a behaviour it only describes) is backed by a line of the installed
source, found again at every run, so a torch upgrade that changes the
behaviour fails strict nbval instead of leaving a stale sentence behind.

    cite("torch/distributed/run.py", "def _get_free_port")

prints `torch/distributed/run.py:1012: def _get_free_port(...)` and raises
LookupError if no line of that file holds the text any more. Used from
chapter 1 on; `show_source` prints a function's installed source.

What a citation checks, and what it cannot: that the quoted text is still
in the installed torch, not that the sentence it backs is right. So the
sentence travels with it (`claim=`), printed above the quoted lines, and
a reader and a reviewer read the two together:

    cite("torch/distributed/distributed_c10d.py", "...",
         claim="NCCL's barrier blocks the host")
"""
import importlib.util
import inspect
import os
import re

# site-packages (or wherever torch is installed): paths are quoted relative
# to it, `torch/...`, so stored output holds no machine's directory. Found
# without importing torch: every process that imports ddpdemo (the
# controller's guard too) would otherwise pay ~1.7 s of CPU for it.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(
    importlib.util.find_spec("torch").origin)))


def _torch_version():
    import torch
    return torch.__version__


def _squash(text):
    return " ".join(text.split())


def find(path, *texts):
    """(line number, line) of each text in the installed file `path`, each
    searched after the previous one's line; whitespace runs compare equal.
    Raises LookupError naming the text and file when one is missing."""
    full = os.path.join(_ROOT, path)
    try:
        with open(full, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise LookupError(f"{path} is not part of the installed torch "
                          f"{_torch_version()}") from None
    found, start = [], 0
    for text in texts:
        want = _squash(text)
        for number in range(start, len(lines)):
            if want in _squash(lines[number]):
                found.append((number + 1, lines[number].strip()))
                start = number + 1
                break
        else:
            raise LookupError(
                f"{text!r} is no longer in {path} (torch "
                f"{_torch_version()}): the claim this citation backs "
                f"must be checked again")
    return found


def cite(path, *texts, claim=None):
    """Print `path:line: source` for each text (see `find`), under the
    claim they back (`claim: ...`) when one is given; returns the line
    numbers. The citation is the claim's evidence: it fails loudly when
    the installed torch no longer says it; whether the quoted lines say
    what the claim says is for the reader to check, side by side."""
    found = find(path, *texts)
    if claim:
        print(f"claim: {claim}")
    for number, line in found:
        print(f"{path}:{number}: {line}")
    return [number for number, _ in found]


def show_source(fn, start=None, end=None, docstring=False):
    """Print the installed source of `fn`, without its docstring unless
    asked, from the first line containing `start` to the first line after
    it containing `end` (both optional, both included). Slicing by text,
    not by line numbers, so a changed function fails instead of printing
    the wrong lines. Returns the printed text."""
    source = inspect.getsource(fn)
    if not docstring:
        source = re.sub(r'\n(\s*)[rbu]?("""|\'\'\')[\s\S]*?\2[ \t]*(?=\n)',
                        "", source, count=1)
    lines = inspect.cleandoc("\n" + source).splitlines() \
        if source.startswith((" ", "\t")) else source.splitlines()
    first = _index(lines, start, 0, fn) if start else 0
    last = _index(lines, end, first, fn) if end else len(lines) - 1
    text = "\n".join(lines[first:last + 1])
    print(text)
    return text


def _index(lines, text, begin, fn):
    for i in range(begin, len(lines)):
        if text in lines[i]:
            return i
    raise LookupError(f"{text!r} is not in the source of "
                      f"{getattr(fn, '__qualname__', fn)}")
