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
from book/triage.md) and runs explain while the job still hangs too.
The jobs run once, in a module-scoped fixture, two at a time: most of a
job is its ranks waiting out the group's timeout, which two jobs can do
side by side on 2 cores. Fast checks read files real plain torchrun jobs wrote
(tests/data/explain).
Where this machine refuses ptrace, the tests fail with py-spy's reason.
"""
import json
import os
import pathlib
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

import ddpdemo
from ddpdemo import ledger
from ddpdemo.triage import explain
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
    # The near neighbours: each pattern's stack shape, another cause.
    "epoch-barrier": (["-m", "ddpdemo.examples.hang_patterns",
                       "epoch-barrier"], 2, {0: "=barrier", 1: "backward"},
                      None),
    "rank0-broadcast": (["-m", "ddpdemo.examples.hang_patterns",
                         "rank0-broadcast"], 2,
                        {0: "=broadcast", 1: "=barrier"}, None),
    "wait-other": (["-m", "ddpdemo.examples.hang_patterns", "wait-other"],
                   2, {0: "=wait_other", 1: "=barrier"}, None),
    "slow-first": (["-m", "ddpdemo.examples.hang_patterns", "slow-first"],
                   2, {0: "=slow_first", 1: "=barrier"}, None),
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
    names = re.findall(r"^\s+(\S+) \(", main, re.M)
    if want.startswith("="):
        # The innermost frame by its whole name: `Condition.wait` (a rank
        # still starting its threads) is not the scenario's `wait`.
        return names[:1] == [want[1:]]
    # py-spy writes `Tensor.backward`
    return want in [f.split(".")[-1] for f in names]


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
    text = (BOOK / "triage.md").read_text()
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
                # and as many readers take them: py-spy's dumps alone
                (folder / "plain.txt").write_text("".join(
                    stacks[r] + "\n" for r in sorted(stacks)))
                (folder / "pids.json").write_text(json.dumps(pids))
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
    `train.py`: this job's script), then explain on what exists (as
    data: `--json`); then py-spy's dumps alone, and the dumps that
    SIGUSR2 makes the job write, read while it still hangs."""
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
    everything = subprocess.run(
        [sys.executable, "-m", "ddpdemo.explain", "--json", "fr",
         "stacks.txt", "torchrun.log"], cwd=folder, capture_output=True,
        text=True, timeout=120)
    during = {
        "alone": explain.findings([str(folder / "stacks.txt")]),
        "mixed": explain.findings([str(folder / "with_worker.txt")]),
        "everything": json.loads(everything.stdout or "null"),
        "status": [everything.returncode, everything.stderr]}
    # py-spy's dumps of the ranks alone, with no RANK= line.
    (folder / "plain.txt").write_text("".join(
        py_spy(pids[r]) + "\n" for r in sorted(pids)))
    (folder / "pids.json").write_text(json.dumps(pids))
    # A gloo job's dump can be written while it hangs: SIGUSR2, which
    # ddpdemo.launch answers by writing it (the page's step 0 says so).
    for pid in pids.values():
        os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + 60
    while not all((folder / "fr" / f"rank_{r}").exists() for r in pids):
        assert time.monotonic() < deadline, "no dump after SIGUSR2"
        time.sleep(0.1)
    during["dumps"] = explain.findings([str(folder / "fr")])
    during["still_hanging"] = launcher.poll() is None
    (folder / "during.json").write_text(json.dumps(during))


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


def report(*paths, **kw):
    """explain's findings, as data (what --json prints)."""
    return explain.findings([str(p) for p in paths], **kw)


def evidence(folder):
    return report(folder / "fr", folder / "stacks.txt",
                  folder / "torchrun.log")


def reference_seq(folder, ranks):
    """The parting number as the book's Ledger reads the same dumps'
    default group."""
    records = {}
    for r in ranks:
        path = folder / "fr" / f"rank_{r}"
        if path.exists():
            records[r] = {"buffer_size": 2000,
                          "dump": pickle.loads(path.read_bytes())}
    found = ledger.Ledger(len(ranks), records,
                          dead=[r for r in ranks if r not in records])
    return found.finding.seq


def named(data):
    return [(p["pattern"], p["evidence"]) for p in data["patterns"]]


def urls(data):
    return [p["url"] for p in data["patterns"]]


def sides(parting):
    """{op's name: ranks} at a parting."""
    return {s["op"].split()[0]: s["ranks"] for s in parting["sides"]}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name, pattern, kind, side", [
    ("zero-first", "zero-first", "missing", {"barrier": [0]}),
    ("no-partner", "no-partner", "missing", {"all_reduce": [0]}),
    ("ddp-forward", "ddp-forward", "disagree",
     {"broadcast": [0], "barrier": [1]}),
    ("rank-0-only", "rank-only-branch", "disagree",
     {"all_reduce": [0], "barrier": [1]}),
    ("host-waits", "host-waits", "missing", {"all_reduce": [0]}),
])
def test_each_pattern_names_ranks_collective_and_section(jobs, name, pattern,
                                                         kind, side):
    folder = jobs[name]
    data = evidence(folder)
    first = data["partings"][0]
    assert first["group"] == "0" and first["kind"] == kind, first
    assert first["seq"] == reference_seq(folder, [0, 1]), first
    assert sides(first) == side, first
    assert named(data) == [(pattern, "ledger")], data["patterns"]
    assert data["patterns"][0]["seq"] == first["seq"]
    assert urls(data) == [explain.link(pattern)]
    assert data["ranks"][0]["where"]["call"]["file"], data["ranks"][0]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name, near, side", [
    # The falsifying case: a DDP job, rank 0's barrier at the end of
    # epoch 0 beside rank 1's gradient all_reduce in epoch 1's backward:
    # the stack shape of no-partner (a rank in backward) and of
    # zero-first (rank 0 alone in a barrier), but the ranks disagree.
    ("epoch-barrier", ("no-partner", "zero-first"),
     {"barrier": [0], "all_reduce": [1]}),
    # A broadcast on rank 0 alone, outside DDP's forward.
    ("rank0-broadcast", ("ddp-forward",),
     {"broadcast": [0], "barrier": [1]}),
    # Rank 0's host waits, but rank 1 made another collective there.
    ("wait-other", ("host-waits",), {"all_reduce": [0], "barrier": [1]}),
])
def test_a_near_neighbour_is_named_for_what_it_is(jobs, name, near, side):
    folder = jobs[name]
    data = evidence(folder)
    first = data["partings"][0]
    assert first["kind"] == "disagree" and sides(first) == side, first
    assert first["seq"] == reference_seq(folder, [0, 1]), first
    assert named(data) == [("rank-only-branch", "ledger")], data["patterns"]
    hit = data["patterns"][0]
    assert hit["seq"] == first["seq"] and hit["ranks"] == [0, 1], hit
    assert hit["url"] == explain.link("rank-only-branch")
    assert not set(near) & {p for p, _ in named(data)}
    assert {"topic": "unconfirmed", "text": hit["unconfirmed"][0]} in \
        data["cannot_tell"]


@pytest.mark.timeout(900)
def test_the_falsifying_case_on_its_stacks(jobs):
    # Where the two ranks stood: rank 0 in the barrier, from the script's
    # `if rank == 0:` line; rank 1 in backward (autograd, DDP's hook).
    folder = jobs["epoch-barrier"]
    ranks = evidence(folder)["ranks"]
    zero, one = (r["where"] for r in ranks)
    assert zero["call"]["function"] == "barrier", zero
    assert "dist.barrier()" in source(zero["from"][0])
    assert one["call"]["file"].startswith("torch/autograd/"), one
    assert ".backward()" in source(one["from"][0])


def source(frame):
    path = pathlib.Path(ddpdemo.__file__).parents[1] / frame["file"]
    return path.read_text().splitlines()[frame["line"] - 1]


# -- stacks without ranks: py-spy's dumps alone ----------------------------

def pids(folder):
    return {int(r): p for r, p in
            json.loads((folder / "pids.json").read_text()).items()}


@pytest.mark.timeout(900)
def test_stacks_without_ranks_are_placed_by_pid(workers_job):
    folder = workers_job
    data = report(folder / "plain.txt")
    assert data["ranks"] == []
    by_pid = {p["pid"]: p["where"] for p in data["processes"]}
    assert set(by_pid) == set(pids(folder).values())
    zero, one = (by_pid[pids(folder)[r]] for r in (0, 1))
    assert zero["call"]["function"] == "barrier"
    assert "torch_distributed_zero_first" in [
        f["function"] for f in zero["from"]], zero
    assert one["call"]["function"] == "all_reduce", one
    # The pattern, from the stacks alone, for the process it is about;
    # its rank it cannot confirm.
    assert named(data) == [("zero-first", "stacks")], data["patterns"]
    hit = data["patterns"][0]
    assert hit["pids"] == [pids(folder)[0]] and hit["ranks"] == []
    unknown = [c["text"] for c in data["cannot_tell"]
               if c["topic"] == "rank-unknown"]
    assert [f"process {pids(folder)[r]} is" in text
            for r, text in enumerate(unknown)] == [True, True], unknown


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", ["slow-first", "epoch-barrier"])
def test_stacks_alone_name_nothing_they_cannot_tell(jobs, name):
    # slow-first: rank 1 in zero_first's barrier while rank 0 still
    # builds its data: not a deadlock. epoch-barrier: rank 0 in a
    # barrier, rank 1 in backward: no-partner or a rank-only branch,
    # which only the dumps tell apart.
    data = report(jobs[name] / "plain.txt")
    assert len(data["processes"]) == 2 and data["patterns"] == [], data


@pytest.mark.timeout(900)
def test_torchruns_report_gives_a_stack_its_rank(jobs):
    # The report names each failed rank's pid: a stack of that pid is
    # that rank's.
    folder = jobs["epoch-barrier"]
    data = report(folder / "plain.txt", folder / "torchrun.log")
    assert data["processes"] == []
    for r, pid in pids(folder).items():
        rank = data["ranks"][r]
        assert rank["pid"] == pid and rank["where"] is not None
        assert rank["rank_from"] == "torchrun's report (its pid)"


# -- what torchrun's output alone tells ------------------------------------

@pytest.mark.timeout(900)
def test_a_rank_killed_with_9(jobs):
    folder = jobs["dead-rank"]
    assert not (folder / "fr" / "rank_1").exists()   # it died dumpless
    log = (folder / "torchrun.log").read_text()
    assert "exitcode  : -9" in log, log
    for data in (evidence(folder), report(folder / "torchrun.log")):
        ended = data["ranks"][1]["ended"]
        assert ended["how"] == "killed" and ended["signal"] == "SIGKILL"
        assert "out-of-memory" in ended["meaning"]
        assert "dmesg" in ended["meaning"] and "journalctl -k" in \
            ended["meaning"]
        assert ("dead-rank", "torchrun") in named(data)
    data = evidence(folder)
    # Rank 0 waited in all_reduce #3: rank 1 stalled before its third.
    first = data["partings"][0]
    assert (first["kind"], first["seq"], first["ranks"]) == ("dead", 3, [1])
    assert sides(first) == {"all_reduce": [0]}
    assert named(data) == [("dead-rank", "torchrun")]
    # Rank 0's dump alone: one ledger, nothing to compare it with, and
    # the other ranks unknown: no parting, and it says so.
    alone = report(folder / "fr")
    assert alone["partings"] == [] and alone["patterns"] == [], alone
    assert "world" in [c["topic"] for c in alone["cannot_tell"]]


def launch_failure(path):
    data = report(path)
    assert data["ranks"] == [] and data["partings"] == [], data
    assert len(data["patterns"]) == 1, data["patterns"]
    return data["patterns"][0]


def test_a_static_rendezvous_waiting_for_clients():
    # torchrun's output, node 0 of two: node 1 never came (README.md).
    hit = launch_failure(DATA / "torchrun_static_rendezvous.log")
    assert hit["pattern"] == "static-rendezvous"
    assert re.fullmatch(r"torch\.distributed\.DistStoreError: Timed out "
                        r"after \d+ seconds waiting for clients\. 1/2 "
                        r"clients joined\.", hit["line"]), hit
    assert hit["url"] == explain.link("static-rendezvous")


def test_c10ds_rendezvous_timeout():
    hit = launch_failure(DATA / "torchrun_rendezvous_timeout.log")
    assert hit["pattern"] == "rendezvous-timeout"
    assert hit["line"] == ("torch.distributed.elastic.rendezvous.api."
                           "RendezvousTimeoutError"), hit


@pytest.mark.timeout(300)
def test_the_master_port_taken(tmp_path):
    # Live: torchrun on a port another socket holds (loopback).
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        (tmp_path / "train.py").write_text("print('ran')\n")
        done = subprocess.run(
            [str(pathlib.Path(sys.executable).with_name("torchrun")),
             "--nnodes", "1", "--nproc-per-node", "1", "--master-addr",
             "127.0.0.1", "--master-port", str(port), "train.py"],
            cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert done.returncode != 0 and "ran" not in done.stdout
    (tmp_path / "torchrun.log").write_text(done.stdout + done.stderr)
    hit = launch_failure(tmp_path / "torchrun.log")
    assert hit["pattern"] == "port-in-use"
    assert f"port: {port}," in hit["line"] and "EADDRINUSE" in hit["line"]


@pytest.mark.timeout(900)
def test_two_unrelated_hangs_in_one_job(jobs):
    folder = jobs["two-hangs"]
    data = evidence(folder)
    parts = {p["group"]: p for p in data["partings"]}
    # Groups 2 and 3 are the pairs (0: default, 1: the report group).
    assert set(parts) == {"2", "3"}, parts
    assert (parts["2"]["kind"], parts["2"]["seq"]) == ("disagree", 2)
    assert sides(parts["2"]) == {"all_reduce": [0], "barrier": [1]}
    # Rank 2's extra batch met rank 3's end-of-epoch barrier: at that
    # number the ranks disagree, as in the falsifying case, so which
    # side is the extra one is left open, with both readings.
    assert parts["3"]["kind"] == "disagree", parts["3"]
    assert sides(parts["3"]) == {"all_reduce": [2], "barrier": [3]}
    assert sorted((p["pattern"], p["group"]) for p in data["patterns"]) \
        == [("rank-only-branch", "2"), ("rank-only-branch", "3")]
    extra = {p["group"]: p["unconfirmed"] for p in data["patterns"]}
    assert any("one more batch on rank 2" in u for u in extra["3"]), extra
    assert not any("one more batch" in u for u in extra["2"]), extra


def test_every_section_label_is_on_its_page():
    for pattern, (page, label) in explain.SECTIONS.items():
        source = (BOOK / f"{page}.ipynb").read_text()
        assert f"({label})=" in source, (pattern, page, label)
        others = [p.name for p in BOOK.glob("*.*") if p.is_file()
                  and p.stem != page and f"({label})=" in p.read_text()]
        assert not others, (label, others)
        assert explain.link(pattern) == (
            f"{explain.SITE}book/{page}.html#{label}")


# -- the command: argparse, --json, the book's address ---------------------

def command(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "ddpdemo.explain", *args],
                          capture_output=True, text=True, timeout=300,
                          env=env, cwd=cwd)


def test_usage_goes_to_stderr_with_status_2():
    for args in ([], ["--bogus", str(DATA)]):
        done = command(*args)
        assert done.returncode == 2 and done.stdout == "", done
        assert done.stderr.startswith("usage: "), done.stderr
    done = command("--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: ")
    # The help warns that a dump is a pickle.
    assert "pickle" in done.stdout and "trust" in done.stdout


def test_json_and_the_books_address():
    log = str(DATA / "torchrun_static_rendezvous.log")
    data = json.loads(command("--json", log).stdout)
    assert data == report(log)
    assert urls(data) == [f"{explain.SITE}book/job_failures.html"
                          f"#rendezvous-timeout"]
    here = "file:///tmp/book/"
    moved = json.loads(command("--json", "--site", here, log).stdout)
    env = dict(os.environ, **{explain.SITE_VAR: here})
    by_env = json.loads(command("--json", log, env=env).stdout)
    for got in (moved, by_env, report(log, base=here)):
        assert urls(got) == [f"{here}book/job_failures.html"
                             f"#rendezvous-timeout"], got["patterns"]


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
    # A valid header, malformed entries.
    for entries in ([{"collective_seq_id": 1}], "x", [None],
                    [dict(other["entries"][0], process_group=("0",))]):
        (tmp_path / "malformed").mkdir(exist_ok=True)
        (tmp_path / "malformed" / "rank_0").write_bytes(pickle.dumps(
            dict(pickle.loads(dump), entries=entries)))
        assert "malformed" in bad(capsys, tmp_path / "malformed")
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


class Marker:
    """A pickle that, unpickled, creates a file: proof of unpickling."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


@pytest.mark.timeout(900)
def test_a_directory_unpickles_only_files_named_as_dumps(jobs, tmp_path):
    folder = tmp_path / "fr"
    shutil.copytree(jobs["zero-first"] / "fr", folder)
    marker = tmp_path / "unpickled"
    (folder / "notes.pkl").write_bytes(pickle.dumps(Marker(str(marker))))
    (folder / "old").mkdir()          # not read: not recursive
    shutil.copy(folder / "rank_1", folder / "old" / "rank_2")
    data = report(folder)
    assert not marker.exists()
    assert [u["path"] for u in data["not_read"]] == [
        str(folder / "notes.pkl")], data["not_read"]
    assert [r["rank"] for r in data["ranks"]] == [0, 1]
    # A dump named twice (its folder, then itself) is read once.
    again = report(folder, folder / "rank_0")
    assert again["read"] == data["read"], again["read"]


@pytest.mark.timeout(900)
def test_the_console_script_runs(jobs):
    done = subprocess.run(
        [str(pathlib.Path(sys.executable).with_name("ddpdemo-explain")),
         "--json", str(jobs["zero-first"] / "fr")], capture_output=True,
        text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert urls(json.loads(done.stdout)) == [explain.link("zero-first")]


@pytest.mark.timeout(900)
def test_the_source_line_is_found_from_any_folder(jobs, tmp_path):
    # host-waits reads the waiting line of the job's own code, whose path
    # py-spy gives relative to a folder on the job's sys.path; a reader
    # may run explain anywhere (here: an empty folder).
    folder = jobs["host-waits"]
    done = command("--json", str(folder / "fr"), str(folder / "stacks.txt"),
                   str(folder / "torchrun.log"), cwd=tmp_path)
    assert named(json.loads(done.stdout)) == [("host-waits", "ledger")]


@pytest.mark.timeout(900)
def test_dumps_are_read_with_torchs_loader_without_importing_torch(jobs):
    # The format taken without importing torch is the one this torch
    # writes, and a job's dumps are then read by torch's own loader code
    # with torch never imported (most of the command's time otherwise).
    from ddpdemo.triage import jobfiles
    assert jobfiles.writer_version() == jobfiles.KNOWN_VERSION
    code = ("import sys, json, ddpdemo.explain as e, "
            "ddpdemo.triage.jobfiles as j; "
            "out = e.findings(sys.argv[1:]); "
            "print(j.torch_read_dump().__module__, 'torch' in sys.modules); "
            "print(json.dumps(out))")
    done = subprocess.run([sys.executable, "-c", code,
                           str(jobs["zero-first"] / "fr")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    head, data = done.stdout.split("\n", 1)
    assert head == "_ddpdemo_loader False", done.stdout
    assert urls(json.loads(data)) == [explain.link("zero-first")]


# -- what a dump can show, per backend (step 0 says the same) --------------

STEP0 = (BOOK / "triage.md").read_text().split("## Step 0")[1] \
    .split("\n## ")[0]


def page_says(*sentences):
    """Each sentence is on the page's step 0 (line breaks aside)."""
    flat = " ".join(STEP0.split())
    for sentence in sentences:
        assert sentence in flat, sentence


@pytest.mark.timeout(900)
def test_a_gloo_dump_can_be_written_while_it_hangs(workers_job):
    page_says("gloo writes no dump itself: a dump exists only if the job "
              "writes it, and it can at any moment of a hang",
              "`kill -USR2 <pid>`")
    during = json.loads((workers_job / "during.json").read_text())
    assert during["still_hanging"] is True
    data = during["dumps"]
    assert [r["rank"] for r in data["ranks"]] == [0, 1]
    first = data["partings"][0]
    assert first["kind"] == "disagree", first
    assert sides(first) == {"barrier": [0], "all_reduce": [1]}
    # and such a dump tells the collective still waited on from those done
    page_says("a dump written during the hang leaves the collective still "
              "waited on `retired: False`, and its `pg_status` gives each "
              "group's `last_completed_collective`")
    for r in data["ranks"]:
        last = r["last_collective"]
        assert last["pending"] is True, r
        assert last["last_completed"] == last["seq"] - 1, r
    started = [c["text"] for c in data["cannot_tell"]
               if c["topic"] == "started"]
    assert "the one still waited on is not retired" in started[0], started


@pytest.mark.timeout(300)
def test_gloo_writes_no_dump_itself_and_leaves_entries_scheduled(tmp_path):
    # A gloo collective times out with TORCH_FR_DUMP_TEMP_FILE set and
    # nothing of ddpdemo in the job: no dump appears. The job then
    # writes its own, in which every entry is "scheduled".
    page_says("every entry stays \"scheduled\"")
    code = (
        "import datetime, os, pickle, sys, torch, torch.distributed as d\n"
        "from torch._C._distributed_c10d import _dump_fr_trace\n"
        "rank = int(sys.argv[1])\n"
        "store = d.FileStore(sys.argv[2], 2)\n"
        "d.init_process_group('gloo', store=store, rank=rank, "
        "world_size=2, timeout=datetime.timedelta(seconds=3))\n"
        "d.all_reduce(torch.ones(2))\n"
        "if rank == 0:\n"
        "    try:\n"
        "        d.barrier()\n"
        "    except RuntimeError:\n"
        "        print('timed out', os.path.exists(sys.argv[3] + '0'))\n"
        "    store.set('done', '1')\n"
        "    open(sys.argv[3] + '0', 'wb').write(_dump_fr_trace(\n"
        "        includeCollectives=True, includeStackTraces=False,\n"
        "        onlyActive=False))\n"
        "else:\n"
        "    store.wait(['done'], datetime.timedelta(seconds=60))\n")
    prefix = str(tmp_path / "fr_")
    env = dict(os.environ, TORCH_FR_DUMP_TEMP_FILE=prefix,
               TORCH_FR_BUFFER_SIZE="100")
    ranks = [subprocess.Popen([sys.executable, "-c", code, str(r),
                               str(tmp_path / "store"), prefix],
                              env=env, stdout=subprocess.PIPE, text=True)
             for r in (0, 1)]
    outs = [p.communicate(timeout=120)[0] for p in ranks]
    assert outs[0].strip() == "timed out False", outs
    entries = pickle.loads((tmp_path / "fr_0").read_bytes())["entries"]
    assert [e["profiling_name"] for e in entries] == ["gloo:all_reduce",
                                                      "gloo:barrier"]
    assert {e["state"] for e in entries} == {"scheduled"}
    data = report(tmp_path / "fr_0")
    assert "started" in [c["topic"] for c in data["cannot_tell"]]


def test_what_an_nccl_dump_says_is_in_the_installed_headers():
    # NCCL cannot run here: the sentences rest on the installed torch's
    # headers, re-found at every run.
    page_says("TORCH_NCCL_ENABLE_TIMING=1",
              "an NCCL entry stays \"scheduled\" until \"completed\"")
    import torch
    include = pathlib.Path(torch.__file__).parent / "include" / "torch" / \
        "csrc" / "distributed" / "c10d"
    header = (include / "ProcessGroupNCCL.hpp").read_text()
    detail = (include / "FlightRecorderDetail.hpp").read_text()
    for text in ("Enable recording start-events for all ProcessGroupNCCL",
                 "enableTiming_ is always true if desyncDebug_",
                 '"TORCH_NCCL_ENABLE_TIMING"', '"TORCH_NCCL_DESYNC_DEBUG"',
                 "Control whether dumping debug info on watchdog"):
        assert text in " ".join(header.split()), text
    assert re.search(
        r"if \(e\.time_discovered_completed_\.has_value\(\)\) \{\s*"
        r"dict\.insert\(state_key, completed_state\);\s*\} else if "
        r"\(e\.time_discovered_started_\.has_value\(\)\) \{\s*"
        r"dict\.insert\(state_key, started_state\);\s*\} else \{\s*"
        r"dict\.insert\(state_key, scheduled_state\);", detail)
    assert "if (r.start_ != nullptr) {" in detail


def test_explain_says_which_variable_an_nccl_dump_lacks(tmp_path):
    # A real dump of a one-rank gloo group, relabelled as NCCL's (this
    # machine has no NCCL): with no start event on any entry, explain
    # names the variables to set before the job; with one, it does not.
    code = (
        "import pickle, sys, torch, torch.distributed as d\n"
        "from torch._C._distributed_c10d import _dump_fr_trace\n"
        "d.init_process_group('gloo', rank=0, world_size=1, "
        "store=d.HashStore())\n"
        "d.all_reduce(torch.ones(2))\n"
        "d.barrier()\n"
        "open(sys.argv[1], 'wb').write(_dump_fr_trace(\n"
        "    includeCollectives=True, includeStackTraces=False,\n"
        "    onlyActive=False))\n")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "gloo_0")],
                   check=True, timeout=120,
                   env=dict(os.environ, TORCH_FR_BUFFER_SIZE="100"))
    dump = pickle.loads((tmp_path / "gloo_0").read_bytes())
    for e in dump["entries"]:
        e["profiling_name"] = e["profiling_name"].replace("gloo:", "nccl:")
    (tmp_path / "nccl_0").write_bytes(pickle.dumps(dump))
    said = {c["topic"]: c["text"]
            for c in report(tmp_path / "nccl_0")["cannot_tell"]}
    assert explain.NCCL_TIMING in said["started"], said
    assert "TORCH_NCCL_ENABLE_TIMING=1" in explain.NCCL_TIMING
    assert "TORCH_NCCL_DESYNC_DEBUG=1" in explain.NCCL_TIMING
    # no claim the installed torch cannot back (ProcessGroupNCCL.cpp)
    assert "TORCH_DISTRIBUTED_DEBUG" not in explain.NCCL_TIMING
    dump["entries"][0]["time_discovered_started_ns"] = 1
    (tmp_path / "timed_0").write_bytes(pickle.dumps(dump))
    said = [c["topic"] for c in report(tmp_path / "timed_0")["cannot_tell"]]
    assert "started" not in said, said


# -- a job with DataLoader workers, read while it hangs and after -----------

@pytest.mark.timeout(900)
def test_while_it_hangs_the_stacks_alone_are_read(workers_job):
    folder = workers_job
    during = json.loads((folder / "during.json").read_text())
    assert during["status"][0] == 0, during["status"]
    # The page's loop skipped the 4 workers: one block per rank.
    assert re.findall(r"^RANK=\d+$", (folder / "stacks.txt").read_text(),
                      re.M) == ["RANK=0", "RANK=1"]
    for data in (during["alone"], during["everything"], during["mixed"]):
        zero, one = (r["where"] for r in data["ranks"])
        assert zero["call"]["function"] == "barrier", zero
        assert "torch_distributed_zero_first" in [
            f["function"] for f in zero["from"]], zero
        assert one["call"]["function"] == "all_reduce", one
        assert named(data) == [("zero-first", "stacks")], data["patterns"]
        assert data["patterns"][0]["ranks"] == [0]
    # What does not exist yet is named, and the rest is read.
    unread = {u["path"]: u["why"] for u in during["everything"]["not_read"]}
    assert unread.get("fr") == "an empty directory", unread
    assert "torchrun.log" in unread or during["everything"]["notes"]
    assert during["mixed"]["read"]["workers"] == 1, during["mixed"]["read"]
    assert during["alone"]["read"]["workers"] == 0


@pytest.mark.timeout(900)
def test_after_it_ended_everything_is_read(workers_job):
    folder = workers_job
    data = evidence(folder)
    first = data["partings"][0]
    assert first["seq"] == reference_seq(folder, [0, 1])
    assert sides(first)["barrier"] == [0], first
    assert named(data) == [("zero-first", "ledger")], data["patterns"]
    assert data["not_read"] == [] and data["notes"] == [], data


def test_a_rank_torchrun_stopped_is_not_dead():
    # A plain job (tests/data/explain/README.md): rank 0 failed first,
    # then torchrun sent rank 1 SIGTERM (its report: exitcode -15).
    log = (DATA / "torchrun_sigterm.log").read_text()
    assert "exitcode  : -15" in log and "closing signal SIGTERM" in log
    data = report(DATA / "torchrun_sigterm.log")
    assert data["ranks"][1]["ended"] == {
        "how": "stopped by torchrun", "signal": "SIGTERM", "after_rank": 0}
    assert data["patterns"] == [], data["patterns"]


def test_an_interrupted_torchrun_wrote_no_report(capsys):
    # Ctrl-C on torchrun: no report, no rank's lines. Alone: nothing to
    # read (exit 2); beside stacks: named, and the stacks are read.
    err = bad(capsys, DATA / "torchrun_interrupted.log")
    assert "interrupted (signal 2)" in err, err
    data = report(DATA / "torchrun_interrupted.log",
                  DATA / "stacks_with_workers.txt")
    assert "interrupted (signal 2)" in data["not_read"][0]["why"], data
    assert data["read"]["workers"] == 4, data["read"]
    zero = data["ranks"][0]["where"]
    assert zero["call"]["function"] == "barrier"
    assert "torch_distributed_zero_first" in [
        f["function"] for f in zero["from"]]


def test_a_missing_input_beside_a_good_one_is_named(tmp_path):
    data = report(tmp_path / "fr", DATA / "stacks_with_workers.txt")
    assert data["not_read"] == [{"path": str(tmp_path / "fr"),
                                 "why": "no such file or directory"}]
    assert data["ranks"][1]["where"]["call"]["function"] == "all_reduce"


# -- a falsifying reader's real jobs (tests/data/explain/falsify) -----------

FALSIFY = DATA / "falsify"


def case(name):
    """explain's findings on one of the falsifier's stored jobs: its
    dumps, its stacks (where taken) and torchrun's output."""
    folder = FALSIFY / name
    return report(*sorted(folder.iterdir()))


def test_dumps_written_under_detail_are_read_not_a_traceback(capsys):
    # TORCH_DISTRIBUTED_DEBUG=DETAIL: every entry's group is ('', ''),
    # and DETAIL's own fingerprint all_gathers share its numbering, with
    # gaps no rank holds (the ledger once took a gap for a parting and
    # failed on its empty ops: IndexError).
    folder = FALSIFY / "detail"
    dump = pickle.loads((folder / "fr" / "rank_0").read_bytes())
    assert {e["process_group"] for e in dump["entries"]} == {("", "")}
    assert explain.main([str(p) for p in sorted(folder.iterdir())]) == 0
    out = capsys.readouterr().out
    assert "TORCH_DISTRIBUTED_DEBUG=DETAIL" in out, out
    assert "not compared" in out, out
    data = case("detail")
    assert data["partings"] == [], data["partings"]
    # pg_status's number of the default group, not DETAIL's own entries'
    assert [r["last_collective"]["seq"] for r in data["ranks"]] == [1] * 3
    # the runtime's ledger skips a number no rank holds
    gap = {r: [dict(seq=s, op="all_reduce", what="", state="scheduled",
                    retired=True, site="", backend="gloo")
               for s in (1, 3)] for r in (0, 1)}
    assert ledger.first_divergence(gap).kind == "agree"


@pytest.mark.parametrize("name, seq, op", [
    # rank 1 sleeps before step 1's forward; rank 0 waits in DDP's
    # training forward (its broadcast): not a validation on rank 0
    ("ddp_stall", 5, "broadcast [3] Int"),
    # rank 1 sleeps between step 2's forward and backward; rank 0 waits
    # in backward: not one more batch on rank 0
    ("slowloss", 8, "all_reduce [10] Float"),
])
def test_a_partner_still_in_its_own_code_is_not_called_missing(name, seq,
                                                               op):
    data = case(name)
    first = data["partings"][0]
    assert (first["kind"], first["seq"]) == ("missing", seq), first
    assert sides(first) == {op.split()[0]: [0]} and first["running"] == [1]
    assert data["patterns"] == [], data["patterns"]
    late = [c["text"] for c in data["cannot_tell"]
            if c["topic"] == "still-running"]
    assert late and late[0].startswith(
        f"whether rank 1 will still reach collective #{seq}: "), late
    text = explain.render(data)
    assert (f"collective #{seq}: {op} on rank 0; rank 1 has not called "
            f"it yet") in text, text


def test_zero_first_where_the_ranks_disagree_keeps_the_caveat():
    # rank 0 made one all_reduce more, then both entered
    # torch_distributed_zero_first: at #3, rank 0's all_reduce beside
    # rank 1's barrier. Which one is the extra one, the ledgers cannot say.
    data = case("zf_extra")
    first = data["partings"][0]
    assert first["kind"] == "disagree" and first["seq"] == 3, first
    assert sides(first) == {"all_reduce": [0], "barrier": [1]}, first
    hit = data["patterns"][0]
    assert hit["pattern"] == "zero-first" and hit["ranks"] == [1], hit
    assert "never enter" not in hit["words"].split(":")[0], hit["words"]
    assert any(c["text"].startswith("which side's collective is the extra "
                                    "one") for c in data["cannot_tell"])


def test_an_evicted_ledger_is_read_from_pg_status():
    # A 4-entry ring buffer: rank 0's seven subgroup all_reduces evicted
    # its default-group entries; its pg_status still says it enqueued #2.
    dump = pickle.loads((FALSIFY / "evict" / "fr" / "rank_0").read_bytes())
    assert {e["process_group"][0] for e in dump["entries"]} == {"2"}
    assert dump["pg_status"]["0"]["last_enqueued_collective"] == 2
    data = case("evict")
    first = data["partings"][0]
    assert (first["group"], first["seq"]) == ("0", 3), first
    assert first["stopped"] == [{"rank": 0, "seq": 2, "op": ""}], first
    assert "rank 0 stopped at #2." in first["sentence"], first["sentence"]
    text = explain.render(data)
    assert "it had called none" not in text, text
    assert ("rank 0 never called it (its last: #2 (pg_status's number; "
            "the entry was evicted))") in text, text


def test_a_collective_that_raised_on_a_rank_is_not_never_called():
    # all_gather with a different size on each rank: gloo's check raised
    # on rank 1 before its Flight Recorder recorded the call.
    data = case("gather_sizes")
    first = data["partings"][0]
    assert first["kind"] == "missing" and first["ranks"] == [1], first
    assert [x["rank"] for x in first["raised"]] == [1], first
    assert "invalid tensor size" in first["raised"][0]["said"]
    text = explain.render(data)
    assert "rank 1 called it, but it raised there" in text, text
    assert "rank 1 never called it" not in text, text


def test_a_rank_with_no_dump_is_said_alike_in_text_and_json():
    # rank 0's dump left out: rank 1's ledger agrees with nothing, and no
    # parting is at its last number (the JSON's sentence says so).
    folder = FALSIFY / "slowloss"
    data = report(folder / "fr" / "rank_1", folder / "stacks.txt")
    first = data["partings"][0]
    assert first["kind"] == "silent" and first["ranks"] == [0], first
    assert first["sentence"] == ("rank 0 did not answer; the others agree "
                                 "up to collective #7."), first
    text = explain.render(data)
    assert "the default group: no dump from rank 0; the others agree up " \
           "to collective #7 (" in text, text
    assert "collective #7: " not in text, text


@pytest.mark.parametrize("mix, ranks, timeouts", [
    ("m1", (0, 1), "(90 s against 40 s)"),
    ("m3", (0, 2), "(90 s against 6 s)"),
])
def test_dumps_of_two_runs_are_refused(capsys, mix, ranks, timeouts):
    err = bad(capsys, FALSIFY / "mixed" / mix)
    assert (f"the dumps of rank {ranks[0]} and rank {ranks[1]} are of "
            f"different jobs: their default group's timeout differs "
            f"{timeouts}") in err, err


def test_two_stack_blocks_for_one_rank_are_named():
    data = report(FALSIFY / "mixed" / "dup_stacks.txt")
    assert data["notes"] == [
        f"2 stack blocks claim rank {r} (pids {a}, {b}): process {b}'s is "
        f"shown, the only one inside torch.distributed: the stacks may be "
        f"of more than one job"
        for r, a, b in ((0, 22255, 23373), (1, 22256, 23374))], data["notes"]


@pytest.mark.parametrize("log, pattern", [
    ("static_srun.log", "static-rendezvous"),
    ("port_srun.log", "port-in-use"),
    ("node1.log", "client-timeout"),
])
def test_launch_failures_behind_sruns_prefix_and_on_node_1(log, pattern):
    path = FALSIFY / "launch" / log
    assert explain.main([str(path)]) == 0
    data = report(path)
    assert [p["pattern"] for p in data["patterns"]] == [pattern], data
    assert data["patterns"][0]["url"].endswith("job_failures.html#"
                                               + SECTION_LABEL[pattern])


SECTION_LABEL = {"static-rendezvous": "rendezvous-timeout",
                 "port-in-use": "port-in-use",
                 "client-timeout": "rendezvous-timeout"}


def test_a_dump_is_named_prefix_plus_rank(capsys):
    # TORCH_FR_DUMP_TEMP_FILE=<dir>/v2 writes v20 and v21: ranks 0 and 1
    data = report(FALSIFY / "names" / "pfx")
    assert data["read"]["dumps"] == [0, 1], data["read"]
    assert any("prefix `v2` + rank" in n for n in data["notes"]), data
    given = explain.findings([str(FALSIFY / "names" / "pfx")], prefix="v")
    assert given["read"]["dumps"] == [20, 21], given["read"]
    # rank_-1 is no rank 1
    negative = FALSIFY / "names" / "negative" / "rank_-1"
    data = report(negative, FALSIFY / "slowloss" / "fr" / "rank_1")
    assert data["read"]["dumps"] == [1], data["read"]
    assert data["not_read"] == [{"path": str(negative), "why":
                                 "a negative rank in its name: no rank's "
                                 "dump (prefix + rank)"}], data["not_read"]


# threading imported: py-spy names the main thread from it
SLEEPER = ("import threading, time\n"
           "print('ready', flush=True)\n"
           "time.sleep(120)\n")
AGENT = ("import os, subprocess, sys, time\n"
         "kids = [subprocess.Popen([sys.executable, sys.argv[1], "
         "sys.argv[2]], env=dict(os.environ, RANK=str(r)), "
         "stdout=subprocess.PIPE, text=True) for r in (0, 1)]\n"
         "for k in kids:\n"
         "    k.stdout.readline()\n"
         "print(' '.join(str(k.pid) for k in kids), flush=True)\n"
         "time.sleep(120)\n")


@pytest.mark.timeout(300)
def test_the_pages_loop_takes_the_agents_children_only(tmp_path):
    # A stand-in for torchrun (its command line: torchrun, then the
    # script), started from a shell that exported RANK, with two children
    # of RANK 0 and 1; beside it another job's process of the same script
    # with RANK=0. The page's loop as printed (the script's name made
    # unique here) takes the two children, and only them.
    script = f"train_{os.getpid()}_{time.monotonic_ns()}.py"
    (tmp_path / "torchrun").write_text(AGENT)
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(SLEEPER)
    env = dict(os.environ, RANK="7")
    procs = []
    try:
        agent = subprocess.Popen(
            [sys.executable, str(tmp_path / "torchrun"), str(sleeper),
             script],
            env=env, stdout=subprocess.PIPE, text=True)
        procs.append(agent)
        other = subprocess.Popen([sys.executable, str(sleeper), script],
                                 env=dict(os.environ, RANK="0"),
                                 stdout=subprocess.PIPE, text=True)
        procs.append(other)
        other.stdout.readline()
        kids = [int(p) for p in agent.stdout.readline().split()]
        path = f"{PY_SPY.parent}{os.pathsep}{os.environ['PATH']}"
        subprocess.run(["bash", "-c",
                        one_liner().replace("train.py", script)],
                       cwd=tmp_path, env=dict(os.environ, PATH=path),
                       timeout=120)
        data = report(tmp_path / "stacks.txt")
        assert [(r["rank"], r["pid"]) for r in data["ranks"]] == [
            (0, kids[0]), (1, kids[1])], data["ranks"]
        assert str(other.pid) not in (tmp_path / "stacks.txt").read_text()
    finally:
        for p in procs:
            for child in psutil.Process(p.pid).children(recursive=True):
                child.kill()
            p.kill()
            p.wait(timeout=30)


def test_what_gloo_dumps_cannot_tell_does_not_race_with_retired(tmp_path):
    """After a gloo timeout, whether a dump still holds the failed
    collective as pending is a race (chapter 5 met both): the report's
    words on what the states cannot tell are the same either way."""
    source = DATA / "falsify" / "zf_extra" / "fr"
    said = []
    for retired in (True, False):
        folder = tmp_path / str(retired) / "fr"
        folder.mkdir(parents=True)
        for path in sorted(source.iterdir()):
            dump = pickle.loads(path.read_bytes())
            for e in dump["entries"]:
                e["retired"] = retired
            (folder / path.name).write_bytes(pickle.dumps(dump))
        said.append([c["text"] for c in report(folder)["cannot_tell"]
                     if c["topic"] == "started"])
    assert said[0] == said[1] and len(said[0]) == 1, said
    assert "the one still waited on is not retired" in said[0][0]
