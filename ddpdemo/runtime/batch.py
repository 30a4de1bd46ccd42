"""Ranks started by a batch system or an MPI launcher:
`Cluster(world_size=8, engines="slurm", sbatch_args=[...])` and
`Cluster(world_size=8, engines="mpi", mpiexec_args=[...])`. Plumbing for
ddpdemo.runtime.engines and its placement (README, "Past one machine";
tested on a real Slurm and a real Open MPI in tests/test_slurm.py and
tests/test_mpi.py).

Both are ipyparallel's own launchers, with three changes:
- a rank is the one Slurm or MPI gives its task (SLURM_PROCID,
  OMPI_COMM_WORLD_RANK; ddpdemo.runtime.engine.identify reads them), so the
  engines need no `--mpi` flag and no mpi4py;
- what a reader passes for their own cluster (partition, account, time
  limit, GPUs per task) is a list of sbatch or mpiexec options, spelled
  as on the command line, not ipyparallel's configuration traits;
- killing an MPI generation kills mpiexec's ranks too: SIGKILL to
  mpiexec alone cannot be forwarded, and would leave its ranks running.
A Slurm generation is one job: a restart cancels it (`scancel`) and
submits a new one.
"""
import contextlib
import functools
import os
import signal
import subprocess

import psutil
from ipyparallel.cluster.launcher import (MPIEngineSetLauncher,
                                          SlurmEngineSetLauncher)
from traitlets import List, Unicode

VERSION_TIMEOUT = 10.0   # s; `mpiexec --version`
# Cluster(...) keyword -> the launcher trait it sets.
ARGS = {"slurm": ("sbatch_args", "sbatch_args"),
        "mpi": ("mpiexec_args", "mpi_args")}


class SlurmRanksLauncher(SlurmEngineSetLauncher):
    """One Slurm job per generation: `srun` starts one engine per task.

    sbatch_args: options for sbatch ("--partition=gpu",
    "--gpus-per-task=1", ...), written into the batch script as
    #SBATCH lines, where `scontrol show job` shows them in the job's
    record.
    """

    sbatch_args = List(Unicode()).tag(to_dict=True)
    default_template = Unicode("""#!/bin/sh
#SBATCH --export=ALL
#SBATCH --job-name=ddpdemo-{cluster_id}
srun {program_and_args}
""")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # ipyparallel writes the script to the working directory, the
        # reader's; this cluster's own directory is the place for it.
        self.batch_file = os.path.join(
            self.profile_dir, f"{self.engine_set_id}.sbatch")

    def _insert_options_in_script(self):
        super()._insert_options_in_script()
        if self.sbatch_args:
            # The script is a format string: a brace must stay a brace.
            lines = [f"#SBATCH {a}".replace("{", "{{").replace("}", "}}")
                     for a in self.sbatch_args]
            first, rest = self.batch_template.split("\n", 1)
            self.batch_template = "\n".join([first, *lines, rest])


class MPIRanksLauncher(MPIEngineSetLauncher):
    """mpiexec -n <world_size> [mpiexec_args] <engine>: one engine per
    MPI rank, without ipyparallel's `--mpi` (which imports mpi4py)."""

    @property
    def program(self):
        return self.engine_cmd

    def find_args(self):
        """mpiexec's command line. Open MPI passes a rank on another host
        only the variables `-x` names; the engine needs its own (where
        the controller is, PYTHONPATH, ...), so each is named. MPICH's
        mpiexec passes the whole environment."""
        args = super().find_args()
        if not open_mpi(self.mpi_cmd):
            return args
        at = len(self.mpi_cmd)
        names = [a for name in self.get_env() for a in ("-x", name)]
        return args[:at] + names + args[at:]

    def signal(self, sig):
        """SIGKILL: the ranks first (mpiexec's children on this host),
        then mpiexec; on other hosts its daemons end with it."""
        if sig != signal.SIGKILL or self.state != "running":
            return super().signal(sig)
        try:
            ranks = psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            ranks = []
        for p in [*ranks, self.process]:
            with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
                p.send_signal(signal.SIGKILL)


def open_mpi(mpi_cmd):
    """Whether this mpiexec is Open MPI's (asked once per command)."""
    return _open_mpi(tuple(mpi_cmd))


@functools.cache
def _open_mpi(mpi_cmd):
    try:
        out = subprocess.run([*mpi_cmd, "--version"], capture_output=True,
                             text=True, timeout=VERSION_TIMEOUT).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    return "Open MPI" in out or "OpenRTE" in out


LAUNCHERS = {"slurm": SlurmRanksLauncher, "mpi": MPIRanksLauncher}


def keywords(launcher):
    """The Cluster keyword of this launcher's own settings, if it has one:
    ("sbatch_args",) for Slurm, ("mpiexec_args",) for MPI, else ()."""
    return ARGS[launcher][:1] if launcher in ARGS else ()


def launch_args(launcher, ipp_kwargs):
    """The launcher traits a Cluster's own keyword sets ({} if none),
    popped from ipp_kwargs: sbatch_args=[...] (Slurm), mpiexec_args=[...]
    (MPI)."""
    keyword, trait = ARGS.get(launcher, (None, None))
    if keyword is None or keyword not in ipp_kwargs:
        return {}
    return {trait: [str(a) for a in ipp_kwargs.pop(keyword)]}
