"""ddpdemo.runtime.batch without a batch system: what the Slurm launcher writes
and what the MPI launcher runs. The real Slurm and MPI are in
tests/test_slurm.py and tests/test_mpi.py (root and Debian's packages)."""
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from ddpdemo.runtime import batch, engine

pytestmark = [pytest.mark.timeout(60), pytest.mark.fast]


def test_sbatch_args_are_sbatch_lines_in_the_clusters_directory(tmp_path):
    launcher = batch.SlurmRanksLauncher(
        profile_dir=str(tmp_path), cluster_id="c1", engine_set_id="g0",
        sbatch_args=["--partition=gpu", "--gpus-per-task=1",
                     "--comment={braces}"])
    launcher.program = ["python", "-m", "ipyparallel.engine"]
    launcher.write_batch_script(4)
    assert launcher.batch_file == str(tmp_path / "g0.sbatch")
    lines = (tmp_path / "g0.sbatch").read_text().splitlines()
    assert lines[0] == "#!/bin/sh"
    for line in ("#SBATCH --partition=gpu", "#SBATCH --gpus-per-task=1",
                 "#SBATCH --comment={braces}", "#SBATCH --ntasks=4",
                 "srun python -m ipyparallel.engine"):
        assert line in lines
    assert not os.path.exists("g0.sbatch")      # not in the working dir


def test_cluster_keywords_become_launcher_traits():
    kwargs = {"sbatch_args": ["-p", "gpu"], "controller_ip": "10.0.0.1"}
    assert batch.launch_args("slurm", kwargs) == {"sbatch_args": ["-p",
                                                                  "gpu"]}
    assert kwargs == {"controller_ip": "10.0.0.1"}     # the rest: ipp's
    assert batch.launch_args("mpi", {"mpiexec_args": ["-x", "A"]}) == \
        {"mpi_args": ["-x", "A"]}
    # What a Cluster may be given for each launcher (options.placement
    # rejects the rest: tests/test_options.py).
    assert batch.keywords("slurm") == ("sbatch_args",)
    assert batch.keywords("mpi") == ("mpiexec_args",)
    assert batch.keywords("pbs") == ()


def fake_mpiexec(tmp_path, version):
    path = tmp_path / "mpiexec"
    path.write_text(f"#!/bin/sh\necho '{version}'\n")
    path.chmod(0o755)
    return [str(path)]


@pytest.mark.parametrize("version,named", [
    ("mpiexec (OpenRTE) 4.1.4", True),
    ("HYDRA build details:", False)])       # MPICH passes everything
def test_open_mpi_is_told_each_variable_the_engines_need(
        tmp_path, version, named):
    launcher = batch.MPIRanksLauncher(
        mpi_cmd=fake_mpiexec(tmp_path, version), mpi_args=["--host", "a:2"],
        environment={"IPP_CONNECTION_INFO": "{}", "PYTHONPATH": "/x"},
        engine_cmd=["python", "-m", "ipyparallel.engine"])
    launcher.n = 2
    args = launcher.find_args()[1:]
    exported = [args[i + 1] for i, a in enumerate(args) if a == "-x"]
    assert ({"IPP_CONNECTION_INFO", "PYTHONPATH"} <= set(exported)) == named
    # No --mpi: the engines need no mpi4py.
    assert args[-3:] == ["python", "-m", "ipyparallel.engine"]
    assert args[args.index("-n") + 1] == "2"


def test_killing_an_mpi_generation_kills_its_ranks_too(tmp_path):
    """SIGKILL to mpiexec alone would leave its children running."""
    script = "sleep 60 & sleep 60 & wait"
    launcher = batch.MPIRanksLauncher()
    launcher.process = psutil.Popen(
        ["sh", "-c", script], start_new_session=True)
    launcher.pid = launcher.process.pid
    launcher.state = "running"
    children, deadline = [], time.monotonic() + 10
    while len(children) < 2 and time.monotonic() < deadline:
        children = launcher.process.children()
        time.sleep(0.01)
    assert len(children) == 2
    launcher.signal(signal.SIGKILL)
    # Each wait raises if its process is still alive; mpiexec may exit
    # on its own once its ranks are gone, before its SIGKILL lands.
    for process in [launcher.process, *children]:
        process.wait(timeout=10)


@pytest.mark.parametrize("variable", engine.RANK_VARIABLES)
def test_an_engine_knows_the_rank_its_launcher_gave(variable):
    env = {k: v for k, v in os.environ.items()
           if k not in engine.RANK_VARIABLES}
    env[variable] = "3"
    code = "from ddpdemo.runtime import engine; print(engine.identify()[0])"
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=30).stdout
    assert out.strip() == "3"
