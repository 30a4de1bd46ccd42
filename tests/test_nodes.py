"""ddpdemo.nodes and ddpdemo.examples.node_cache: the variables torchrun
gives each rank across nodes, checked against a real two-node torchrun on
this machine; nodes simulated on a 4-rank cluster (chapter 4). The same
program on two hosts with separate /tmp: tests/test_multihost.py.
"""
import os
import re
import socket
import time

import pytest

from ddpdemo.book import bench
from ddpdemo.examples.node_cache import LABELS, cache_labels
from ddpdemo.nodes import SimulatedNodes, torchrun_env, torchrun_nodes

CLUSTER = dict(world_size=4, timeout=30, spares=False)
TORCHRUN_TIMEOUT = 180   # s: two launchers, four ranks, on 2 busy cores
LINE = re.compile(r"\[rank (\d)\] (RANK=.*)")


def test_torchrun_env_counts_ranks_node_by_node():
    table = [torchrun_env(rank, nproc_per_node=2, nnodes=2)
             for rank in range(4)]
    assert [(e["RANK"], e["LOCAL_RANK"], e["GROUP_RANK"]) for e in table] \
        == [("0", "0", "0"), ("1", "1", "0"), ("2", "0", "1"),
            ("3", "1", "1")]
    assert {e["LOCAL_WORLD_SIZE"] for e in table} == {"2"}
    assert {e["WORLD_SIZE"] for e in table} == {"4"}
    with pytest.raises(ValueError, match="rank 4 is not in a job"):
        torchrun_env(4, nproc_per_node=2, nnodes=2)


def test_two_torchrun_nodes_set_what_torchrun_env_says():
    """Two launchers, `--node-rank 0` and `1`, each with a /tmp of its
    own: the variables each rank got; global rank 0 fills node 0's /tmp
    only."""
    node0, node1 = torchrun_nodes("-m", "ddpdemo.examples.node_cache",
                                  "--by", "RANK", timeout=TORCHRUN_TIMEOUT)
    assert node0.returncode == 0 and node1.returncode == 0, \
        (node0.stderr[-2000:], node1.stderr[-2000:])
    got = {}
    for line in node0.stdout.splitlines():      # rank 0 prints for all
        found = LINE.match(line)
        if found:
            got[int(found.group(1))] = found.group(2)
    for rank in range(4):
        want = " ".join(f"{k}={v}" for k, v in
                        torchrun_env(rank, 2, 2).items())
        assert got[rank] == want + " NODE_RANK=None", got
    lines = node0.stdout.splitlines()
    for rank, found in enumerate([4, 4, None, None]):
        assert (f"[rank {rank}] wrote: {rank == 0}, found {found} of "
                f"{len(LABELS)} labels") in lines, lines


def test_a_port_taken_before_node_0_binds_it_is_replaced(monkeypatch,
                                                          capsys):
    """free_port's port is free when asked, not when node 0 binds it:
    node 0 then fails (EADDRINUSE), node 1 is stopped instead of waiting
    out the timeout, and the launch is repeated on a new port."""
    from ddpdemo import nodes as module
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = [module.free_port(), port]      # pop: the taken one first
        monkeypatch.setattr(module, "free_port", ports.pop)
        monkeypatch.setattr(module, "AFTER_FAILURE", 1.0)
        start = time.monotonic()
        node0, node1 = torchrun_nodes("-m", bench.__name__, "--oneshot",
                                      nproc_per_node=1,
                                      timeout=TORCHRUN_TIMEOUT)
    assert (node0.returncode, node1.returncode) == (0, 0), \
        (node0.stderr[-2000:], node1.stderr[-2000:])
    assert ports == []                  # both ports were asked for
    out = capsys.readouterr().out
    assert out.count("$ torchrun") == 2     # the last launch only
    assert f"--master-port {port} " not in out
    assert time.monotonic() - start < TORCHRUN_TIMEOUT / 2


@pytest.fixture(scope="module")
def nodes(cluster):
    made = SimulatedNodes(nnodes=2, nproc_per_node=2)
    try:
        yield made, cluster.run(made.enter)
    finally:
        made.close()


def test_simulated_nodes_set_the_variables_and_a_tmp_per_node(nodes):
    made, envs = nodes
    for rank, env in enumerate(envs):
        assert env == dict(torchrun_env(rank, 2, 2),
                           TMPDIR=f"node{rank // 2}")
    assert sorted(os.listdir(made.root)) == ["node0", "node1"]


def test_global_rank_0_leaves_the_other_node_without_the_file(
        nodes, cluster):
    done = cluster.run(cache_labels, "RANK")
    assert [d["found"] for d in done] == [4, 4, None, None]
    assert [d["wrote"] for d in done] == [True, False, False, False]


def test_local_rank_0_fills_each_node_and_the_barrier_is_world_wide(
        nodes, cluster):
    made, _ = nodes
    done = cluster.run(cache_labels, "LOCAL_RANK")
    assert [d["found"] for d in done] == [4] * 4
    assert [d["wrote"] for d in done] == [True, False, True, False]
    writers_done = max(done[0]["end"], done[2]["end"])
    assert all(done[r]["start"] >= writers_done for r in (1, 3))
    for path in made.scratch:
        assert os.path.exists(os.path.join(path, "labels.cache"))


def test_on_shared_storage_local_rank_0_writes_once_per_node(
        nodes, cluster, tmp_path):
    shared = str(tmp_path)
    by_local = cluster.run(cache_labels, "LOCAL_RANK", shared)
    assert [d["wrote"] for d in by_local] == [True, False, True, False]
    os.remove(os.path.join(shared, "labels.cache"))
    by_rank = cluster.run(cache_labels, "RANK", shared)
    assert [d["wrote"] for d in by_rank] == [True, False, False, False]
    assert [d["found"] for d in by_rank] == [4] * 4
