"""ddpdemo.scripts: a torchrun run from a notebook prints the command, the
ranks' output and the exit status, and is bounded."""
import subprocess

import pytest

from ddpdemo.scripts import run_command, torchrun


def test_torchrun_prints_command_output_and_status(capsys):
    done = torchrun("--standalone", "--nproc-per-node", "2",
                    "-m", "ddpdemo.examples.all_reduce_sums")
    out = capsys.readouterr().out.splitlines()
    assert done.returncode == 0, done.stderr[-2000:]
    assert out[0] == ("$ torchrun --standalone --nproc-per-node 2 "
                      "-m ddpdemo.examples.all_reduce_sums")
    assert "[rank 1] all_reduce  [4, 6]" in out
    assert out[-1] == "exit status: 0"


def test_rank_lines_of_stderr_are_shown_and_failure_reported(capsys):
    code = "import sys; print('[rank 0] boom', file=sys.stderr); " \
           "print('noise', file=sys.stderr); sys.exit(3)"
    done = run_command("python", "-c", code)
    out = capsys.readouterr().out.splitlines()
    assert done.returncode == 3
    assert out[1:] == ["[rank 0] boom", "exit status: 3"]


def test_a_script_that_hangs_is_bounded():
    with pytest.raises(subprocess.TimeoutExpired):
        run_command("python", "-c", "import time; time.sleep(30)",
                    timeout=1)
