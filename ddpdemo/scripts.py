"""Running a chapter's script under torchrun (or the classic launcher)
from a notebook, the way a reader would from a shell: the command is
printed, then what the ranks printed, then the exit status. Bounded.

    done = torchrun("--standalone", "--nproc-per-node", "2",
                    "-m", "ddpdemo.examples.all_reduce_sums")

Chapters 4 to 8 and "When the job itself fails" use it; the scripts are
in ddpdemo.examples.
`run_together` starts several such commands at once (chapter 1: two jobs
on one machine at the same time) and prints each one's block in order.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

TIMEOUT = 120   # s; a 2-rank script takes ~10 s on a 2-core machine


def _env(tmpdir):
    # One thread per rank (two ranks on two cores), and the scripts find
    # ddpdemo even where it is not installed. TMPDIR: torchrun leaves a
    # `torchelastic_*` directory in the temporary directory of every run;
    # each run gets one of its own, removed afterwards.
    from .runtime.processes import pythonpath
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=pythonpath(),
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
    alone would leave its ranks running, blocked in a collective."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate()


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
    for (program, *args), run in zip(commands, done):
        if len(commands) > 1:
            print("$", program, *args)
        show(run, show_stderr)
    return done


def collect(*argvs, timeout=TIMEOUT, cwd=None):
    """Run every argv at once and return their CompletedProcesses (output
    captured, nothing printed): each in a session of its own, so that a
    launcher still running at the timeout is killed with all its ranks
    (TimeoutExpired is raised then), and with a temporary directory of its
    own, removed afterwards. The tests launch their scripts with it too."""
    with tempfile.TemporaryDirectory(prefix="ddpdemo-run-") as tmpdir:
        procs = [subprocess.Popen(argv, env=_env(tmpdir), cwd=cwd, text=True,
                                  start_new_session=True,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
                 for argv in argvs]
        deadline, done = time.monotonic() + timeout, []
        try:
            for argv, proc in zip(argvs, procs):
                left = max(deadline - time.monotonic(), 0.001)
                out, err = proc.communicate(timeout=left)
                done.append(subprocess.CompletedProcess(
                    argv, proc.returncode, out, err))
        finally:
            for proc in procs:
                if proc.poll() is None:
                    _kill_group(proc)
    return done


def torchrun(*args, timeout=TIMEOUT, show_stderr="ranks", env=None):
    """`torchrun args`, bounded; see run_command."""
    return run_command("torchrun", *args, timeout=timeout,
                       show_stderr=show_stderr, env=env)
