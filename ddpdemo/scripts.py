"""Running a chapter's script under torchrun (or the classic launcher)
from a notebook, the way a reader would from a shell: the command is
printed, then what the ranks printed, then the exit status. Bounded.

    done = torchrun("--standalone", "--nproc-per-node", "2",
                    "-m", "ddpdemo.examples.all_reduce_sums")

"Launching a real job", "When the job itself fails" and chapters 4 to 8
use it; the scripts are in ddpdemo.examples.
`run_together` starts several such commands at once ("Launching a real
job": two jobs on one machine at the same time) and prints each one's
block in order.
"""
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import psutil

from .runtime import processes, waiting

TIMEOUT = 120   # s; a 2-rank script takes ~10 s on a 2-core machine


def _env(tmpdir):
    # One thread per rank (two ranks on two cores), and the scripts find
    # ddpdemo even where it is not installed. TMPDIR: torchrun leaves a
    # `torchelastic_*` directory in the temporary directory of every run;
    # each run gets one of its own, removed afterwards.
    return dict(os.environ, OMP_NUM_THREADS="1",
                PYTHONPATH=processes.pythonpath(),
                TMPDIR=tmpdir)


def _exe(program):
    return (sys.executable if program == "python" else
            os.path.join(os.path.dirname(sys.executable), program))


def show(done, show_stderr):
    """Print a finished run as run_command does (ddpdemo.nodes too)."""
    print(done.stdout, end="")
    for line in done.stderr.splitlines():
        if show_stderr == "all" or (show_stderr == "ranks"
                                    and line.startswith("[rank ")):
            print(line)
    print("exit status:", done.returncode)


def _kill_group(proc):
    """Kill a launcher and every rank it started: killing the launcher
    alone would leave its ranks running, blocked in a collective. Its
    process group is not enough either: torchrun starts each rank in a
    session of its own (start_new_session in torch's subprocess_handler),
    so the ranks are found as the launcher's descendants, before the kill
    orphans them. Bounded: processes.Unkillable if the launcher outlives
    the kill."""
    try:
        family = [p.pid for p in
                  psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    processes.kill(family)
    processes.reap(proc)


def run_command(program, *args, timeout=TIMEOUT, show_stderr="ranks",
                env=None):
    """Run `program args` (program: "torchrun", or "python" for this
    interpreter), print `$ program args`, its stdout, the `[rank N]` lines
    of its stderr (show_stderr="ranks"), all of it ("all") or none (None),
    and `exit status: N`. `env`: variables to set for this command only,
    printed before it as a shell writes them (`$ NAME=value torchrun ...`).
    Bounded: past `timeout` s the launcher and its ranks are killed and
    TimeoutExpired is raised. Returns the CompletedProcess."""
    if not env:
        return run_together((program, *args), timeout=timeout,
                            show_stderr=show_stderr)[0]
    assigned = [f"{name}={value}" for name, value in env.items()]
    print("$", *assigned, program, *args)
    done, = collect(["env", *assigned, _exe(program), *args],
                    timeout=timeout)
    show(done, show_stderr)
    return done


def run_together(*commands, timeout=TIMEOUT, show_stderr="ranks"):
    """Start every command (a tuple `(program, *args)`, as for run_command)
    at once, like `cmd & cmd & wait` in a shell; when all have ended, print
    each one's block as run_command does, in the order given. Bounded: a
    command still running after `timeout` s is killed, with the others and
    every process they started, and TimeoutExpired is raised. Returns the
    CompletedProcesses."""
    if len(commands) == 1:
        print("$", *commands[0])
    done = collect(*[[_exe(program), *args] for program, *args in commands],
                   timeout=timeout)
    for (program, *args), run in zip(commands, done, strict=True):
        if len(commands) > 1:
            print("$", program, *args)
        show(run, show_stderr)
    return done


def _read_lines(stream, start, into):
    """Read `stream` to its end as (seconds since start, line) pairs."""
    for line in stream:
        into.append((time.monotonic() - start, line))


def collect(*argvs, timeout=TIMEOUT, cwd=None, after_failure=None):
    """Run every argv at once and return their CompletedProcesses (output
    captured, nothing printed): each in a session of its own, so that a
    launcher still running at the timeout is killed with all its ranks
    (TimeoutExpired is raised then), and with a temporary directory of its
    own, removed afterwards. The tests launch their scripts with it too.
    Each result also has `stamps`: (seconds since the start, line) for
    every line of stdout and stderr, in order of arrival, so a notebook can
    say when each rank printed what ("Choosing the timeout").
    `after_failure`: once one command has exited with a non-zero status,
    the others get that many seconds, then are killed with their ranks
    and returned with what they printed (ddpdemo.nodes: a node whose
    partner failed waits for it until the timeout otherwise).
    A killed launcher is waited for at most processes.REAP_TIMEOUT s; one
    that outlives SIGKILL (held by the kernel) raises
    processes.Unkillable, naming it, instead of a wait without end."""
    with tempfile.TemporaryDirectory(prefix="ddpdemo-run-") as tmpdir:
        start = time.monotonic()
        procs = [subprocess.Popen(argv, env=_env(tmpdir), cwd=cwd, text=True,
                                  start_new_session=True,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
                 for argv in argvs]
        readers = []
        for proc in procs:
            out, err = [], []
            threads = [threading.Thread(target=_read_lines, daemon=True,
                                        args=(stream, start, into))
                       for stream, into in ((proc.stdout, out),
                                            (proc.stderr, err))]
            for thread in threads:
                thread.start()
            readers.append((threads, out, err))
        deadline, done = start + timeout, []
        try:
            _wait_all(argvs, procs, deadline, timeout, after_failure)
            for argv, proc, (threads, out, err) in zip(
                    argvs, procs, readers, strict=True):
                for thread in threads:     # a rank may hold the pipes
                    thread.join(max(deadline - time.monotonic(), 0.001))
                    if thread.is_alive():
                        raise subprocess.TimeoutExpired(argv, timeout)
                run = subprocess.CompletedProcess(
                    argv, proc.returncode, "".join(ln for _, ln in out),
                    "".join(ln for _, ln in err))
                run.stamps = [(t, ln.rstrip("\n"))
                              for t, ln in sorted(out + err)]
                done.append(run)
        finally:
            _stop(procs, readers)
    return done


def _stop(procs, readers):
    """Kill what still runs (each command with its ranks) and close the
    pipes. Every command is seen to, then the first that outlived its
    kill is raised (processes.Unkillable). A pipe whose reader still
    reads is left open: closing it would wait for that reader."""
    stuck = []
    for proc, (threads, _, _) in zip(procs, readers, strict=True):
        if proc.poll() is None or any(t.is_alive() for t in threads):
            try:
                _kill_group(proc)
            except processes.Unkillable as error:
                stuck.append(error)
        for thread in threads:
            thread.join(5)
        if not any(t.is_alive() for t in threads):
            proc.stdout.close()
            proc.stderr.close()
    if stuck:
        raise stuck[0]


POLL = 0.05     # s; how often collect looks at the commands it waits for


def _wait_all(argvs, procs, deadline, timeout, after_failure):
    """Wait until every process has ended (TimeoutExpired at the
    deadline); with `after_failure`, kill those still running that many
    seconds after the first non-zero exit."""
    def left():
        return max(deadline - time.monotonic(), 0.0)

    def ended():
        return all(proc.poll() is not None for proc in procs)

    def failed():
        return any(proc.poll() for proc in procs)     # a non-zero status

    if after_failure is None:
        waiting.until(ended, left(), every=POLL)
    elif (waiting.until(lambda: ended() or failed(), left(), every=POLL)
          and not waiting.until(ended, min(after_failure, left()),
                                every=POLL)
          and left() > 0):
        # One failed (or all ended): the rest got after_failure s, within
        # the deadline, and are now stopped.
        for proc in procs:
            if proc.poll() is None:
                _kill_group(proc)
        return
    running = [argv for argv, proc in zip(argvs, procs, strict=True)
               if proc.poll() is None]
    if running:
        raise subprocess.TimeoutExpired(running[0], timeout)


def torchrun(*args, timeout=TIMEOUT, show_stderr="ranks", env=None):
    """`torchrun args`, bounded; see run_command."""
    return run_command("torchrun", *args, timeout=timeout,
                       show_stderr=show_stderr, env=env)


def check_repair(script, *args, expect, nproc=2, timeout=60):
    """An exercise's check ("repair this script"): run the reader's copy
    of a script under torchrun (one node, `nproc` ranks) and print whether
    it is repaired: exit status 0 and every line of `expect` printed (a
    line the fixed script prints on rank 0). It never shows the fix: what
    is wrong is told by what was seen (the exit status, the lines still
    missing, a job still running after `timeout` s), as a reader's own run
    would tell it. Returns True when repaired."""
    argv = [_exe("torchrun"), "--standalone", "--nproc-per-node",
            str(nproc), str(script), *map(str, args)]
    try:
        done, = collect(argv, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"not yet: the job still ran after {timeout} s "
              "(killed, with its ranks)")
        return False
    printed = done.stdout.splitlines()
    missing = [line for line in expect if line not in printed]
    if done.returncode == 0 and not missing:
        print(f"repaired: exit status 0, and all {len(expect)} expected "
              "lines printed")
        return True
    print(f"not yet: exit status {done.returncode}")
    for line in missing:
        print("  missing:", line)
    return False
