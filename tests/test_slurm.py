"""`Cluster(world_size=4, engines="slurm")` on a real Slurm: Debian's
munged, slurmctld and a slurmd on each of the two test hosts
(tests/slurm_hosts.py on tests/hosts.py's TwoHosts), two ranks per node.

    flock /tmp/ddpdemo-netns.lock \\
        .venv/bin/python -m pytest tests/test_slurm.py

The cluster runs on host a, as a notebook on a login node would; its
engines are one Slurm job, submitted with sbatch through ipyparallel's
Slurm launcher (ddpdemo.runtime.batch). tests/batch_scenario.py plays the
cluster's life there; the tests below check what it saw, and what Slurm
and the hosts say afterwards. Needs root, `ip netns`, openssh-server and
Debian's slurmctld, slurmd, munge and slurm-client; without them the
tests skip and say why.
"""
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

import batch_scenario
import slurm_hosts
import hosts
import needs
from ddpdemo.runtime import processes

SCENARIO_TIMEOUT = 180   # s; measured about 25 s on the loaded 2-core box
SETTLE = 15.0            # s; for cancelled jobs and their processes to go
# What a reader passes for their own cluster, as sbatch options.
SBATCH_ARGS = [f"--partition={slurm_hosts.PARTITION}",
               "--account=ddpdemo-readers", "--time=00:10:00",
               "--gpus-per-task=1"]
pytestmark = pytest.mark.timeout(SCENARIO_TIMEOUT + 120)


def missing():
    """Why two hosts with Slurm cannot be made here, or None (conftest's
    two_hosts reads it too)."""
    return slurm_hosts.missing()


@pytest.fixture(scope="module")
def slurm(two_hosts):
    """Hosts a and b running Slurm; all removed afterwards, even if a
    test fails."""
    made = slurm_hosts.Slurm(two_hosts).start()
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="module")
def seen(slurm):
    """Run the scenario on host a; what it saw."""
    kwargs = dict(engines="slurm", sbatch_args=SBATCH_ARGS,
                  controller_ip=hosts.ADDRESSES["a"])
    # TMPDIR: the cluster's directory (its profile, the batch script, the
    # engines' log) goes inside the hosts' own, shared by both nodes.
    seen = slurm.hosts.run_scenario(
        "a", batch_scenario.__file__, kwargs,
        slurm.env(dict(os.environ, TMPDIR=slurm.hosts.tmp)),
        SCENARIO_TIMEOUT, log=lambda: slurm.log_tail("slurmctld"))
    print(f"times (s, from Cluster(...)): {seen['times']}")   # pytest -s
    return seen


def settled(check, wait=SETTLE):
    """check()'s last value once it is falsy, or when `wait` s ran out."""
    deadline = time.monotonic() + wait
    while True:
        value = check()
        if not value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def test_the_ranks_are_one_slurm_job_on_both_nodes(seen):
    probe = seen["probe"]
    assert [p["sum"] for p in probe] == [[16, 20]] * 4   # 1+3+5+7, 2+4+6+8
    # Rank r is Slurm's task r (SLURM_PROCID), two on each node...
    assert [p["env"]["SLURM_PROCID"] for p in probe] == ["0", "1", "2", "3"]
    assert [p["host"] for p in probe] == ["hosta", "hosta", "hostb", "hostb"]
    assert [p["env"]["LOCAL_RANK"] for p in probe] == ["0", "1", "0", "1"]
    # ...all in one job.
    assert len({p["env"]["SLURM_JOB_ID"] for p in probe}) == 1


def test_what_the_reader_passes_reaches_the_jobs_record(seen, slurm):
    job = slurm.job(seen["probe"][0]["env"]["SLURM_JOB_ID"])
    assert job["Partition"] == slurm_hosts.PARTITION
    assert job["Account"] == "ddpdemo-readers"
    assert job["TimeLimit"] == "00:10:00"
    assert job["TresPerTask"] == "gres:gpu:1"
    assert job["NumTasks"] == "4" and job["NodeList"] == "hosta,hostb"


def test_a_lonely_barrier_on_hostb_is_named_with_stack_and_ledger(seen):
    batch_scenario.check_named_hang(seen["hang"])


def test_a_restart_is_a_new_job_and_the_old_one_is_cancelled(seen, slurm):
    old = seen["probe"][0]["env"]["SLURM_JOB_ID"]
    after = seen["after_hang"]
    assert [p["sum"] for p in after] == [[16, 20]] * 4
    new = {p["env"]["SLURM_JOB_ID"] for p in after}
    assert len(new) == 1 and old not in new
    assert [p["env"]["SLURM_PROCID"] for p in after] == ["0", "1", "2", "3"]
    assert slurm.job(old)["JobState"] == "CANCELLED"


def test_stop_leaves_no_job_and_no_engine_on_either_node(seen, slurm):
    assert settled(slurm.jobs) == []
    for p in seen["after_hang"]:
        assert slurm.job(p["env"]["SLURM_JOB_ID"])["JobState"] == \
            "CANCELLED"
    # The daemons stay (slurmctld's helper, slurmscriptd, among them);
    # every job's processes (slurmstepd, srun, the engines) must go.
    keep = set(slurm.daemon_pids().values()) | \
        set(slurm.hosts.sshd_pids().values()) | \
        {p.pid for p in psutil.Process(
            slurm.daemon_pids()["slurmctld"]).children()}

    assert hosts.leftovers(slurm.hosts.namespaces, keep, SETTLE) == {}
    assert not os.path.exists(seen["tmpdir"])


def test_sweep_removes_the_daemons_jobs_and_files_of_a_killed_run():
    """A run killed outright (SIGKILL: no finally runs) leaves Slurm's
    daemons, a running job and its files; sweep() removes them all."""
    why = missing()
    if why:
        needs.missing(f"a real Slurm needs: {why}")
    run = subprocess.Popen([sys.executable, slurm_hosts.__file__],
                           stdout=subprocess.PIPE, text=True)
    try:
        line = run.stdout.readline()      # once a job runs
        made = json.loads(line)
        assert made["jobs"], made
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
    pids = [pid for ns in made["namespaces"]
            for pid in hosts.namespace_pids(ns)]
    assert pids and os.path.exists(made["tmp"])   # left behind...
    hosts.sweep()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True,
                            text=True, timeout=10).stdout
    assert not any(ns in listed for ns in made["namespaces"])
    assert not [pid for pid in pids if processes.alive(pid)]
    assert not os.path.exists(made["tmp"])        # ...and swept
