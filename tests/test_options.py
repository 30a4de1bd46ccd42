"""ddpdemo.runtime.options: what a Cluster may be asked for, checked
before anything starts (no engines here: pure checks)."""
import pytest

from ddpdemo.runtime import options


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
