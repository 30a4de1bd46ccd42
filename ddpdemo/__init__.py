"""ddpdemo: torch.distributed taught live, one ipyparallel engine per rank.

The package behind the book; each module says which chapter uses it.
"""
from .cluster import Cluster
from .engine import current_device
from .errors import HangError, RankError

__all__ = ["Cluster", "HangError", "RankError", "current_device"]
__version__ = "0.1.0"
