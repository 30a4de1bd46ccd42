"""ddpdemo: torch.distributed taught live, one ipyparallel engine per rank.

The package behind the book. At this level, the modules the chapters and
their readers import (ring, data, quote, figures, launch, bandwidth,
...); each says which chapter uses it. Below it, subpackages nobody
reads to learn torch.distributed, each a dependency boundary whose
docstring says what it may import:

    ddpdemo.runtime   what makes Cluster work (engines, groups, hangs,
                      and the hang report: errors, ledger, flight)
    ddpdemo.triage    the commands that read a reader's own job
                      (explain; `python -m ddpdemo.explain`)
    ddpdemo.book      the book's build and translation tooling, and the
                      benchmark (the `book` extra: pip install
                      ddpdemo[book])
    ddpdemo.examples  the chapters' torchrun scripts

`from ddpdemo import ledger` (and errors, flight, devices) gives the
runtime's module of that name, where the code lives
(ddpdemo.runtime.ledger); `from ddpdemo import jobfiles` gives
ddpdemo.triage.jobfiles.

Importing this package loads nothing else: every rank, the guard and the
fork server import it on the way to ddpdemo.runtime, and the guard
promises the standard library only. The names below load on first use.
"""

__all__ = ["Cluster", "HangError", "RankError", "cite", "current_device",
           "default_timeouts", "show_source", "torchrun"]
__version__ = "0.1.0"
# Modules of ddpdemo.runtime that the chapters import by a short name.
RUNTIME_MODULES = ("errors", "ledger", "flight", "devices")


def __getattr__(name):
    # Each name from the module it lives in, imported on first use: Cluster
    # alone brings in ipyparallel, IPython and zmq (~0.5 s of CPU), which
    # a torchrun rank importing ddpdemo.launch never needs.
    if name == "Cluster":
        from .runtime.cluster import Cluster
        return Cluster
    if name in ("HangError", "RankError"):
        from .runtime import errors
        return getattr(errors, name)
    if name == "current_device":
        from .runtime.devices import current_device
        return current_device
    if name in ("cite", "show_source"):
        from . import quote
        return getattr(quote, name)
    if name == "torchrun":
        from .scripts import torchrun
        return torchrun
    if name in RUNTIME_MODULES:
        # The hang report's modules live with the runtime, which a hang
        # report needs; chapter 10 reads them by these short names.
        from .runtime import devices, errors, flight, ledger
        return {"errors": errors, "ledger": ledger, "flight": flight,
                "devices": devices}[name]
    if name == "jobfiles":
        # Chapter 5 reads a dump with it; it lives with the commands
        # that read a reader's job (ddpdemo.triage).
        from .triage import jobfiles
        return jobfiles
    if name == "default_timeouts":
        from .timeouts import default_timeouts
        return default_timeouts
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    # The lazy names too, though none is loaded until asked for.
    return sorted(set(globals()) | set(__all__) | set(RUNTIME_MODULES)
                  | {"jobfiles"})
