"""Running a chapter's script under torchrun (or the classic launcher)
from a notebook, the way a reader would from a shell: the command is
printed, then what the ranks printed, then the exit status. Bounded.

    done = torchrun("--standalone", "--nproc-per-node", "2",
                    "-m", "ddpdemo.examples.all_reduce_sums")

Chapters 1, 2, 4, 5 and 6 use it; the scripts are in ddpdemo.examples.
"""
import os
import subprocess
import sys

TIMEOUT = 120   # s; a 2-rank script takes ~10 s on a 2-core machine


def _env():
    # One thread per rank (two ranks on two cores), and the scripts find
    # ddpdemo even where it is not installed.
    from .processes import pythonpath
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=pythonpath())


def run_command(program, *args, timeout=TIMEOUT, show_stderr="ranks"):
    """Run `program args` (program: "torchrun", or "python" for this
    interpreter), print `$ program args`, its stdout, the `[rank N]` lines
    of its stderr (show_stderr="ranks"), all of it ("all") or none (None),
    and `exit status: N`. Returns the CompletedProcess."""
    exe = (sys.executable if program == "python" else
           os.path.join(os.path.dirname(sys.executable), program))
    print("$", program, *args)
    done = subprocess.run([exe, *args], env=_env(), capture_output=True,
                          text=True, timeout=timeout)
    print(done.stdout, end="")
    for line in done.stderr.splitlines():
        if show_stderr == "all" or (show_stderr == "ranks"
                                    and line.startswith("[rank ")):
            print(line)
    print("exit status:", done.returncode)
    return done


def torchrun(*args, timeout=TIMEOUT, show_stderr="ranks"):
    """`torchrun args`, bounded; see run_command."""
    return run_command("torchrun", *args, timeout=timeout,
                       show_stderr=show_stderr)
