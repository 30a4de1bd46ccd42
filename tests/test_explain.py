"""`python -m ddpdemo.explain` on what real hung jobs leave behind.

Each scenario runs a book script under torchrun on gloo until it hangs
(chapter 5's val_dataloader_deadlock, chapter 8's when_ddp_hangs, and
ddpdemo.examples.hang_patterns beside them), and takes what a reader
would: py-spy's dump of every rank while it hangs (with the `RANK=N` line
the symptom page's one-liner writes), each rank's Flight Recorder dump
(TORCH_FR_DUMP_TEMP_FILE; the scripts write it when the group's timeout
ends the hang, or on torchrun's SIGTERM) and torchrun's output, and runs
explain after the hang has ended. One scenario, with DataLoader workers
running, takes the stacks with the symptom page's own one-liner (read
from book/symptoms.md) and runs explain while the job still hangs too.
The jobs run once, in a module-scoped fixture, two at a time: most of a
job is its ranks waiting out the group's timeout, which two jobs can do
side by side on 2 cores. Fast checks read files real plain torchrun jobs wrote
(tests/data/explain).
Where this machine refuses ptrace, the tests fail with py-spy's reason.
"""
import os
import pathlib
import pickle
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from ddpdemo import explain, ledger
from ddpdemo.scripts import _env

PY_SPY = pathlib.Path(sys.executable).with_name("py-spy")
BOOK = pathlib.Path(__file__).resolve().parent.parent / "book"
DATA = pathlib.Path(__file__).resolve().parent / "data" / "explain"
TIMEOUT = 12.0     # s: each script's group timeout, the hang's length
START_BOUND = 120  # s for a job to reach its hang on a loaded 2-core box
AT_ONCE = 2        # jobs run side by side (the `jobs` fixture)

# scenario: (torchrun arguments, ranks, {rank: what its stack shows once
# it hangs}, rank to kill with -9 once all hang). "=f": the innermost
# frame is f; "f": f is on the stack. Run in this order, AT_ONCE at a
# time: no-partner starts after zero-first has ended (three jobs have
# ended by then), so their dumps are of jobs apart in time (the bad
# input test mixes them).
JOBS = {
    "zero-first": (["-m", "ddpdemo.examples.val_dataloader_deadlock"], 2,
                   {0: "torch_distributed_zero_first", 1: "exit_if_stuck"},
                   None),
    "ddp-forward": (["-m", "ddpdemo.examples.hang_patterns",
                     "ddp-forward"], 2, {0: "forward", 1: "=barrier"}, None),
    "rank-0-only": (["-m", "ddpdemo.examples.hang_patterns",
                     "rank0-branch"], 2, {0: "=all_reduce", 1: "=barrier"},
                    None),
    "host-waits": (["-m", "ddpdemo.examples.hang_patterns", "wait"], 2,
                   {0: "=wait", 1: "=wait"}, None),
    "no-partner": (["-m", "ddpdemo.examples.when_ddp_hangs"], 2,
                   {0: "backward", 1: "exit_if_stuck"}, None),
    "dead-rank": (["-m", "ddpdemo.examples.hang_patterns", "stall"], 2,
                  {0: "=all_reduce", 1: "=stall"}, 1),
    "two-hangs": (["-m", "ddpdemo.examples.hang_patterns", "two-hangs"], 4,
                  {0: "=all_reduce", 1: "=barrier", 2: "backward",
                   3: "=barrier"}, None),
}


def py_spy(pid, or_none=False):
    """py-spy's dump of process pid. It fails on a process that has not
    loaded its interpreter yet ("Failed to find a python interpreter":
    torchrun's rank seconds after it started); or_none=True returns None
    then, to be asked again, and the caller fails if it never reads."""
    done = subprocess.run([str(PY_SPY), "dump", "--pid", str(pid)],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        if or_none:
            return None
        pytest.fail(f"py-spy cannot read process {pid} (ptrace refused?): "
                    f"{done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def shows(text, want):
    """Whether py-spy's dump's main thread shows `want` (see JOBS)."""
    main = text.split('"MainThread"', 1)[-1].split("\nThread ")[0]
    funcs = [f.split(".")[-1]     # py-spy writes `Tensor.backward`
             for f in re.findall(r"^\s+(\S+) \(", main, re.M)]
    return (funcs[:1] == [want[1:]]) if want.startswith("=") \
        else want in funcs


def ranks_of(launcher):
    """{rank: pid} of torchrun's workers, from their environment (not
    their DataLoader workers: a RANK whose parent has none)."""
    out = {}
    for child in psutil.Process(launcher.pid).children(recursive=True):
        try:
            rank = child.environ().get("RANK")
            if "RANK" in child.parent().environ():
                continue
        except psutil.Error:
            continue
        if rank is not None and "python" in child.name():
            out[int(rank)] = child.pid
    return out


def one_liner():
    """The symptom page's py-spy loop, as printed there."""
    text = (BOOK / "symptoms.md").read_text()
    return re.search(r"```bash\n\s*(for pid in [^\n]*)\n", text)[1]


def run_job(folder, args, nproc, want, kill, timeout=None, during=None):
    """Run one hang under torchrun; leave in `folder` the dumps (fr/),
    stacks.txt and torchrun.log; `during(folder, pids, launcher)`, if
    given, runs while it hangs, instead of writing stacks.txt. Returns
    the time it took."""
    start = time.monotonic()
    (folder / "fr").mkdir(parents=True)
    # TMPDIR beside the folder: torchrun leaves a directory there.
    tmp = folder.with_name(folder.name + "-tmp")
    tmp.mkdir()
    env = dict(_env(str(tmp)), TORCH_FR_DUMP_TEMP_FILE=str(
        folder / "fr" / "rank_"), TORCH_CPP_LOG_LEVEL="FATAL")
    timeout = timeout or TIMEOUT + 4 * (nproc > 2)
    argv = [str(pathlib.Path(sys.executable).with_name("torchrun")),
            "--standalone", f"--nproc-per-node={nproc}", *args,
            "--timeout", str(timeout)]
    with open(folder / "torchrun.log", "w") as log:
        launcher = subprocess.Popen(argv, env=env, stdout=log,
                                    stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            deadline = time.monotonic() + START_BOUND
            while True:
                pids = ranks_of(launcher)
                if len(pids) == nproc:
                    stacks = {r: py_spy(pids[r], or_none=True)
                              for r in sorted(pids)}
                    if None not in stacks.values() and all(
                            shows(stacks[r], w) for r, w in want.items()):
                        break
                if time.monotonic() > deadline:
                    for r in sorted(pids):
                        py_spy(pids[r])       # fails with py-spy's reason
                    pytest.fail(f"{args} did not reach its hang: "
                                + (folder / "torchrun.log").read_text()[
                                    -2000:])
                time.sleep(0.3)
            if during:
                during(folder, pids, launcher)
            else:    # as step 0's one-liner: RANK=N, then py-spy's dump
                (folder / "stacks.txt").write_text("".join(
                    f"RANK={r}\n{stacks[r]}\n" for r in sorted(stacks)))
            if kill is not None:
                os.kill(pids[kill], signal.SIGKILL)
            launcher.wait(timeout=timeout + 60)
        finally:
            if launcher.poll() is None:
                os.killpg(launcher.pid, signal.SIGKILL)
                launcher.wait()
    return time.monotonic() - start


def while_it_hangs(folder, pids, launcher):
    """Step 0 while the job hangs: the page's one-liner through bash (its
    `train.py`: this job's script), then explain on what exists."""
    workers = {r: psutil.Process(p).children() for r, p in pids.items()}
    assert all(len(w) == 2 for w in workers.values()), workers
    script = str(folder / "train.py")
    path = f"{PY_SPY.parent}{os.pathsep}{os.environ['PATH']}"
    subprocess.run(["bash", "-c", one_liner().replace("train.py", script)],
                   cwd=folder, env=dict(os.environ, PATH=path),
                   timeout=120)   # its status: the last pid tried
    # Also the page's earlier loop's output: a worker's block as rank 0.
    worker = py_spy(workers[0][0].pid)
    (folder / "with_worker.txt").write_text(
        (folder / "stacks.txt").read_text() + f"RANK=0\n{worker}\n")
    alone = explain.explain([str(folder / "stacks.txt")])
    everything = subprocess.run(
        [sys.executable, "-m", "ddpdemo.explain", "fr", "stacks.txt",
         "torchrun.log"], cwd=folder, capture_output=True, text=True,
        timeout=120)
    mixed = explain.explain([str(folder / "with_worker.txt")])
    still = launcher.poll() is None
    for name, text in [("alone", alone), ("mixed", mixed),
                       ("everything", everything.stdout + everything.stderr),
                       ("status", f"rc={everything.returncode} still "
                                  f"hanging={still}")]:
        (folder / f"during-{name}.txt").write_text(text)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """{scenario: its folder}, every hang run once for the module."""
    root = tmp_path_factory.mktemp("hangs")
    out = {name: root / name for name in JOBS}

    def timed(name):
        start = time.monotonic()
        run_job(out[name], *JOBS[name])
        SPANS[name] = (start, time.monotonic())

    with ThreadPoolExecutor(AT_ONCE) as pool:
        done = {name: pool.submit(timed, name) for name in JOBS}
        for name, future in done.items():     # raises a job's failure
            future.result()
            print(f"{name}: {SPANS[name][1] - SPANS[name][0]:.0f} s")
    return out


SPANS = {}    # scenario: (start, end), time.monotonic(), set by `jobs`


@pytest.fixture(scope="module")
def workers_job(tmp_path_factory):
    """The workers scenario's folder, from a plain script path, as a
    reader's job: train.py."""
    folder = tmp_path_factory.mktemp("hangs") / "workers"
    folder.mkdir()
    (folder / "train.py").write_text(
        "import runpy\nrunpy.run_module('ddpdemo.examples.hang_patterns', "
        "run_name='__main__')\n")
    took = run_job(folder, [str(folder / "train.py"), "workers"], 2,
                   {0: "torch_distributed_zero_first", 1: "=all_reduce"},
                   None, timeout=30, during=while_it_hangs)
    print(f"workers: {took:.0f} s")
    return folder


def report(*paths):
    return explain.explain([str(p) for p in paths])


def reference_seq(folder, ranks):
    """The parting number as ddpdemo.ledger (the book's Ledger) reads the
    same dumps' default group: an independent reading."""
    records = {}
    for r in ranks:
        path = folder / "fr" / f"rank_{r}"
        if path.exists():
            records[r] = {"buffer_size": 2000,
                          "dump": pickle.loads(path.read_bytes())}
    sentence = ledger.Ledger(len(ranks), records,
                             dead=[r for r in ranks if r not in records])
    return int(re.search(r"#(\d+)", sentence.divergence)[1])


def section(text):
    return re.findall(r"See (\S+)", text)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name, stuck, side", [
    ("zero-first", [0], "barrier on rank 0"),
    ("no-partner", [0], "all_reduce ["),
    ("ddp-forward", [0], "broadcast"),
    ("rank-0-only", [0], "all_reduce [2] Float on rank 0"),
    ("host-waits", [0], "all_reduce [4] Float on rank 0"),
])
def test_each_pattern_names_ranks_collective_and_section(jobs, name, stuck,
                                                         side):
    folder = jobs[name]
    text = report(folder / "fr", folder / "stacks.txt",
                  folder / "torchrun.log")
    seq = reference_seq(folder, [0, 1])
    parts = re.findall(r"collective #(\d+): (.*)", text)
    assert parts and int(parts[0][0]) == seq, text
    assert side in parts[0][1] and "rank 1" in parts[0][1], text
    assert section(text) == [explain.link(name)], text
    assert f"  #{seq}: " in text.split("What it is:")[1], text
    for r in stuck:
        assert re.search(rf"rank {r}: (waiting in|at) \S+ \(", text), text


@pytest.mark.timeout(900)
def test_a_rank_killed_with_9(jobs):
    folder = jobs["dead-rank"]
    text = report(folder / "fr", folder / "stacks.txt",
                  folder / "torchrun.log")
    assert "rank 1: gone: killed by signal 9 (SIGKILL)" in text, text
    # Rank 0 waited in all_reduce #3: rank 1 stalled before its third.
    assert re.search(r"collective #3: all_reduce \[4\] Float on rank 0"
                     r".*; no dump from rank 1", text), text
    assert section(text) == [explain.link("dead-rank")], text
    assert not (folder / "fr" / "rank_1").exists()   # it died dumpless


@pytest.mark.timeout(900)
def test_two_unrelated_hangs_in_one_job(jobs):
    folder = jobs["two-hangs"]
    text = report(folder)      # the whole folder: dumps, stacks, log
    parts = {g: (int(s), rest) for g, s, rest in re.findall(
        r"group (\d+), collective #(\d+): (.*)", text)}
    # Groups 2 and 3 are the pairs (0: default, 1: the report group).
    assert set(parts) == {"2", "3"}, text
    seq_a, side_a = parts["2"]
    _, side_b = parts["3"]
    assert seq_a == 2 and "on rank 0" in side_a and "rank 1" in side_a
    assert "all_reduce" in side_b and "on rank 2" in side_b \
        and "rank 3" in side_b
    assert sorted(section(text)) == sorted(
        [explain.link("rank-0-only"), explain.link("no-partner")]), text


def test_every_section_label_is_on_its_page():
    for pattern, (page, label) in explain.SECTIONS.items():
        source = (BOOK / f"{page}.ipynb").read_text()
        assert f"({label})=" in source, (pattern, page, label)
        others = [p.name for p in BOOK.glob("*.*") if p.is_file()
                  and p.stem != page and f"({label})=" in p.read_text()]
        assert not others, (label, others)
        assert explain.link(pattern) == (
            f"{explain.SITE}book/{page}.html#{label}")


# -- bad input: one line on stderr, exit status 2 ---------------------------

def bad(capsys, *paths):
    code = explain.main([str(p) for p in paths])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.timeout(900)
def test_bad_input_says_so_in_one_line(jobs, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert "empty directory" in bad(capsys, tmp_path / "empty")
    dump = (jobs["zero-first"] / "fr" / "rank_0").read_bytes()
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "rank_0").write_bytes(dump[:len(dump) // 2])
    assert "truncated" in bad(capsys, tmp_path / "cut")
    # Another torch writes another format version (torch 2.13: "2.10").
    other = pickle.loads(dump)
    other["version"] = "2.4"
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "rank_0").write_bytes(pickle.dumps(other))
    assert "another torch" in bad(capsys, tmp_path / "old")
    (tmp_path / "frames.txt").write_text(
        "Process 1234: python train.py\nPython v3.11.7\n\n"
        'Thread 1234 (idle): "MainThread"\n')
    assert "no Python frames" in bad(capsys, tmp_path / "frames.txt")
    (tmp_path / "mixed").mkdir()
    # Two jobs, one after the other (the order of JOBS): explain tells
    # their dumps apart by when they reached the same collective.
    assert SPANS["no-partner"][0] > SPANS["zero-first"][1], SPANS
    shutil.copy(jobs["zero-first"] / "fr" / "rank_0", tmp_path / "mixed")
    shutil.copy(jobs["no-partner"] / "fr" / "rank_1", tmp_path / "mixed")
    assert "different jobs" in bad(capsys, tmp_path / "mixed")
    # Nothing else broken: the same command on good input still answers.
    assert explain.main([str(jobs["zero-first"] / "fr")]) == 0


@pytest.mark.timeout(900)
def test_the_console_script_runs(jobs):
    done = subprocess.run(
        [str(pathlib.Path(sys.executable).with_name("ddpdemo-explain")),
         str(jobs["zero-first"])], capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 0, done.stderr
    assert section(done.stdout) == [explain.link("zero-first")]


@pytest.mark.timeout(900)
def test_dumps_are_read_with_torchs_loader_without_importing_torch(jobs):
    # The format taken without importing torch is the one this torch
    # writes, and a job's dumps are then read by torch's own loader code
    # with torch never imported (most of the command's time otherwise).
    from ddpdemo.triage import jobfiles
    assert jobfiles.writer_version() == jobfiles.KNOWN_VERSION
    code = ("import sys, ddpdemo.explain as e, ddpdemo.triage.jobfiles as j; "
            "out = e.explain(sys.argv[1:]); "
            "print(j.torch_read_dump().__module__, 'torch' in sys.modules); "
            "print(out)")
    done = subprocess.run([sys.executable, "-c", code,
                           str(jobs["zero-first"] / "fr")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("_ddpdemo_loader False\n"), done.stdout
    assert section(done.stdout) == [explain.link("zero-first")]


# -- a job with DataLoader workers, read while it hangs and after -----------

@pytest.mark.timeout(900)
def test_while_it_hangs_the_stacks_alone_are_read(workers_job):
    folder = workers_job
    alone, everything, mixed, status = [
        (folder / f"during-{n}.txt").read_text()
        for n in ("alone", "everything", "mixed", "status")]
    assert status == "rc=0 still hanging=True", status
    # The page's loop skipped the 4 workers: one block per rank.
    assert re.findall(r"^RANK=\d+$", (folder / "stacks.txt").read_text(),
                      re.M) == ["RANK=0", "RANK=1"]
    for text in (alone, everything, mixed):
        assert re.search(r"rank 0: waiting in barrier \(.*from \S+ in "
                         r"torch_distributed_zero_first", text), text
        assert "rank 1: waiting in all_reduce" in text, text
    # What does not exist yet is named, and the rest is read.
    assert "Not read: fr, because an empty directory." in everything
    assert "No report in torchrun.log, because" in everything \
        or "Not read: torchrun.log, because" in everything, everything
    assert "1 DataLoader workers' stacks, left out" in mixed, mixed


@pytest.mark.timeout(900)
def test_after_it_ended_everything_is_read(workers_job):
    folder = workers_job
    text = report(folder / "fr", folder / "stacks.txt",
                  folder / "torchrun.log")
    seq = reference_seq(folder, [0, 1])
    assert f"collective #{seq}: barrier on rank 0" in text, text
    assert section(text) == [explain.link("zero-first")], text
    assert "Not read" not in text and "No report" not in text, text


def test_a_rank_torchrun_stopped_is_not_dead():
    # A plain job (tests/data/explain/README.md): rank 0 failed first,
    # then torchrun sent rank 1 SIGTERM (its report: exitcode -15).
    log = (DATA / "torchrun_sigterm.log").read_text()
    assert "exitcode  : -15" in log and "closing signal SIGTERM" in log
    text = report(DATA / "torchrun_sigterm.log")
    assert "rank 1: no stack; then stopped by torchrun (SIGTERM) once " \
           "rank 0 had failed" in text, text
    assert "died" not in text and "gone" not in text, text
    assert explain.link("dead-rank") not in text, text


def test_an_interrupted_torchrun_wrote_no_report(capsys):
    # Ctrl-C on torchrun: no report, no rank's lines. Alone: nothing to
    # read (exit 2); beside stacks: named, and the stacks are read.
    err = bad(capsys, DATA / "torchrun_interrupted.log")
    assert "interrupted (signal 2)" in err, err
    text = report(DATA / "torchrun_interrupted.log",
                  DATA / "stacks_with_workers.txt")
    assert "Not read: " in text and "interrupted (signal 2)" in text, text
    assert "4 DataLoader workers' stacks, left out" in text, text
    assert re.search(r"rank 0: waiting in barrier .*"
                     r"torch_distributed_zero_first", text), text


def test_a_missing_input_beside_a_good_one_is_named(tmp_path):
    text = report(tmp_path / "fr", DATA / "stacks_with_workers.txt")
    assert f"Not read: {tmp_path / 'fr'}, because no such file" in text
    assert "rank 1: waiting in all_reduce" in text, text
