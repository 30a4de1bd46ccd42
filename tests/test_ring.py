"""ddpdemo.ring on real gloo groups of 2, 3 and 4 ranks (subgroups of one
4-rank cluster): the hand-made ring all-reduce against dist.all_reduce and a
single-process sum, its byte counts, and its figure."""

import pytest
import torch
from matplotlib.figure import Figure

from ddpdemo.ring import RingStats, plot_ring_steps


WORLD_SIZE = 4
CLUSTER = dict(world_size=WORLD_SIZE, timeout=60)
GROUPS = ([0, 1], [0, 1, 2], [0, 1, 2, 3], [1, 2, 3], [2])
SHAPES = ((12,), (7,), (5, 3), (1,), (3, 4))


def rank_input(rank, shape, dtype, seed):
    """What `rank` holds: seeded, so the test process can rebuild it."""
    g = torch.Generator().manual_seed(1000 * seed + rank)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g, dtype=dtype)
    return torch.randint(-1000, 1000, shape, generator=g, dtype=dtype)


def ring_vs_builtin(members, shape, dtype, seed, transpose=False):
    import torch.distributed as dist
    from ddpdemo.ring import RingStats, ring_all_reduce
    # Every rank must create every group, in the same order.
    groups = {tuple(m): dist.new_group(m) for m in GROUPS}
    group = groups[tuple(members)]
    rank = dist.get_rank()
    if rank not in members:
        return None
    x = rank_input(rank, shape, dtype, seed)
    if transpose:
        x = x.t()   # not contiguous: the ring must still sum in place
    builtin = x.clone()
    dist.all_reduce(builtin, group=group)
    stats = RingStats(keep_snapshots=True)
    out = ring_all_reduce(x, group=group, stats=stats)
    return out is x, x, builtin, stats




@pytest.mark.parametrize("members", GROUPS)
def test_ring_equals_all_reduce_and_reference_on_ints(cluster, members):
    for seed, shape in enumerate(SHAPES):
        results = cluster.run(ring_vs_builtin, members, shape, torch.int64,
                              seed)
        reference = sum(rank_input(r, shape, torch.int64, seed)
                        for r in members)
        for rank in range(WORLD_SIZE):
            if rank not in members:
                assert results[rank] is None
                continue
            same_object, ring, builtin, _ = results[rank]
            assert same_object
            assert torch.equal(ring, builtin)
            assert torch.equal(ring, reference)


def test_ring_on_floats_is_close_and_bitwise_identical_on_every_rank(
        cluster):
    results = cluster.run(ring_vs_builtin, [0, 1, 2, 3], (4, 5),
                          torch.float32, 7, transpose=True)
    reference = sum(rank_input(r, (4, 5), torch.float32, 7).t()
                    for r in range(WORLD_SIZE))
    rings = [r[1] for r in results]
    for ring, builtin in zip(rings, [r[2] for r in results], strict=True):
        assert ring.shape == (5, 4)
        torch.testing.assert_close(ring, builtin)
        torch.testing.assert_close(ring, reference)
    # Each chunk is summed on one rank and then copied: no rank can differ.
    bits = [r.contiguous().view(torch.int32) for r in rings]
    assert all(torch.equal(bits[0], b) for b in bits[1:])


@pytest.mark.parametrize("members", GROUPS)
def test_each_rank_sends_2_n_minus_1_over_n_of_the_data(cluster, members):
    n = len(members)
    results = cluster.run(ring_vs_builtin, members, (12,), torch.int64, 0)
    for rank in members:
        stats = results[rank][3]
        assert stats.world_size == n
        assert stats.tensor_bytes == 12 * 8
        assert len(stats.steps) == 2 * (n - 1)
        assert stats.bytes_sent * n == 2 * (n - 1) * stats.tensor_bytes


def test_bytes_sent_counts_uneven_chunks(cluster):
    # 7 elements on 3 ranks: chunks of 3, 2, 2; each rank sends 2 chunks
    # in each phase, and which ones depends on its rank.
    results = cluster.run(ring_vs_builtin, [0, 1, 2], (7,), torch.int64, 0)
    sizes = [3, 2, 2]
    for rank in range(3):
        sent = [s[2] for s in results[rank][3].steps]
        assert sent == [rank % 3, (rank - 1) % 3,        # reduce-scatter
                        (rank + 1) % 3, rank % 3]        # all-gather
        assert results[rank][3].bytes_sent == 8 * sum(sizes[c] for c in sent)


def test_reduce_scatter_leaves_rank_r_with_chunk_r_plus_1(cluster):
    results = cluster.run(ring_vs_builtin, [0, 1, 2, 3], (4,), torch.int64,
                          3)
    total = results[0][1]
    for rank in range(WORLD_SIZE):
        snaps = results[rank][3].snapshots
        assert len(snaps) == 1 + 2 * (WORLD_SIZE - 1)
        after_rs = snaps[WORLD_SIZE - 1]
        done = [c for c in range(WORLD_SIZE) if after_rs[c] == total[c]]
        assert (rank + 1) % WORLD_SIZE in done
        assert snaps[-1] == total.tolist()


def test_plot_ring_steps_draws_every_chunk_of_every_rank(cluster):
    results = cluster.run(ring_vs_builtin, [0, 1, 2], (6,), torch.int64, 2)
    stats = [r[3] for r in results[:3]]
    fig = plot_ring_steps(stats)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    rows = 1 + 2 * 2
    assert len(ax.patches) == 3 * 3 * rows
    texts = [t.get_text() for t in ax.texts]
    assert [t for t in texts if t.startswith("rank")] == [
        "rank 0", "rank 1", "rank 2"]
    texts = [t for t in texts if not t.startswith("rank")]
    # The last row shows the first value of each of the 3 chunks, summed.
    firsts = [str(v) for v in results[0][1][::2].tolist()]
    for rank in range(3):
        last_row = texts[rank * rows * 3:(rank + 1) * rows * 3][-3:]
        assert last_row == firsts


def test_single_rank_group_sends_nothing_and_keeps_the_tensor(cluster):
    results = cluster.run(ring_vs_builtin, [2], (5,), torch.int64, 4)
    _, ring, _, stats = results[2]
    assert torch.equal(ring, rank_input(2, (5,), torch.int64, 4))
    assert stats.steps == [] and stats.bytes_sent == 0
    assert RingStats().bytes_sent == 0


def ring_of_powers():
    import torch.distributed as dist
    from ddpdemo.ring import RingStats, ring_all_reduce
    stats = RingStats(keep_snapshots=True)
    ring_all_reduce(torch.full((4,), 10 ** dist.get_rank()), stats=stats)
    return stats


def test_interactive_ring_from_a_live_ring_equals_the_reference(cluster):
    """Chapter 1's interactive ring, from a real gloo ring, shows what a
    single-process replay of the algorithm (test_interactive) predicts."""
    from ddpdemo.interactive import ring
    from test_interactive import fake_ring
    live = ring(cluster.run(ring_of_powers))
    assert live.data == ring(fake_ring()).data
    assert live.html == ring(fake_ring()).html
