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

    def mark(name):
        open(os.path.join(directory, name), "w").close()

    def seen(name):
        return os.path.exists(os.path.join(directory, name))

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
    with pytest.raises((ValueError, RuntimeError)), \
            torch_distributed_zero_first(1):
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
    assert "rank 0 failed inside" in info.value.errors[1]
    # Nobody was left in a collective, so the group still works.
    assert cluster.run(marker_order, str(tmp_path))[1] == {"0-left": True}


# A script, not a cluster: rank 0's uncaught error ends its process.
UNCAUGHT = """
import time
from datetime import timedelta
import torch.distributed as dist
from ddpdemo.ordering import torch_distributed_zero_first
dist.init_process_group("gloo", timeout=timedelta(seconds=60))
rank = dist.get_rank()
start = time.time()
try:
    with torch_distributed_zero_first(rank):
        if rank == 0:
            raise ConnectionError("download failed")
except RuntimeError as error:
    print(time.time() - start, "Connection closed by peer" in str(error))
"""


def test_rank_0s_exit_fails_the_others_barrier_at_once(torchrun, tmp_path):
    # The module docstring: gloo does not wait for the group's timeout
    # (60 s here) once rank 0's process has ended. --monitor-interval
    # keeps torchrun from stopping rank 1 before it has printed.
    script = tmp_path / "uncaught.py"
    script.write_text(UNCAUGHT)
    out = torchrun("--monitor-interval", "2", str(script))
    assert out.returncode != 0
    waited, closed = out.stdout.split()
    assert float(waited) < 20 and closed == "True", out.stderr[-3000:]


SLOW_WRITE = 1.0   # s: node 1's writer, long after rank 0 is done


def per_node_cache(directory, fail_rank=None):
    """Two nodes of two ranks played on one 4-rank group, zero first by
    LOCAL_RANK (rank % 2) into each node's own directory, as chapter 6
    does on node-local storage. Rank 0 writes at once; node 1's writer,
    rank 2, writes SLOW_WRITE s later (or raises, if it is fail_rank).
    Returns whether this rank found its node's file."""
    import os
    import time
    import torch.distributed as dist
    rank = dist.get_rank()
    local_rank = rank % 2
    path = os.path.join(directory, f"node{rank // 2}")
    with torch_distributed_zero_first_safe(local_rank):
        if local_rank == 0:
            if rank == fail_rank:
                raise ConnectionError("download failed")
            if rank == 2:
                time.sleep(SLOW_WRITE)
            open(path, "w").close()
        return os.path.exists(path)


@pytest.fixture(scope="module")
def cluster4():
    with ddpdemo.Cluster(world_size=4, backend="gloo", timeout=20,
                         spares=False) as c:
        yield c


def test_safe_variant_waits_for_every_nodes_writer(cluster4, tmp_path):
    # Rank 3 must not leave before its own node's writer (rank 2) is
    # done, although global rank 0 finished long before.
    assert cluster4.run(per_node_cache, str(tmp_path)) == [True] * 4


def test_safe_variant_fails_every_rank_when_another_nodes_writer_fails(
        cluster4, tmp_path):
    with pytest.raises(ddpdemo.RankError) as info:
        cluster4.run(per_node_cache, str(tmp_path), 2, timeout=10)
    assert info.value.blocked == []
    assert "ConnectionError" in info.value.errors[2]
    for rank in (0, 1, 3):
        assert RankZeroFailed.__name__ in info.value.errors[rank]
        # Node 1's local rank 0 failed, global rank 2: the message names
        # it, not "rank 0" (global rank 0 finished its block).
        assert "rank 2 failed inside" in info.value.errors[rank]
        assert "rank 0" not in info.value.errors[rank]


def test_safe_variant_on_nccl_refuses_a_rank_left_on_gpu_0(monkeypatch):
    # On NCCL the flags go on the *current* CUDA device. A rank with
    # LOCAL_RANK 1 that never called torch.cuda.set_device is still on
    # cuda:0 (with several GPUs): it is told so, before any collective.
    # Played without GPUs: the calls that ask torch are replaced.
    import torch
    import torch.distributed as dist
    monkeypatch.setattr(dist, "get_backend", lambda *a: "nccl")
    monkeypatch.setattr(dist, "get_world_size", lambda *a: 2)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(RuntimeError, match=r"torch\.cuda\.set_device"), \
            torch_distributed_zero_first_safe(1):
        pass
