"""Running a chapter's script under torchrun (or the classic launcher)
from a notebook, the way a reader would from a shell: the command is
printed, then what the ranks printed, then the exit status. Bounded.

    done = torchrun("--standalone", "--nproc-per-node", "2",
                    "-m", "ddpdemo.examples.all_reduce_sums")

Chapters 1, 2, 4, 5 and 6 use it; the scripts are in ddpdemo.examples.
`run_together` starts several such commands at once (chapter 1: two jobs
on one machine at the same time) and prints each one's block in order.
"""
import os
import subprocess
import sys
import time

TIMEOUT = 120   # s; a 2-rank script takes ~10 s on a 2-core machine


def _env():
    # One thread per rank (two ranks on two cores), and the scripts find
    # ddpdemo even where it is not installed.
    from .processes import pythonpath
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=pythonpath())


def _exe(program):
    return (sys.executable if program == "python" else
            os.path.join(os.path.dirname(sys.executable), program))


def _show(done, show_stderr):
    print(done.stdout, end="")
    for line in done.stderr.splitlines():
        if show_stderr == "all" or (show_stderr == "ranks"
                                    and line.startswith("[rank ")):
            print(line)
    print("exit status:", done.returncode)


def run_command(program, *args, timeout=TIMEOUT, show_stderr="ranks"):
    """Run `program args` (program: "torchrun", or "python" for this
    interpreter), print `$ program args`, its stdout, the `[rank N]` lines
    of its stderr (show_stderr="ranks"), all of it ("all") or none (None),
    and `exit status: N`. Returns the CompletedProcess."""
    print("$", program, *args)
    done = subprocess.run([_exe(program), *args], env=_env(),
                          capture_output=True, text=True, timeout=timeout)
    _show(done, show_stderr)
    return done


def run_together(*commands, timeout=TIMEOUT, show_stderr="ranks"):
    """Start every command (a tuple `(program, *args)`, as for run_command)
    at once, like `cmd & cmd & wait` in a shell; when all have ended, print
    each one's block as run_command does, in the order given. Bounded: a
    command still running after `timeout` s is killed, with the others, and
    TimeoutExpired is raised. Returns the CompletedProcesses."""
    procs = [subprocess.Popen([_exe(program), *args], env=_env(), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for program, *args in commands]
    deadline, done = time.monotonic() + timeout, []
    try:
        for (program, *args), proc in zip(commands, procs):
            left = max(deadline - time.monotonic(), 0.001)
            out, err = proc.communicate(timeout=left)
            done.append(subprocess.CompletedProcess(
                [program, *args], proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for run in done:
        print("$", *run.args)
        _show(run, show_stderr)
    return done


def torchrun(*args, timeout=TIMEOUT, show_stderr="ranks"):
    """`torchrun args`, bounded; see run_command."""
    return run_command("torchrun", *args, timeout=timeout,
                       show_stderr=show_stderr)
