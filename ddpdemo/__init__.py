"""ddpdemo: torch.distributed taught live, one ipyparallel engine per rank.

The package behind the book. At this level, the modules the chapters and
their readers import (ring, mosaic, ledger, flight, quote, figures,
launch, bandwidth, ...); each says which chapter uses it. Below it, two
subpackages nobody reads to learn torch.distributed:

    ddpdemo.runtime   what makes Cluster work (engines, groups, hangs,
                      and the hang report: errors, ledger, flight)
    ddpdemo.book      the book's build and translation tooling (the
                      `book` extra: pip install ddpdemo[book])

ddpdemo.errors, .ledger, .flight and .devices are the chapters' names for
the runtime's modules of those names (the same module objects).

Importing this package loads nothing else: every rank, the guard and the
fork server import it on the way to ddpdemo.runtime, and the guard
promises the standard library only. The names below load on first use.
"""

__all__ = ["Cluster", "HangError", "RankError", "cite", "current_device",
           "default_timeouts", "show_source", "torchrun"]
__version__ = "0.1.0"


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
    return sorted(set(globals()) | set(__all__))
