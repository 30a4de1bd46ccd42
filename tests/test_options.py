"""ddpdemo.runtime.options: what a Cluster may be asked for, checked
before anything starts (no engines here: pure checks)."""
import pytest

from ddpdemo.runtime import options
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
    ("local", "mine", {"controller_ip": "10.0.0.1"},
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
