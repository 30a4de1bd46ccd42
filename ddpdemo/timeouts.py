"""How long torch lets a stuck collective wait by default, read from the
installed torch and checked against its source (chapters 1 and 2).

    timeouts = default_timeouts()      # prints the values and the lines
    timeouts["gloo"]                   # timedelta(minutes=30)

gloo and every other backend but NCCL default to 30 minutes; NCCL to 10.
A CPU-only wheel has no NCCL, so torch's own `default_pg_nccl_timeout` is
None there; NCCL's 10 minutes are then shown from the C++ header the
wheel ships. A torch that changes any of this fails here, and so the
chapters that print it fail strict nbval instead of telling a stale story.
"""
from datetime import timedelta

from .quote import cite, find

GLOO_DEFAULT = timedelta(minutes=30)   # and every backend but NCCL
NCCL_DEFAULT = timedelta(minutes=10)
C10D = "torch/include/torch/csrc/distributed/c10d/"


def default_timeouts(show=True):
    """{"gloo": timedelta, "nccl": timedelta or None}: torch's
    default_pg_timeout and default_pg_nccl_timeout in this build, checked
    (AssertionError) against the values above and, through ddpdemo.cite,
    against the installed source that picks them (LookupError if a line
    is gone). show=True prints both values and the cited lines."""
    from torch.distributed.constants import (default_pg_nccl_timeout,
                                             default_pg_timeout)
    assert default_pg_timeout == GLOO_DEFAULT, default_pg_timeout
    assert default_pg_nccl_timeout in (None, NCCL_DEFAULT), \
        default_pg_nccl_timeout
    if show:
        print("default_pg_timeout (gloo and every backend but NCCL):",
              default_pg_timeout)
        print("default_pg_nccl_timeout (NCCL):", default_pg_nccl_timeout
              or "None (this build has no NCCL)")
    check = cite if show else find
    check("torch/distributed/distributed_c10d.py",
          "def _get_default_timeout(backend", "if backend == Backend.NCCL:",
          "return default_pg_nccl_timeout", "return default_pg_timeout")
    check(C10D + "Backend.hpp", "kBackendDefaultTimeout =",
          "std::chrono::milliseconds(30 * 60 * 1000)")
    check(C10D + "ProcessGroupNCCL.hpp", "kProcessGroupNCCLDefaultTimeout =",
          "std::chrono::milliseconds(10 * 60 * 1000)")
    return {"gloo": default_pg_timeout, "nccl": default_pg_nccl_timeout}
