"""Every chapter's script under torchrun with 2 ranks (issue 7), and the
classic `python -m torch.distributed.launch --local_rank` form."""
import pathlib
import subprocess
import sys
import time

import pytest

import ddpdemo.examples

EXAMPLES = sorted(p.stem for p in
                  pathlib.Path(ddpdemo.examples.__file__).parent.glob("*.py")
                  if p.stem != "__init__")
DEADLOCK = "val_dataloader_deadlock"
BOUND = 60    # s: a 2-rank script on a 2-core machine takes ~10 s


def torchrun(module, *args):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node=2", "-m", f"ddpdemo.examples.{module}", *args]
    start = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=BOUND)
    return out, time.monotonic() - start


def ranked_lines(text):
    return [line for line in text.splitlines() if line.startswith("[rank ")]


def test_every_chapter_topic_has_a_script():
    for name in ("all_reduce_sums", "reduce_mean_metrics", "barrier_order",
                 DEADLOCK, "seeds_mosaic"):
        assert name in EXAMPLES


@pytest.mark.parametrize("module", [m for m in EXAMPLES if m != DEADLOCK])
def test_example_runs_under_torchrun(module):
    out, _ = torchrun(module)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = ranked_lines(out.stdout)
    assert any(l.startswith("[rank 0] ") for l in lines)
    assert any(l.startswith("[rank 1] ") for l in lines)
    # Ranks print in order, never interleaved within a line.
    assert all(line.count("[rank ") == 1 for line in lines)


def test_deadlock_example_fails_fast_naming_rank_0():
    out, elapsed = torchrun(DEADLOCK)
    assert out.returncode != 0
    assert elapsed < BOUND
    assert "rank 0" in out.stdout + out.stderr


def test_classic_launch_form_with_local_rank_argument():
    """torch.distributed.launch passes `--local-rank=N` as an argument
    (`--standalone`: it picks a free port); the script accepts it."""
    script = pathlib.Path(ddpdemo.examples.__file__).parent / \
        "all_reduce_sums.py"
    cmd = [sys.executable, "-m", "torch.distributed.launch",
           "--standalone", "--nproc_per_node", "2", str(script)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=BOUND)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "[rank 1]" in out.stdout
