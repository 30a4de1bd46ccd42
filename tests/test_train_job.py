"""The book's running job (ddpdemo/examples/train_ddp.py; book/launching
and book/checkpoint_resume) under torchrun on gloo: early stopping ends
every rank at one epoch; the held-out set is evaluated once, sample by
sample, with uneven shares. The restart test (a rank SIGKILLed mid-epoch
and restarted by `torchrun --max-restarts` ends with exactly the
uninterrupted run's weights, momentum, scheduler and RNG states) is
book/checkpoint_resume.ipynb's: its two runs and their hidden checks,
under strict nbval, so that the suite runs the job twice, not four times."""
import sys

import pytest
import torch

from ddpdemo.examples.train_ddp import make_data, own_share
from ddpdemo.scripts import collect
from test_ddp_examples import rank_lines

BOUND = 120    # s: four ranks at once import torch on a busy 2-core box
pytestmark = pytest.mark.timeout(2 * BOUND)
# The group's timeout bounds a hang (a restarted group that never forms):
# the ranks exit, since torchrun starts them in sessions of their own and
# collect's kill at its timeout reaches torchrun alone.
JOB = ["-m", "ddpdemo.examples.train_ddp", "--timeout", "60"]


def torchrun(*args):
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", "2", *args]


def test_early_stop_ends_every_rank_together_and_each_sample_counts_once(
        tmp_path):
    # Patience 1 and an improvement of 1000 asked for: epoch 1 cannot
    # improve on epoch 0, so rank 0 stops the job after it. 11 held-out
    # samples on 2 ranks: 6 and 5, none counted twice. The same run shows
    # the rest of the job: its shares, its log on rank 0, its checkpoint.
    path = tmp_path / "stop.pt"
    done, = collect(torchrun(*JOB, "--epochs", "5", "--patience", "1",
                             "--min-delta", "1000", "--val-size", "11",
                             "--mix", "0.25", "--checkpoint", str(path)),
                    timeout=BOUND)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.splitlines()
    assert "early stop after epoch 1" in out
    assert [ln for ln in out if "stopped after" in ln] == [
        "[rank 0] stopped after epoch 1", "[rank 1] stopped after epoch 1"]
    logged = [ln for ln in out if ln.startswith("epoch ")]   # rank 0 only
    assert len(logged) == 2 and all(
        " mean loss over ranks " in ln and ln.endswith(
            " (n=11), lr 0.02") for ln in logged)
    assert [ln for ln in out if "held-out" in ln or " on every rank" in ln
            ] == ["held-out shares per rank: [6, 5]",
                  "checkpoint loaded equals the trained weights on every "
                  "rank: True", "parameters equal on every rank: True"]
    rank0, rank1 = (rank_lines(done.stdout, r) for r in (0, 1))
    assert rank1[0] == "RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 on cpu (gloo)"
    seen = {(r, e): lines[1 + e].split("samples ")[1].split("...")[0]
            for r, lines in enumerate((rank0, rank1)) for e in (0, 1)}
    assert seen[0, 0] != seen[1, 0]          # each rank its own share
    assert seen[0, 0] != seen[0, 1]          # set_epoch reshuffled
    # a seed per rank: each rank blends in samples of its own choosing
    mixes = [lines[1].split(", first mix ")[1] for lines in (rank0, rank1)]
    assert mixes[0] != mixes[1], mixes
    assert (tmp_path / "stop.pt.val11").exists()    # rank 0's cache
    saved = torch.load(path, map_location="cpu")
    assert saved["epoch"] == 2                            # the next epoch
    assert set(saved["model"]) == {"0.weight", "0.bias", "3.weight",
                                   "3.bias"}              # no "module."
    assert len(saved["rng"]) == 2                 # each rank's RNG state
    assert not torch.equal(saved["rng"][0]["torch"], saved["rng"][1]["torch"])
    assert saved["stopped"]
    # An early stop is final: run again on the checkpoint, nothing trains.
    again, = collect(torchrun(*JOB, "--epochs", "5", "--checkpoint",
                              str(path)), timeout=BOUND)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resumed from epoch 2" in again.stdout
    assert " mean loss over ranks " not in again.stdout
    assert torch.equal(torch.load(path)["model"]["0.weight"],
                       saved["model"]["0.weight"])


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_each_held_out_sample_is_on_exactly_one_rank(world_size):
    for n in range(1, 14):
        data = make_data(n, seed=1)
        shares = [own_share(data, r, world_size).indices
                  for r in range(world_size)]
        assert sorted(i for share in shares for i in share) == list(range(n))
