"""ddpdemo.runtime.engine, the code each rank's engine runs, called here in one
process: a cell's last expression, tensors sent back on the CPU, the
rank's environment, and a one-rank gloo group through a FileStore."""
import os
import signal
import socket

import pytest
import torch
import torch.distributed as dist

from ddpdemo import devices
from ddpdemo.runtime import engine
from ddpdemo.runtime.rendezvous import FileRendezvous

pytestmark = pytest.mark.fast


@pytest.fixture
def namespace(monkeypatch):
    ns = {}
    monkeypatch.setattr(engine, "user_namespace", lambda: ns)
    return ns


def test_run_source_runs_statements_and_returns_the_last_repr(namespace):
    assert engine.run_source("x = 2\nx * 21", "<cell>") == "42"
    assert namespace["x"] == 2
    assert engine.run_source("y = x", "<cell>") is None
    assert engine.run_source("None", "<cell>") is None


def test_run_source_reports_the_cell_file_name(namespace):
    with pytest.raises(ZeroDivisionError) as info:
        engine.run_source("a = 1\n1 / 0", "<ranks abc>")
    assert info.traceback[-1].path == "<ranks abc>"


def test_to_cpu_detaches_tensors_in_plain_containers():
    t = torch.ones(2, requires_grad=True) * 2
    out = engine.to_cpu({"a": [t, (t, 3)], "b": "x"})
    assert not out["a"][0].requires_grad
    assert isinstance(out["a"][1], tuple) and out["a"][1][1] == 3
    assert torch.equal(out["a"][1][0], torch.tensor([2.0, 2.0]))


def test_call_returns_what_the_function_returns_on_the_cpu():
    assert engine.call(lambda a, b=0: torch.tensor([a + b]), (1,),
                       {"b": 2}).tolist() == [3]


def test_identify_reads_the_launch_rank(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    assert engine.identify() == (3, socket.gethostname())
    monkeypatch.delenv("RANK")
    assert engine.identify()[0] == -1


def test_prepare_sets_the_rank_environment_and_arms_a_dump(tmp_path,
                                                           monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "DDPDEMO_TEST"):
        # Set, then deleted: monkeypatch records a name it sets, so what
        # prepare() writes is undone after the test. A bare delenv of an
        # absent name records nothing, and RANK=1 leaked into every later
        # test's subprocesses (the Slurm and MPI engines read it first).
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    dump = tmp_path / "stack.txt"
    facts = engine.prepare(1, 0, 2, {"DDPDEMO_TEST": 7}, str(dump))
    try:
        assert facts["pid"] == os.getpid() and facts["rank"] == 1
        assert facts["gpus"] == devices.gpu_count()    # what "auto" reads
        assert (os.environ["RANK"], os.environ["LOCAL_RANK"],
                os.environ["WORLD_SIZE"]) == ("1", "0", "2")
        assert os.environ["DDPDEMO_TEST"] == "7"
        os.kill(os.getpid(), signal.SIGUSR1)   # faulthandler writes at once
        assert "test_prepare_sets" in dump.read_text()
    finally:
        import faulthandler
        faulthandler.unregister(signal.SIGUSR1)


def test_init_group_forms_a_one_rank_group(tmp_path, namespace,
                                           monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")
    try:
        assert engine.init_group(
            "gloo", 0, 1, 30.0,
            FileRendezvous(str(tmp_path / "store"))) == "gloo"
        assert (namespace["rank"], namespace["world_size"]) == (0, 1)
        assert namespace["device"] == torch.device("cpu")
        t = torch.tensor([5])
        dist.all_reduce(t)
        assert t.tolist() == [5]
    finally:
        dist.destroy_process_group()
