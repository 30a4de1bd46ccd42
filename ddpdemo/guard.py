"""Start an ipyparallel process that ends itself if its notebook dies.

    python -m ddpdemo.guard PARENT_PID [--remove DIR] MODULE [ARGS...]

Used by `Cluster` for the controller and every engine: a kernel killed
with SIGKILL runs no clean-up, and its engines must not outlive it. The
controller's guard also removes the cluster's temporary directory.
"""
import runpy
import sys

from .engine import guard_parent


def main():
    args = sys.argv[1:]
    parent = int(args.pop(0))
    remove = args.pop(1) if args[0] == "--remove" else None
    if remove:
        args.pop(0)
    module = args.pop(0)
    guard_parent(parent, remove)
    sys.argv = [module] + args
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
