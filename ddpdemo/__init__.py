"""ddpdemo: torch.distributed taught live, one ipyparallel engine per rank.

The package behind the book. At this level, the modules the chapters and
their readers import (ring, mosaic, ledger, flight, quote, figures,
launch, bench, ...); each says which chapter uses it. Below it, two
subpackages nobody reads to learn torch.distributed:

    ddpdemo.runtime   what makes Cluster work (engines, groups, hangs)
    ddpdemo.book      the book's build and translation tooling (the
                      `book` extra: pip install ddpdemo[book])
"""
from .devices import current_device
from .errors import HangError, RankError
from .quote import cite, show_source
from .scripts import torchrun
from .timeouts import default_timeouts

__all__ = ["Cluster", "HangError", "RankError", "cite", "current_device",
           "default_timeouts", "show_source", "torchrun"]
__version__ = "0.1.0"


def __getattr__(name):
    # Cluster brings in ipyparallel, IPython and zmq (~0.5 s of CPU); every
    # rank of a torchrun script imports ddpdemo.launch, which needs none of
    # them, so the runtime's cluster module loads on first use of
    # ddpdemo.Cluster.
    if name == "Cluster":
        from .runtime.cluster import Cluster
        return Cluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    # Cluster too, though it is not loaded until asked for.
    return sorted(set(globals()) | set(__all__))
