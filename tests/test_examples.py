"""Every chapter's script under torchrun with 2 ranks (issue 7).

Three scripts have exact-output tests beside their chapter's module
(TESTED_BESIDE); this file checks that those tests exist and runs the
barrier and deadlock scripts itself, under torchrun and the classic
`python -m torch.distributed.launch` (which passes `--local-rank=N`)."""
import pathlib
import time

import ddpdemo.examples

FOLDER = pathlib.Path(ddpdemo.examples.__file__).parent
EXAMPLES = sorted(p.stem for p in FOLDER.glob("*.py") if p.stem != "__init__")
TESTED_BESIDE = {"all_reduce_sums": "test_collectives.py",
                 "reduce_mean_metrics": "test_metrics.py",
                 "seeds_mosaic": "test_seeding.py",
                 "node_cache": "test_nodes.py",
                 "hang_patterns": "test_explain.py",
                 "train_ddp": "test_train_job.py",
                 # not a script: the diagnosis page's jobs, run there
                 "puzzles": "test_diagnose.py"}
# "When the job itself fails" (book/job_failures.ipynb): run below.
JOB_FAILURES = {"rank_killed", "rank_raises"}
# Chapters 7 and 8's scripts, run by tests/test_ddp_examples.py.
DDP_EXAMPLES = {"inside_ddp", "when_ddp_hangs"}
BOUND = 60    # s: a 2-rank script takes ~10 s on a 2-core machine
# What barrier_order prints when rank 0 writes the cache first.
ORDERED = ["[rank 0] wrote the cache",
           "[rank 0] found 4 of 4 pieces",
           "[rank 0] started after rank 0 had finished: True",
           "[rank 1] read the cache",
           "[rank 1] found 4 of 4 pieces",
           "[rank 1] started after rank 0 had finished: True"]


def launch(torchrun, module, *args, classic=False):
    """Run an example on 2 ranks, timed."""
    target = ([str(FOLDER / f"{module}.py")] if classic
              else ["-m", f"ddpdemo.examples.{module}"])
    start = time.monotonic()
    out = torchrun(*target, *args, classic=classic, timeout=BOUND)
    return out, time.monotonic() - start


def test_every_chapter_topic_has_a_tested_script():
    assert set(EXAMPLES) == set(TESTED_BESIDE) | {
        "barrier_order", "val_dataloader_deadlock"} | DDP_EXAMPLES \
        | JOB_FAILURES
    tests = pathlib.Path(__file__).parent
    for module, test_file in TESTED_BESIDE.items():
        text = (tests / test_file).read_text()
        assert f"ddpdemo.examples.{module}" in text, (module, test_file)


def test_barrier_order_both_shows_the_race_then_the_order(torchrun):
    # Both passes in one launch: the race, then the order (one run where
    # three were; the classic launcher is tested on chapter 3's script,
    # tests/test_collectives.py).
    out, _ = launch(torchrun, "barrier_order", "--both")
    assert out.returncode == 0, out.stderr[-3000:]
    race, ordered = out.stdout.split("with torch_distributed_zero_first:\n")
    assert race.splitlines()[0] == "without ordering:"
    assert "[rank 1] started after rank 0 had finished: False" in race
    assert "[rank 1] found 4 of 4 pieces" not in race
    assert ordered.splitlines() == ORDERED


def test_deadlock_example_fails_fast_naming_rank_0(torchrun):
    out, elapsed = launch(torchrun, "val_dataloader_deadlock")
    assert out.returncode != 0
    assert elapsed < BOUND
    # The diagnosis goes to stderr, among torchrun's own report.
    lines = out.stderr.splitlines()
    assert any(line.startswith(
        "[rank 0] rank 0 is stuck: its barrier after `yield` in "
        "torch_distributed_zero_first") for line in lines)
    assert "[rank 1] told that rank 0 is stuck; stopping" in lines


def test_deadlock_example_fixed_with_rank_minus_1(torchrun):
    out, _ = launch(torchrun, "val_dataloader_deadlock", "--fix", classic=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == [
        "[rank 0] train loader: 4 batches (its shard)",
        "[rank 0] val loader: 4 batches (all of it)",
        "[rank 1] train loader: 4 batches (its shard)"]


def report(out):
    """torchrun's failure report: (other failures, root cause) blocks."""
    failures, cause = out.stderr.split("Failures:")[1].split(
        "Root Cause (first observed failure):")
    return failures, cause


def test_rank_killed_is_the_root_cause_and_rank_0_is_stopped(torchrun):
    out, elapsed = launch(torchrun, "rank_killed")
    assert out.returncode == 1 and elapsed < BOUND
    failures, cause = report(out)
    assert "rank      : 1 (local_rank: 1)" in cause
    assert "exitcode  : -9 (pid:" in cause and "(SIGKILL)" in cause
    assert "Signal 9 (SIGKILL) received by PID" in cause
    assert "rank      : 0 (local_rank: 0)" in failures
    assert "exitcode  : -15 (pid:" in failures
    lines = out.stderr.splitlines()
    assert any(line.startswith("[rank 0] all_reduce raised: took ")
               for line in lines)
    assert any(line.startswith("[rank 0] got SIGTERM: took ")
               for line in lines)
    assert any(line.startswith("rank 0's error: ") and (
        "Connection reset by peer" in line
        or "Connection closed by peer" in line) for line in lines)


def test_rank_raises_is_the_root_cause_with_its_traceback(torchrun):
    out, elapsed = launch(torchrun, "rank_raises")
    assert out.returncode == 1 and elapsed < BOUND
    failures, cause = report(out)
    assert "rank      : 1 (local_rank: 1)" in cause
    assert "exitcode  : 1 (pid:" in cause
    assert "/attempt_0/1/error.json" in cause        # @record's file
    assert "ValueError: bad batch at step 3" in cause
    assert "exitcode  : -15 (pid:" in failures       # rank 0, SIGTERMed
    lines = out.stderr.splitlines()
    assert "[rank 0] got SIGTERM from torchrun" in lines
    assert ("[rank 1] raises; TORCHELASTIC_ERROR_FILE: "
            ".../attempt_0/1/error.json") in lines
