"""ddpdemo past one machine: `Cluster(world_size=4, engines="ssh")` on two
hosts made of network namespaces (tests/hosts.py), two ranks on each.

    .venv/bin/python -m pytest tests/test_multihost.py

The cluster runs on host a, where a notebook kernel would; every engine,
on a and on b, is started over ssh. This file is also the script that
runs there (`python tests/test_multihost.py ARGS_JSON`): it plays one
scenario (all_reduce, chapter 4's label cache in each host's own /tmp, a
hang on a host-b rank, a host-b rank that dies, restarts, stop) and
prints what it saw as one JSON line, which the tests below check. Needs
root, `ip netns` and Debian's openssh-server; without them the cluster
tests skip and say why.
"""
import ipaddress
import json
import os
import subprocess
import sys
import time

import pytest

import hosts
import needs
from ddpdemo import devices

SCENARIO_TIMEOUT = 240   # s; measured about 60 s on the loaded 2-core box
HANG_TIMEOUT = 3.0       # s; the lonely barrier's bound
LINK = ipaddress.ip_network(f"{hosts.ADDRESSES['a']}/{hosts.PREFIXLEN}",
                            strict=False)
pytestmark = pytest.mark.timeout(SCENARIO_TIMEOUT + 60)


# -- on the ranks ------------------------------------------------------
def probe():
    """One all_reduce, then what this rank used to do it: its host, the
    interface gloo was given, and its TCP connections to other processes
    (local, remote address). A pair whose two ends are both this process
    is left out: each engine holds one on 127.0.0.1 for its own use."""
    import ipaddress
    import os
    import socket
    import psutil
    import torch
    import torch.distributed as dist
    t = torch.tensor([dist.get_rank() + 1])
    dist.all_reduce(t)                      # 1 + 2 + 3 + 4 = 10

    def ip(address):                        # ::ffff:10.0.0.1 -> 10.0.0.1
        a = ipaddress.ip_address(address.ip)
        return str(getattr(a, "ipv4_mapped", None) or a), address.port

    ends = [(ip(c.laddr), ip(c.raddr)) for c in
            psutil.Process().net_connections(kind="inet")
            if c.status == psutil.CONN_ESTABLISHED]
    mine = {local for local, _ in ends}
    links = {(local[0], remote[0]) for local, remote in ends
             if remote not in mine}
    from ddpdemo.runtime import engine
    store = engine._keep["client_store"]     # the group's TCPStore
    return {"sum": int(t), "host": socket.gethostname(),
            "gloo_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
            "store": store.host, "links": sorted(links)}


def cache_in_host_tmp(zero_first_by, directory):
    """Chapter 4's program (ddpdemo.examples.node_cache) with `directory`
    in this host's own /tmp; removed again once every rank has read."""
    import os
    import shutil
    import socket
    import torch.distributed as dist
    from ddpdemo.examples.node_cache import cache_labels
    os.makedirs(directory, exist_ok=True)
    done = cache_labels(zero_first_by, directory)
    dist.barrier()                          # every rank has read
    shutil.rmtree(directory, ignore_errors=True)
    return {"host": socket.gethostname(),
            "local_rank": int(os.environ["LOCAL_RANK"]),
            "wrote": done["wrote"], "found": done["found"]}


def lonely_barrier_on_rank_3():
    import torch.distributed as dist
    if dist.get_rank() == 3:
        dist.barrier()
    return dist.get_rank()


def rank_2_dies():
    import os
    import torch.distributed as dist
    if dist.get_rank() == 2:
        os._exit(3)
    dist.barrier()


# -- the scenario, run on host a -----------------------------------------
def scenario(args):
    """Everything the tests check, in one cluster's life. Returns a dict."""
    import glob
    from ddpdemo import Cluster, HangError, RankError
    seen, began = {"times": {}}, time.monotonic()

    def lap(name):
        seen["times"][name] = round(time.monotonic() - began, 1)

    cluster = Cluster(
        world_size=4, backend="gloo", timeout=30, engines="ssh",
        hosts={"hosta": 2, "hostb": 2}, ssh_args=["-F", args["ssh_config"]],
        controller_ip=hosts.ADDRESSES["a"])
    try:
        cluster.start()
        lap("start")
        seen["rendezvous"] = cluster.rendezvous
        seen["probe"] = cluster.run(probe)
        lap("probe")
        seen["node_cache"] = {
            by: cluster.run(cache_in_host_tmp, by, args["node_dir"])
            for by in ("RANK", "LOCAL_RANK")}
        lap("node cache")
        try:
            cluster.run(lonely_barrier_on_rank_3, timeout=HANG_TIMEOUT)
        except HangError as exc:
            seen["hang"] = {"ranks": exc.ranks, "message": str(exc),
                            "stack": [f for _, _, f in
                                      exc.stacks.get(3) or []]}
        lap("hang")
        seen["after_hang"] = [p["sum"] for p in cluster.run(probe)]
        lap("restart after hang")
        try:
            cluster.run(rank_2_dies)
        except RankError as exc:
            seen["death"] = {"errors": exc.errors, "message": str(exc)}
        lap("death")
        seen["after_death"] = [p["sum"] for p in cluster.run(probe)]
        lap("restart after death")
        pattern = cluster.tmpdir + "-*"
        seen["remote_dirs"] = sorted(glob.glob(pattern))
    finally:
        tmpdir = cluster.tmpdir
        cluster.stop()
    lap("stop")
    seen["left_dirs"] = sorted(glob.glob(tmpdir + "*"))
    seen["left_processes"] = hosts.leftovers(args["namespaces"],
                                              args["keep_pids"])
    return seen


# -- the tests -----------------------------------------------------------
def test_gloo_interface_on_one_machine():
    """Toward loopback the rule picks loopback: what a local cluster
    pins (no root needed)."""
    assert devices.address_toward("127.0.0.1") == "127.0.0.1"
    assert devices.gloo_interface("127.0.0.1") == \
        devices.loopback_interface()
    with pytest.raises(LookupError, match="no interface"):
        devices.interface_of("198.51.100.1")   # TEST-NET-2: nobody's


def test_ssh_hosts_must_hold_world_size_ranks():
    import types
    from ddpdemo.runtime.ssh import SSHRanks
    with pytest.raises(ValueError, match="hold 3 ranks, but world_size=4"):
        SSHRanks(4, {"a": 2, "b": 1})
    ranks = SSHRanks(3, {"a": 2, "me@b:2222": 1})
    assert ranks.slots == [("a", 0), ("a", 1), ("me@b:2222", 0)]
    # Each host's directory is named after the cluster's own when it
    # starts (the engines' tmpdir).
    ranks.start(types.SimpleNamespace(tmpdir="/tmp/ddpdemo-x/"))
    assert ranks.remote_dirs == {"a": "/tmp/ddpdemo-x-a",
                                 "me@b:2222": "/tmp/ddpdemo-x-me_b_2222"}


def test_a_host_ssh_cannot_reach_fails_at_start_and_cleans_up(
        tmp_path, monkeypatch):
    """Port 1 on loopback refuses at once: ssh's own error is shown."""
    import tempfile
    from ddpdemo import Cluster
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n    BatchMode yes\n    ConnectTimeout 5\n")
    cluster = Cluster(world_size=1, backend="gloo", engines="ssh",
                      hosts={"127.0.0.1:1": 1},
                      ssh_args=["-F", str(config)])
    with pytest.raises(RuntimeError, match=r"(?s)could not start an engine"
                       r" on 127\.0\.0\.1 over ssh.*refused"):
        cluster.start()
    assert cluster.state.value == "stopped" and cluster.tmpdir is None
    assert list(scratch.iterdir()) == []      # its directory is gone


def test_sweep_removes_what_a_killed_run_left():
    why = hosts.missing()
    if why:
        needs.missing(f"network namespaces: {why}")
    gone = subprocess.Popen(["true"])
    gone.wait(timeout=10)                  # a pid whose process is gone
    name = f"{hosts.PREFIX}-{gone.pid}-test-a"
    directory = os.path.join("/tmp", f"{hosts.PREFIX}-{gone.pid}-test-x")
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=10)
    os.makedirs(directory)
    hosts.sweep()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True,
                            text=True, timeout=10).stdout
    assert name not in listed and not os.path.exists(directory)


@pytest.fixture(scope="module")
def seen(two_hosts):
    """Run the scenario on host a; what it saw."""
    args = {"ssh_config": two_hosts.ssh_config,
            "namespaces": two_hosts.namespaces,
            "keep_pids": list(two_hosts.sshd_pids().values()),
            # In /tmp, which each host has to itself.
            "node_dir": os.path.join(
                "/tmp", os.path.basename(two_hosts.tmp) + "-labels")}
    # TMPDIR: the cluster's directories, on both hosts, go inside the
    # hosts' own, which the fixture removes even if the scenario fails.
    seen = two_hosts.run_scenario(
        "a", os.path.abspath(__file__), args,
        dict(os.environ, TMPDIR=two_hosts.tmp), SCENARIO_TIMEOUT)
    # The hosts' /tmp are not this machine's: nothing of theirs here.
    assert not os.path.exists(args["node_dir"])
    return seen


def test_all_reduce_sums_on_every_rank_of_both_hosts(seen):
    assert [p["host"] for p in seen["probe"]] == \
        ["hosta", "hosta", "hostb", "hostb"]
    assert [p["sum"] for p in seen["probe"]] == [10] * 4


def test_gloo_and_rendezvous_use_the_link_never_loopback(seen):
    assert seen["rendezvous"] == "tcp"
    # Rank 0 is on host a, and opened the store at its address there.
    assert [p["store"] for p in seen["probe"]] == [hosts.ADDRESSES["a"]] * 4
    assert [p["gloo_ifname"] for p in seen["probe"]] == \
        ["veth-a", "veth-a", "veth-b", "veth-b"]
    for rank, p in enumerate(seen["probe"]):
        ends = {ipaddress.ip_address(ip) for link in p["links"]
                for ip in link}
        # Every connection of every rank (gloo's pairs, the TCPStore,
        # ipyparallel's) runs over the veth link, none over loopback...
        assert ends and all(ip in LINK for ip in ends), (rank, p["links"])
        # ...and each rank talks to the other host.
        mine = hosts.ADDRESSES["a" if rank < 2 else "b"]
        other = hosts.ADDRESSES["b" if rank < 2 else "a"]
        assert any(local == mine and remote == other
                   for local, remote in p["links"]), (rank, p["links"])


def test_each_host_has_its_own_tmp_so_local_rank_0_must_fill_it(seen):
    """Chapter 4 on real hosts: rank 0 alone fills host a's /tmp, and
    host b's ranks find nothing in theirs; zero-first by LOCAL_RANK has
    one writer per host, and every rank finds the labels."""
    by_rank, by_local = (seen["node_cache"][k] for k in ("RANK", "LOCAL_RANK"))
    assert [(r["host"], r["local_rank"]) for r in by_rank] == \
        [("hosta", 0), ("hosta", 1), ("hostb", 0), ("hostb", 1)]
    assert [r["wrote"] for r in by_rank] == [True, False, False, False]
    assert [r["found"] for r in by_rank] == [4, 4, None, None]
    assert [r["wrote"] for r in by_local] == [True, False, True, False]
    assert [r["found"] for r in by_local] == [4] * 4


def test_a_lonely_barrier_on_host_b_is_named_with_its_stack(seen):
    hang = seen["hang"]
    assert hang["ranks"] == [3]
    assert "rank 3 is blocked in barrier(), called from:" in hang["message"]
    # The stack came from rank 3 itself, over the link: no local pid.
    assert hang["stack"][0] == "lonely_barrier_on_rank_3"
    assert hang["stack"][-1] == "barrier"


def test_a_rank_that_dies_on_host_b_raises_rank_error(seen):
    errors = {int(r): text for r, text in seen["death"]["errors"].items()}
    assert sorted(errors) == [0, 1, 2, 3], seen["death"]["message"]
    # Its pid is on host b: no exit status here, but the controller's
    # heartbeat says it is gone...
    assert errors[2] == "process died (exit status not available)"
    # ...and its peers' gloo reads from it, across the link, failed.
    for rank in (0, 1, 3):
        assert f"[{hosts.ADDRESSES['b']}]" in errors[rank], errors[rank]


def test_the_cluster_recovers_across_hosts(seen):
    assert seen["after_hang"] == [10] * 4
    assert seen["after_death"] == [10] * 4


def test_stop_leaves_no_process_and_no_file_on_either_host(seen):
    assert len(seen["remote_dirs"]) == 2     # one per host while running
    assert seen["left_dirs"] == []
    assert seen["left_processes"] == {}


def test_closing_the_hosts_removes_namespaces_and_keys(two_hosts):
    two_hosts.close()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True,
                            text=True, timeout=10).stdout
    assert not any(ns in listed for ns in two_hosts.namespaces.values())
    assert not os.path.exists(two_hosts.tmp)


if __name__ == "__main__":
    result = scenario(json.loads(sys.argv[1]))
    print(json.dumps(result), flush=True)
