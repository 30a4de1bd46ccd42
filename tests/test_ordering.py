"""ddpdemo.ordering on real gloo groups: rank 0 runs the block first, -1
takes no barrier, and what happens when rank 0 raises inside the block."""
import time

import pytest

import ddpdemo
from ddpdemo.ordering import (RankZeroFailed, torch_distributed_zero_first,
                              torch_distributed_zero_first_safe)


MARKER_WAIT = 30   # s; bound on waiting for the other rank's marker


def marker_order(directory, safe=False):
    """What each rank saw of the other's marker files, around the block.

    Rank 1 leaves "1-arrived" just before the `with`; rank 0, inside the
    block, waits (bounded) for it, so rank 1 is at the barrier or past
    it, then records whether rank 1 is already inside ("1-inside"), and
    leaves "0-left" as it leaves. Rank 1, once inside, records whether
    "0-left" was there. No sleep and no clock compared across processes:
    the files say who was where."""
    import os
    import torch.distributed as dist
    from ddpdemo.runtime import waiting
    rank = dist.get_rank()
    mark = lambda name: open(os.path.join(directory, name), "w").close()
    seen = lambda name: os.path.exists(os.path.join(directory, name))
    zero_first = (torch_distributed_zero_first_safe if safe
                  else torch_distributed_zero_first)
    if rank == 1:
        mark("1-arrived")
    with zero_first(rank):
        if rank == 0:
            arrived = bool(waiting.until(lambda: seen("1-arrived"),
                                         MARKER_WAIT))
            saw = {"1-arrived": arrived, "1-inside": seen("1-inside")}
            mark("0-left")
        else:
            mark("1-inside")
            saw = {"0-left": seen("0-left")}
    return saw


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
def test_rank_0_finishes_the_block_before_others_start(cluster, safe,
                                                       tmp_path):
    saw0, saw1 = cluster.run(marker_order, str(tmp_path), safe)
    # Rank 1 had reached the block while rank 0 was in it, and waited.
    assert saw0 == {"1-arrived": True, "1-inside": False}
    assert saw1 == {"0-left": True}


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


def test_safe_variant_fails_every_rank_at_once(cluster, tmp_path):
    with pytest.raises(ddpdemo.RankError) as info:
        cluster.run(rank_0_raises, True, timeout=10)
    assert info.value.blocked == []
    assert "ConnectionError" in info.value.errors[0]
    assert RankZeroFailed.__name__ in info.value.errors[1]
    # Nobody was left in a collective, so the group still works.
    assert cluster.run(marker_order, str(tmp_path))[1] == {"0-left": True}
