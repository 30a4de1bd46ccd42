"""Chapters 9 and 12's scripts under torchrun with 2 ranks (the running
job, train_ddp, is run by tests/test_train_job.py), the way
tests/test_examples.py runs the others (it also checks that every script
in ddpdemo.examples has a test: see DDP_EXAMPLES there). The classic
launcher, which calls torchrun's own `run`, is tested once, on chapter
3's script (tests/test_collectives.py)."""
import pytest

from test_examples import BOUND, launch

pytestmark = pytest.mark.timeout(2 * BOUND)


def rank_lines(stdout, rank):
    return [line.split("] ", 1)[1] for line in stdout.splitlines()
            if line.startswith(f"[rank {rank}] ")]


def test_inside_ddp_broadcasts_weights_and_rebuilds_buckets(torchrun):
    out, _ = launch(torchrun, "inside_ddp")
    assert out.returncode == 0, out.stderr[-3000:]
    rank0, rank1 = rank_lines(out.stdout, 0), rank_lines(out.stdout, 1)
    # Different seeds, different weights: rank 1's change to rank 0's.
    before0, after0 = rank0[0].split()[2], rank0[0].split()[5]
    before1, after1 = rank1[0].split()[2], rank1[0].split()[5]
    assert before0 == after0 == after1 != before1
    assert rank0[1:] == rank1[1:]
    assert rank0[1:] == [
        "gradient == mean of local gradients: True",
        "step 1 bucket 0: 49920 bytes "
        "0.weight 0.bias 2.weight 2.bias 4.weight 4.bias",
        "step 2 bucket 0: 16640 bytes 4.bias 4.weight",
        "step 2 bucket 1: 16640 bytes 2.bias 2.weight",
        "step 2 bucket 2: 16640 bytes 0.bias 0.weight",
        "step 3 bucket 0: 16640 bytes 4.bias 4.weight",
        "step 3 bucket 1: 16640 bytes 2.bias 2.weight",
        "step 3 bucket 2: 16640 bytes 0.bias 0.weight"]


def test_when_ddp_hangs_fails_fast_naming_rank_0_in_backward(torchrun):
    out, elapsed = launch(torchrun, "when_ddp_hangs", "--timeout", "3")
    assert out.returncode != 0
    assert elapsed < BOUND
    lines = out.stderr.splitlines()
    assert any(line.startswith(
        "[rank 0] rank 0 is stuck in backward of batch 3 of 3: its "
        "gradient all_reduce was never matched") for line in lines)
    assert "[rank 1] told that rank 0 is stuck; stopping" in lines


def test_when_ddp_hangs_with_join_ends_with_equal_weights(torchrun):
    out, _ = launch(torchrun, "when_ddp_hangs", "--join")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert [line.split(",")[0] for line in lines] == [
        "[rank 0] 3 batches", "[rank 1] 2 batches"]
    sums = {line.split("weights sum ")[1] for line in lines}
    assert len(sums) == 1


def test_train_ddp_refuses_fewer_gpus_than_ranks_per_node():
    # NCCL with one GPU per rank, gloo with none; a part of the node's
    # ranks without a GPU is refused, not trained on the CPU by surprise.
    from ddpdemo.examples.train_ddp import TIMEOUT, backend_for
    assert backend_for(8, 8) == backend_for(4, 2) == "nccl"
    assert backend_for(0, 8) == "gloo"
    with pytest.raises(SystemExit, match="1 GPUs visible for 2 ranks"):
        backend_for(1, 2)
    assert TIMEOUT.total_seconds() >= 3600    # outlasts a checkpoint save
