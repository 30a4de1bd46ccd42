"""ddpdemo.ordering on real gloo groups: rank 0 runs the block first, -1
takes no barrier, and what happens when rank 0 raises inside the block."""
import time

import pytest

import ddpdemo
from ddpdemo.ordering import (RankZeroFailed, torch_distributed_zero_first,
                              torch_distributed_zero_first_safe)


BODY_S = 0.3   # how long rank 0 spends inside the block


def body_times(safe=False):
    """(start, end) of the block on this rank; rank 0's block is slow."""
    import torch.distributed as dist
    rank = dist.get_rank()
    zero_first = (torch_distributed_zero_first_safe if safe
                  else torch_distributed_zero_first)
    with zero_first(rank):
        start = time.time()
        if rank == 0:
            time.sleep(BODY_S)
        end = time.time()
    return start, end


def rank_0_raises(safe):
    import torch.distributed as dist
    rank = dist.get_rank()
    zero_first = (torch_distributed_zero_first_safe if safe
                  else torch_distributed_zero_first)
    with zero_first(rank):
        if rank == 0:
            raise ConnectionError("download failed")
    return rank




@pytest.mark.parametrize("safe", [False, True])
def test_rank_0_finishes_the_block_before_others_start(cluster, safe):
    (start0, end0), (start1, end1) = cluster.run(body_times, safe)
    assert end0 - start0 >= BODY_S
    assert start1 >= end0          # rank 1 waited for rank 0's block
    assert end1 - start1 < BODY_S  # and did not sleep itself


def test_rank_minus_one_takes_no_barrier():
    import torch.distributed as dist
    assert not dist.is_initialized()   # a barrier here would raise
    for zero_first in (torch_distributed_zero_first,
                       torch_distributed_zero_first_safe):
        with zero_first(-1):
            ran = True
        assert ran


def test_other_ranks_do_take_a_barrier_without_a_group():
    # The converse of the test above: rank 1 must call dist.barrier().
    with pytest.raises((ValueError, RuntimeError)):
        with torch_distributed_zero_first(1):
            pass


def test_rank_0_raising_leaves_the_others_waiting(cluster):
    start = time.monotonic()
    with pytest.raises(ddpdemo.RankError) as info:
        cluster.run(rank_0_raises, False, timeout=10)
    assert time.monotonic() - start < 8    # ended by rank 0's failure
    assert list(info.value.errors) == [0]
    assert "ConnectionError: download failed" in info.value.errors[0]
    assert info.value.blocked == [1]


def test_safe_variant_fails_every_rank_at_once(cluster):
    with pytest.raises(ddpdemo.RankError) as info:
        cluster.run(rank_0_raises, True, timeout=10)
    assert info.value.blocked == []
    assert "ConnectionError" in info.value.errors[0]
    assert RankZeroFailed.__name__ in info.value.errors[1]
    # Nobody was left in a collective, so the group still works.
    (_, end0), (start1, _) = cluster.run(body_times)
    assert start1 >= end0
