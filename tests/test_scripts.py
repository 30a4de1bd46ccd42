"""ddpdemo.scripts: a torchrun run from a notebook prints the command, the
ranks' output and the exit status, and is bounded."""
import os
import signal
import subprocess
import sys
import time

import pytest

from ddpdemo import scripts
from ddpdemo.runtime import processes, waiting
from ddpdemo.scripts import collect, run_command, run_together, torchrun


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


def test_env_is_set_for_the_command_and_printed_before_it(capsys):
    # Chapter "When the job itself fails": GLOO_SOCKET_IFNAME for one job.
    code = "import os; print(os.environ['DDPDEMO_X'])"
    done = run_command("python", "-c", code, env={"DDPDEMO_X": "seen"})
    out = capsys.readouterr().out.splitlines()
    assert done.returncode == 0 and "DDPDEMO_X" not in os.environ
    assert out == [f"$ DDPDEMO_X=seen python -c {code}", "seen",
                   "exit status: 0"]


def test_a_script_that_hangs_is_bounded_and_its_children_killed(tmp_path):
    # Like torchrun with a stuck rank: the launcher's child must not
    # outlive the timeout.
    pidfile = tmp_path / "child"
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c',"
            " 'import time; time.sleep(60)'])\n"
            f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
            "time.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_command("python", "-c", code, timeout=3)
    child = int(pidfile.read_text())
    assert not processes.alive(child)


def test_a_child_in_a_session_of_its_own_is_killed_too(tmp_path):
    # torchrun starts every rank with start_new_session=True: killing the
    # launcher's process group alone left such ranks running.
    pidfile = tmp_path / "child"
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c',"
            " 'import time; time.sleep(60)'], start_new_session=True)\n"
            f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
            "time.sleep(60)\n")
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            run_command("python", "-c", code, timeout=3)
        child = int(pidfile.read_text())
        assert not processes.alive(child)
    finally:
        if pidfile.exists():
            processes.kill([int(pidfile.read_text())])


@pytest.mark.timeout(60)
def test_a_command_that_outlives_its_kill_is_named_not_waited_for(
        monkeypatch):
    """A launcher the kernel holds (state D) outlives SIGKILL. Here the
    kill does not take (os.killpg does nothing): past the run's timeout
    and the reap's bound, processes.Unkillable names it; the wait for it
    does not last as long as the process (60 s)."""
    monkeypatch.setattr(os, "killpg", lambda pgid, signum: None)
    monkeypatch.setattr(processes, "REAP_TIMEOUT", 0.5)
    start = time.monotonic()
    with pytest.raises(processes.Unkillable) as info:
        collect([sys.executable, "-c", "import time; time.sleep(60)"],
                timeout=1)
    pid = info.value.pid
    try:
        assert time.monotonic() - start < 30
        assert isinstance(info.value.__context__, subprocess.TimeoutExpired)
        assert f"(pid {pid}) still runs 0.5 s after SIGKILL" in \
            str(info.value)
        assert processes.alive(pid)          # left running, as it says
    finally:
        os.kill(pid, signal.SIGKILL)
        assert waiting.until(lambda: os.waitpid(pid, os.WNOHANG)[0], 30)


def test_each_run_gets_its_own_temporary_directory_removed_after(capsys):
    done = run_command("python", "-c",
                       "import tempfile; print(tempfile.gettempdir())")
    tmpdir = done.stdout.strip()
    assert os.path.basename(tmpdir).startswith("ddpdemo-run-")
    assert not os.path.exists(tmpdir)


def test_commands_run_together_at_once_and_print_in_order(capsys, tmp_path):
    # Each command waits until both have started (a file each): run one
    # after the other, the first would fail.
    script = tmp_path / "both.py"
    script.write_text(
        "import os, sys, time\n"
        "open(sys.argv[1], 'w').close()\n"
        "give_up = time.monotonic() + 20\n"
        "while not all(os.path.exists(f) for f in sys.argv[1:3]):\n"
        "    assert time.monotonic() < give_up, 'not started together'\n"
        "    time.sleep(0.01)\n"
        "print('ran', sys.argv[1][-1])\n")
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    done = run_together(("python", str(script), a, b),
                        ("python", str(script), b, a), timeout=60)
    out = capsys.readouterr().out.splitlines()
    assert [d.returncode for d in done] == [0, 0]
    assert out == [f"$ python {script} {a} {b}", "ran a", "exit status: 0",
                   f"$ python {script} {b} {a}", "ran b", "exit status: 0"]


def test_commands_run_together_are_bounded(tmp_path):
    pidfile = tmp_path / "pid"
    code = (f"import os, time; open({str(pidfile)!r}, 'w')"
            ".write(str(os.getpid())); time.sleep(30)")
    with pytest.raises(subprocess.TimeoutExpired):
        run_together(("python", "-c", code), ("python", "-c", "pass"),
                     timeout=3)
    # The sleeping one was killed, not left behind.
    assert not processes.alive(int(pidfile.read_text()))


def test_after_a_failure_the_others_are_stopped_with_their_output(tmp_path):
    pidfile = tmp_path / "pid"
    waits = (f"import os, time; open({str(pidfile)!r}, 'w')"
             ".write(str(os.getpid())); print('waiting', flush=True); "
             "time.sleep(60)")
    # It fails once the other is up (bounded: 4 if that never happens).
    fails = ("import os, sys, time\n"
             "give_up = time.monotonic() + 30\n"
             f"while not os.path.exists({str(pidfile)!r}):\n"
             "    if time.monotonic() > give_up: sys.exit(4)\n"
             "    time.sleep(0.01)\n"
             "sys.exit(3)")
    start = time.monotonic()
    failed, stopped = collect([sys.executable, "-c", fails],
                              [sys.executable, "-c", waits],
                              timeout=60, after_failure=0.5)
    assert time.monotonic() - start < 20     # not the sleeper's 60 s
    assert failed.returncode == 3
    assert stopped.returncode == -signal.SIGKILL
    assert stopped.stdout == "waiting\n"
    assert not processes.alive(int(pidfile.read_text()))


def test_without_a_failure_nobody_is_stopped_early():
    slow = "import time; time.sleep(1.5); print('done')"
    quick, slow_one = collect([sys.executable, "-c", "pass"],
                              [sys.executable, "-c", slow],
                              timeout=60, after_failure=0.1)
    assert (quick.returncode, slow_one.returncode) == (0, 0)
    assert slow_one.stdout == "done\n"


def test_check_repair_says_repaired_only_when_every_line_is_there(
        monkeypatch, capsys):
    # What check_repair makes of a run (the runs themselves: every
    # chapter's exercise, broken and repaired, under strict nbval).
    runs = []

    def fake_collect(argv, timeout):
        assert argv[1:4] == ["--standalone", "--nproc-per-node", "2"]
        return [runs.pop(0)]

    monkeypatch.setattr(scripts, "collect", fake_collect)
    runs.append(subprocess.CompletedProcess([], 1, "epoch 0\n", ""))
    assert not scripts.check_repair("job.py", expect=["epoch 0", "done"])
    assert capsys.readouterr().out == ("not yet: exit status 1\n"
                                       "  missing: done\n")
    runs.append(subprocess.CompletedProcess([], 0, "epoch 0\ndone\n", ""))
    assert scripts.check_repair("job.py", expect=["epoch 0", "done"])
    assert capsys.readouterr().out.startswith("repaired: exit status 0")

    def hangs(argv, timeout):
        raise subprocess.TimeoutExpired(argv, timeout)

    monkeypatch.setattr(scripts, "collect", hangs)
    assert not scripts.check_repair("job.py", expect=["done"], timeout=7)
    assert capsys.readouterr().out.startswith(
        "not yet: the job still ran after 7 s")
