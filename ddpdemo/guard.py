"""Start an ipyparallel process that ends itself if its notebook dies.

    python -m ddpdemo.guard PARENT_PID ipyparallel.engine [ARGS...]

Used by `Cluster` for the controller and every engine: a kernel killed
with SIGKILL runs no clean-up, and its engines must not outlive it.
"""
import runpy
import sys

from .engine import guard_parent


def main():
    parent, module = int(sys.argv[1]), sys.argv[2]
    guard_parent(parent)
    sys.argv = [module] + sys.argv[3:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
