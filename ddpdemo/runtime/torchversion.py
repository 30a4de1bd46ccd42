"""The oldest torch ddpdemo works on, checked when the runtime is first
imported (by a Cluster, a rank, `ddpdemo.launch`, a hang report): on an
older torch, one line that names both versions (ImportError), instead of
an AttributeError or a missing module deep inside a rank. Chapter 0
("Set up"); pyproject.toml asks for the same floor (a test checks).

The floor, 2.12, is where the last of what ddpdemo uses came into torch
(read in each release's source, then run: tests/test_torchversion.py):
- `torch._C._distributed_c10d._dump_fr_trace`, which reads a rank's
  Flight Recorder (ddpdemo.flight, ddpdemo.launch): 2.8;
- `torch.distributed.flight_recorder` (its dump loader, which
  ddpdemo.jobfiles reads dumps with, and its analyzer `fr_trace`):
  2.10; before, a script outside the wheel;
- that analyzer reading gloo's dumps (`flight.analyze`): 2.12; 2.10 and
  2.11 assert that a dump is NCCL's;
- `dist.barrier(timeout=...)`, which chapter 3 calls: 2.12.

Standard library only, and torch is not imported: its version is read
from the installed torch's own `torch/version.py` (what torch.__version__
is made from), which costs a rank, the guard and the fork server next to
nothing (importlib.metadata would take 0.15 s each).
"""
import importlib.util
import os
import re
import sys

FLOOR = (2, 12)
_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.M)


def installed():
    """The installed torch's version string ('2.13.0+cpu'), or None where
    torch is not installed or its version cannot be read."""
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "__version__"):
        return str(torch.__version__)
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(spec.submodule_search_locations[0], "version.py")
    try:
        with open(path, encoding="utf-8") as f:
            match = _VERSION.search(f.read())
    except OSError:
        return None
    return match.group(1) if match else None


def release(version):
    """(major, minor) of a version string: (2, 11) for '2.11.0+cu128',
    None if it does not start with two numbers."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else None


def check(version=None):
    """Raise ImportError if torch (`version`, default: the installed one)
    is older than FLOOR. A torch that is missing or whose version cannot
    be read is left to `import torch` to report."""
    version = installed() if version is None else version
    found = release(version) if version else None
    if found is not None and found < FLOOR:
        floor = ".".join(map(str, FLOOR))
        raise ImportError(f"ddpdemo needs torch>={floor}, but torch "
                          f"{version} is installed: pip install "
                          f"'torch>={floor}'")
