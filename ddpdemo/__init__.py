"""ddpdemo: torch.distributed taught live, one ipyparallel engine per rank.

The package behind the book; each module says which chapter uses it.
"""
from .cluster import Cluster
from .devices import current_device
from .errors import HangError, RankError
from .quote import cite, show_source
from .scripts import torchrun

__all__ = ["Cluster", "HangError", "RankError", "cite", "current_device",
           "show_source", "torchrun"]
__version__ = "0.1.0"
