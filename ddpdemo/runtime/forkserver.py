"""A process that imports torch once and forks engines that need not.

    python -m ddpdemo.runtime.forkserver PARENT_PID SOCKET MODULE...

On two cores, importing torch (about 1.7 s of CPU) in every engine was
most of a cluster's start-up, and again for every spare. This server
imports the MODULEs once (torch, ipyparallel's engine), then, for each
request on the Unix socket SOCKET (a file in the cluster's private
directory: nothing listens on the network), forks a child that runs
`python -m module args...` as if started afresh: its own environment,
working directory, log file and session. Forking after the imports is
safe because nothing here has started a thread, an OpenMP pool or a
context yet (multiprocessing's "forkserver" start method rests on the
same idea). Chapter 0, "How the live cluster works".

The server is the children's parent: it reaps them at once and writes
each one's exit status to `exit-<pid>` next to SOCKET, where
ddpdemo.runtime.engines reads how a rank ended. It exits when PARENT_PID (the
notebook kernel) is gone; each child runs under ddpdemo.runtime.guard as usual.
"""
import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import traceback

from . import waiting
from .guard import alive

PARENT_POLL = 0.5   # s; how often the server looks for its kernel


def exit_path(sock_path, pid):
    return os.path.join(os.path.dirname(sock_path), f"exit-{pid}")


def request(sock_path, argv, env, cwd, log, timeout=30.0):
    """Ask the server at sock_path to run `python -m argv[0] argv[1:]`
    with this environment, cwd and log file; returns the child's pid."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)

        def connected():
            try:
                conn.connect(sock_path)
                return True
            except (FileNotFoundError, ConnectionRefusedError):
                return False

        # The server binds once python and ddpdemo are up.
        if not waiting.until(connected, timeout, every=0.02):
            conn.connect(sock_path)     # raise what stopped it
        conn.sendall(json.dumps(dict(argv=list(argv), env=dict(env),
                                     cwd=cwd, log=log)).encode() + b"\n")
        reply = conn.makefile("rb").readline()
    if not reply:
        raise RuntimeError("the fork server closed the connection")
    return json.loads(reply)["pid"]


def read_exit(sock_path, pid):
    """The exit status the server recorded for pid (negative: the
    signal), or None if not (yet) recorded."""
    try:
        with open(exit_path(sock_path, pid)) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _child(spec, sockets, wakeup):
    """In the forked child: become `python -m argv...`; never returns."""
    code = 1
    try:
        for sock in sockets:
            sock.close()
        for fd in wakeup:
            os.close(fd)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()                      # as Popen(start_new_session=True)
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.chdir(spec["cwd"] or ".")
        os.environ.clear()
        os.environ.update(spec["env"])
        # A fresh process draws its own random state; so must a fork
        # (Python's random module reseeds itself after a fork already).
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed()
        module, *args = spec["argv"]
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:
        code = _exit_status(stop)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _exit_status(stop):
    """The exit status of `python -m module` that raised SystemExit
    `stop`, as the interpreter gives it: None is 0, an int is itself,
    anything else (sys.exit("message")) is printed to stderr, here the
    child's log, and is 1; without the print a rank's reason to stop
    would be lost."""
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code
    print(stop.code, file=sys.stderr)
    return 1


def _reap(sock_path):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = os.waitstatus_to_exitcode(status)
        path = exit_path(sock_path, pid)
        try:
            with open(path + ".tmp", "w") as f:
                f.write(str(code))
            os.replace(path + ".tmp", path)
        except OSError:     # the cluster's directory is already gone
            pass


def listen(sock_path):
    """Bind first, import after: a request made meanwhile waits in the
    backlog instead of failing."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(16)
    return listener


def serve(parent, sock_path, listener):
    # SIGCHLD wakes the loop through this pipe, so a dead child is reaped
    # (and its status recorded) at once.
    wakeup = os.pipe()
    os.set_blocking(wakeup[1], False)
    signal.set_wakeup_fd(wakeup[1])
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while True:
        ready, _, _ = select.select([listener, wakeup[0]], [], [],
                                    PARENT_POLL)
        if wakeup[0] in ready:
            os.read(wakeup[0], 512)
        _reap(sock_path)
        if not alive(parent):
            return
        if listener in ready:
            conn, _ = listener.accept()
            with conn:
                spec = json.loads(conn.makefile("rb").readline())
                pid = os.fork()
                if pid == 0:
                    _child(spec, (listener, conn), wakeup)
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")


def main(argv=None):
    parent, sock_path, *modules = argv or sys.argv[1:]
    listener = listen(sock_path)
    for name in modules:
        importlib.import_module(name)
    serve(int(parent), sock_path, listener)


if __name__ == "__main__":
    main()
