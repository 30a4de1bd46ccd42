"""`Cluster(world_size=4, engines="mpi")` under a real mpiexec: Debian's
Open MPI starting two ranks on each of the two test hosts
(tests/hosts.py's TwoHosts), reaching host b over ssh as it would on a
cluster without a batch system.

    flock /tmp/ddpdemo-netns.lock .venv/bin/python -m pytest tests/test_mpi.py

The cluster runs on host a; ipyparallel's MPI launcher runs mpiexec
there (ddpdemo.runtime.batch). tests/batch_scenario.py plays the
cluster's life; the tests below check what it saw and what is left on the
hosts. Needs
root, `ip netns`, openssh-server and Debian's openmpi-bin; without them
the tests skip and say why.
"""
import os
import shutil

import pytest

import batch_scenario
import hosts

SCENARIO_TIMEOUT = 180   # s
SETTLE = 15.0            # s; for killed ranks and daemons to go
pytestmark = pytest.mark.timeout(SCENARIO_TIMEOUT + 60)


def missing():
    why = hosts.missing()
    if why:
        return why
    if shutil.which("mpiexec") is None or shutil.which("orted") is None:
        return "Debian's Open MPI (apt-get install openmpi-bin)"
    return None


def mpiexec_args(two_hosts):
    """What a reader passes to mpiexec: where the ranks go (two on each
    host, in rank order) and how to reach the other host; as root, Open
    MPI also wants to be told that is intended."""
    names = two_hosts.hostnames
    return ["--host", f"{names['a']}:2,{names['b']}:2",
            "--mca", "plm_rsh_agent", f"ssh -F {two_hosts.ssh_config}",
            "--allow-run-as-root"]


@pytest.fixture(scope="module")
def seen(two_hosts):
    kwargs = dict(engines="mpi", mpiexec_args=mpiexec_args(two_hosts),
                  controller_ip=hosts.ADDRESSES["a"])
    seen = two_hosts.run_scenario(
        "a", batch_scenario.__file__, kwargs,
        dict(os.environ, TMPDIR=two_hosts.tmp), SCENARIO_TIMEOUT)
    print(f"times (s, from Cluster(...)): {seen['times']}")   # pytest -s
    return seen


def test_rank_order_is_mpis_and_all_reduce_sums(seen):
    probe = seen["probe"]
    assert [p["sum"] for p in probe] == [[16, 20]] * 4   # 1+3+5+7, 2+4+6+8
    assert [p["env"]["OMPI_COMM_WORLD_RANK"] for p in probe] == \
        ["0", "1", "2", "3"]
    assert [p["host"] for p in probe] == ["hosta", "hosta", "hostb", "hostb"]
    assert [p["env"]["LOCAL_RANK"] for p in probe] == \
        [p["env"]["OMPI_COMM_WORLD_LOCAL_RANK"] for p in probe] == \
        ["0", "1", "0", "1"]


def test_a_lonely_barrier_on_hostb_is_named_with_stack_and_ledger(seen):
    batch_scenario.check_named_hang(seen["hang"])


def test_a_restart_is_a_new_mpiexec(seen):
    after = seen["after_hang"]
    assert [p["sum"] for p in after] == [[16, 20]] * 4
    assert [p["env"]["OMPI_COMM_WORLD_RANK"] for p in after] == \
        ["0", "1", "2", "3"]
    assert not {p["pid"] for p in after} & {p["pid"] for p in seen["probe"]}


def test_stop_leaves_no_process_and_no_file_on_either_host(seen, two_hosts):
    assert hosts.leftovers(two_hosts.namespaces,
                           two_hosts.sshd_pids().values(), SETTLE) == {}
    assert not os.path.exists(seen["tmpdir"])
