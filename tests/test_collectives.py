"""ddpdemo.figures' before/after figure on a real 2-rank gloo
group, and chapter 1's script, ddpdemo.examples.all_reduce_sums, under
torchrun and under the classic torch.distributed.launch."""
import os

import torch
from matplotlib.figure import Figure

import ddpdemo.examples.all_reduce_sums as all_reduce_sums
from ddpdemo.figures import by_collective, plot_collectives

CLUSTER = dict(timeout=30)


def start(rank):
    return torch.arange(2) + 1 + 2 * rank


def three_collectives():
    import torch.distributed as dist
    x = start(dist.get_rank())
    out = {"all_reduce": x.clone(), "broadcast": x.clone()}
    dist.all_reduce(out["all_reduce"])
    dist.broadcast(out["broadcast"], src=0)
    gathered = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, x)
    out["all_gather"] = torch.cat(gathered)
    return x, out




def test_by_collective_regroups_what_the_ranks_held(cluster):
    before, after = by_collective(cluster.run(three_collectives))
    assert [b.tolist() for b in before] == [start(0).tolist(),
                                            start(1).tolist()]
    assert list(after) == ["all_reduce", "broadcast", "all_gather"]
    reference = start(0) + start(1)
    assert all(torch.equal(t, reference) for t in after["all_reduce"])
    assert all(torch.equal(t, start(0)) for t in after["broadcast"])
    gathered = torch.cat([start(0), start(1)])
    assert all(torch.equal(t, gathered) for t in after["all_gather"])


def test_plot_collectives_one_row_each_and_changed_values_bold(cluster):
    before, after = by_collective(cluster.run(three_collectives))
    fig = plot_collectives(before, after)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 1 + len(after)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert titles[1:] == [f"after dist.{n}" for n in after]
    # broadcast: rank 0 keeps [1, 2]; rank 1's [3, 4] becomes [1, 2].
    texts = fig.axes[2].texts
    bold = [t.get_text() for t in texts if t.get_fontweight() == "bold"]
    assert [t.get_text() for t in texts] == ["1", "2", "1", "2"]
    assert bold == ["1", "2"]
    # all_gather: 4 values per rank, one box each.
    assert len(fig.axes[3].patches) == 2 * 4


def expected_lines(world_size, source, stdout):
    # The port is the launcher's choice: one for the whole job, and a free
    # one, not the old fixed 29500 (chapter 1).
    port = int(stdout.split()[-1])
    assert port != 29500
    total = sum(start(r) for r in range(world_size)).tolist()
    lines = []
    for rank in range(world_size):
        lines += [f"[rank {rank}] local_rank {rank} from {source(rank)}",
                  f"[rank {rank}] backend     gloo on cpu",
                  f"[rank {rank}] before      {start(rank).tolist()}",
                  f"[rank {rank}] all_reduce  {total}",
                  f"[rank {rank}] ring        {total}, sent 16 of 16 bytes",
                  f"[rank {rank}] master      port {port}"]
    return lines


def test_all_reduce_sums_under_torchrun(torchrun):
    proc = torchrun("-m", "ddpdemo.examples.all_reduce_sums")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == expected_lines(
        2, lambda rank: f"LOCAL_RANK={rank}", proc.stdout)


def test_all_reduce_sums_under_classic_launch_with_local_rank_argument(
        torchrun):
    folder, name = os.path.split(all_reduce_sums.__file__)
    proc = torchrun(name, classic=True, cwd=folder)
    assert proc.returncode == 0, proc.stderr
    assert "torch.distributed.launch is deprecated" in proc.stderr
    assert proc.stdout.splitlines() == expected_lines(
        2, lambda rank: f"--local-rank={rank} and LOCAL_RANK={rank}",
        proc.stdout)
