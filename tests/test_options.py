"""ddpdemo.runtime.options: what a Cluster may be asked for, checked
before anything starts (no engines here: pure checks)."""
import datetime

import pytest

from ddpdemo.runtime import options
from ddpdemo.runtime.cluster import Cluster
from ddpdemo.runtime.placement import (LauncherPlacement, LocalPlacement,
                                       ProfilePlacement)
from ddpdemo.runtime.ssh import SSHRanks

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("world_size,backend,timeout", [
    (1, "gloo", 1), (4, "auto", 2.5), (8, "nccl", 1e6)])
def test_good_input_passes_and_returns_nothing(world_size, backend, timeout):
    assert options.check_args(world_size, backend, timeout) is None


@pytest.mark.parametrize("args,error,text", [
    ((True, "gloo", 1), TypeError, "world_size"),
    ((0, "gloo", 1), ValueError, "world_size"),
    ((2, "mpi", 1), ValueError, "'auto', 'gloo', 'nccl'"),
    ((2, "gloo", float("nan")), ValueError, "positive number"),
    ((2, "gloo", False), TypeError, "positive number"),
])
def test_bad_input_names_what_is_accepted(args, error, text):
    with pytest.raises(error, match=text):
        options.check_args(*args)


def test_the_variable_decides_what_auto_means(monkeypatch):
    monkeypatch.delenv(options.BACKEND_VARIABLE, raising=False)
    assert options.requested_backend("auto") == "auto"
    monkeypatch.setenv(options.BACKEND_VARIABLE, "gloo")
    assert options.requested_backend("auto") == "gloo"
    assert options.requested_backend("nccl") == "nccl"   # asked: obeyed


def test_a_file_store_needs_every_rank_here():
    assert options.check_rendezvous(None, local=True) == "file"
    assert options.check_rendezvous(None, local=False) == "tcp"
    assert options.check_rendezvous("tcp", local=True) == "tcp"
    with pytest.raises(ValueError, match="use 'tcp'"):
        options.check_rendezvous("file", local=False)
    with pytest.raises(ValueError, match="unknown rendezvous"):
        options.check_rendezvous("udp", local=True)


@pytest.mark.parametrize("engines,profile,kwargs,text", [
    ("local", None, {"sbatch_arg": ["-p", "gpu"]},
     r"sbatch_arg for engines='local'"),                  # a misspelling
    ("local", None, {"sbatch_args": []},
     r"sbatch_args for engines='local'"),                 # another's option
    ("local", None, {"controller_ip": "10.0.0.1"}, "controller_ip"),
    ("slurm", None, {"hosts": {"a": 2}},
     r"hosts for engines='slurm' \(which takes controller_ip, sbatch_args"),
    ("mpi", None, {"sbatch_args": []}, "sbatch_args for engines='mpi'"),
    ("ssh", None, {"hosts": {"a": 2}, "mpiexec_args": []}, "mpiexec_args"),
    ("ssh", None, {}, r"engines='ssh' needs hosts="),
    (None, "mine", {"controller_ip": "10.0.0.1"},
     r"controller_ip for profile='mine' \(which takes none"),
])
def test_a_keyword_the_placement_does_not_take_is_a_type_error(
        engines, profile, kwargs, text):
    with pytest.raises(TypeError, match=text):
        options.placement(2, engines, profile, kwargs)


def test_an_unknown_launcher_is_named():
    with pytest.raises(ValueError, match="unknown engines='slrum'"):
        options.placement(2, "slrum")


def test_each_keyword_reaches_its_placement():
    assert isinstance(options.placement(2), LocalPlacement)
    assert isinstance(options.placement(2, "ssh", None, {"hosts": {"a": 2}}),
                      SSHRanks)
    assert isinstance(options.placement(2, profile="mine"), ProfilePlacement)
    slurm = options.placement(2, "slurm", None, dict(
        sbatch_args=["-p", 7], controller_ip="10.0.0.1"))
    assert isinstance(slurm, LauncherPlacement)
    assert slurm.launch_args == {"sbatch_args": ["-p", "7"]}
    assert slurm.controller_kwargs == {"controller_ip": "10.0.0.1"}
    ssh = options.placement(2, "ssh", None, dict(
        hosts={"a": 1, "b": 1}, ssh_args=["-F", "c"], controller_ip="h"))
    assert ssh.ssh_args == ["-F", "c"] and ssh.slots == [("a", 0), ("b", 0)]
    assert ssh.controller_kwargs == {"controller_ip": "h"}


# Every Cluster value is checked when the cluster is made (nothing starts
# here), and the error names the parameter (issue 48).
@pytest.mark.parametrize("kwargs,error,text", [
    ({"group_timeout": -5}, ValueError,
     r"group_timeout must be a positive number of seconds"),
    ({"group_timeout": "soon"}, TypeError,
     r"group_timeout must be a positive number of seconds .* got 'soon'"),
    ({"group_timeout": datetime.timedelta(0)}, ValueError, "group_timeout"),
    ({"start_timeout": 0}, ValueError,
     r"^start_timeout must be a positive number of seconds"),
    ({"start_timeout": True}, TypeError, r"^start_timeout must be"),
    ({"timeout": float("inf")}, ValueError, r"^timeout must be"),
    ({"master_addr": 12345}, TypeError,
     r"master_addr must be a host name or IP address as a str, got 12345"),
    ({"master_addr": " "}, ValueError, r"master_addr must be a host name"),
    ({"engines": "ssh", "hosts": {"a": 2}, "controller_ip": 10}, TypeError,
     r"controller_ip must be a host name or IP address as a str"),
    ({"spares": "no"}, TypeError, r"spares must be True or False, got 'no'"),
    ({"spares": 0}, TypeError, r"spares must be True or False, got 0"),
    ({"profile": "x", "engines": "slurm"}, ValueError,
     r"profile='x' and engines='slurm' conflict"),
    ({"profile": "x", "engines": "local"}, ValueError, r"conflict"),
    ({"profile": 3}, TypeError, r"profile must be the name"),
    ({"flight_recorder": -1}, ValueError, r"flight_recorder must be"),
    ({"env": {"OMP_NUM_THREADS": 1}}, TypeError,
     r"env must be a dict of str to str"),
    ({"env": ["X=1"]}, TypeError, r"env must be a dict"),
])
def test_a_wrong_cluster_value_is_named_when_the_cluster_is_made(
        kwargs, error, text):
    with pytest.raises(error, match=text):
        Cluster(world_size=2, **kwargs)


def test_timeouts_may_be_timedeltas_and_end_as_seconds():
    cluster = Cluster(world_size=2, timeout=datetime.timedelta(seconds=3),
                      group_timeout=datetime.timedelta(minutes=2),
                      start_timeout=90, master_addr="10.0.0.1",
                      spares=False)
    assert (cluster.timeout, cluster.group_timeout,
            cluster.start_timeout) == (3.0, 120.0, 90.0)
    assert cluster.master_addr == "10.0.0.1"
    assert cluster.spares is False
    # Unset, the group's timeout follows the run's bound.
    assert Cluster(world_size=2, timeout=100).group_timeout == 400.0


def test_reset_on_a_stopped_cluster_says_it_is_stopped():
    with pytest.raises(RuntimeError, match="this cluster is stopped"):
        Cluster(world_size=2).reset()
