"""Start an ipyparallel process that ends itself if its notebook dies.

    python -m ddpdemo.runtime.guard PARENT_PID [--remove DIR]
        [--preload MODULE] MODULE [ARGS...]

Used by `Cluster` for the controller and every engine, spares included: a
kernel killed with SIGKILL runs no clean-up, and its engines must not
outlive it. The controller's guard also removes the cluster's temporary
directory. `--preload torch` imports torch before the engine starts, so a
spare engine is ready to form a group the moment it is needed (chapter 0).
"""
import importlib
import os
import runpy
import sys
import threading
import time


def guard_parent(parent_pid, remove=None, period=0.5):
    """Exit this process when the notebook kernel that started it is gone,
    first removing the directory `remove` (the cluster's temporary files).

    A kernel killed with SIGKILL, or killed because it did not exit within
    its manager's grace period, runs no atexit hook, so without this its
    engines, controller and files would live on. A thread can do the
    watching because gloo and NCCL release the GIL while they wait.
    """
    def watch():
        while True:
            time.sleep(period)
            if not alive(parent_pid):
                _kill_children()
                if remove:
                    remove_dir(remove)
                os._exit(1)

    threading.Thread(target=watch, name="ddpdemo-guard", daemon=True).start()


def remove_dir(path, within=10.0):
    """Remove the cluster's directory, for the controller's guard and for
    Cluster.stop alike. A process still ending can add a file while
    rmtree empties it (the fork server records each exit there), and
    rmtree then leaves the directory behind: seen once on two busy cores.
    So try again until it is gone, at most `within` seconds; nothing
    makes it again once it is (those writers only open files inside it).
    Returns whether it is gone. (A loop of its own, not
    ddpdemo.runtime.waiting: the guard loads nothing of ddpdemo's.)"""
    import shutil
    deadline = time.monotonic() + within
    while True:
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def alive(pid):
    """Whether pid is running: it exists and is not a zombie (one that
    exited and waits to be reaped has ended). The one meaning of alive in
    the runtime (processes.alive is this function). Read from /proc, not
    psutil: the guard and the fork server import only the standard
    library, and nothing they do not need."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            # pid (comm) STATE ...; comm may hold spaces and parentheses.
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False            # it went while we looked
    except (OSError, IndexError):
        return True             # no /proc here: existing is all we see


def _kill_children():
    try:
        import psutil
        for child in psutil.Process().children(recursive=True):
            child.kill()
    except Exception:  # best effort: we are exiting anyway
        pass


def parse(args):
    """(parent pid, directory to remove, modules to preload, module,
    its arguments) from the command line above."""
    args = list(args)
    parent, remove, preload = int(args.pop(0)), None, []
    while args and args[0] in ("--remove", "--preload"):
        flag, value = args.pop(0), args.pop(0)
        if flag == "--remove":
            remove = value
        else:
            preload.append(value)
    return parent, remove, preload, args.pop(0), args


def main():
    parent, remove, preload, module, args = parse(sys.argv[1:])
    guard_parent(parent, remove)
    for name in preload:
        importlib.import_module(name)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
