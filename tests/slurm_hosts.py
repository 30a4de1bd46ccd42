"""A real Slurm on the two test hosts (tests/hosts.py's TwoHosts), for
tests/test_slurm.py: Debian's munged, slurmctld and two slurmd, started
with a configuration, key, sockets, spool and state made for this run in
the hosts' own directory, never the system's.

    hosts = TwoHosts().start()
    slurm = Slurm(hosts).start()        # needs root and Debian's slurm
    try:
        hosts.popen("a", ["sbatch", ...], env=slurm.env())
    finally:
        slurm.close()                   # daemons and jobs
        hosts.close()                   # namespaces, files

The controller and node "hosta" run on host a, node "hostb" on host b,
each at its address on the hosts' private link, with ports that are free
there (nothing else lives in those namespaces). munged's socket is a
file, so the one munged (on host a) serves both. Everything runs inside
the namespaces and under the hosts' directory: TwoHosts.close(), and
hosts.sweep() after a killed run, remove daemons, jobs (their
state is in that directory) and files alike.

A container has no systemd and maybe no usable cgroups, so processes are
tracked through /proc (proctrack/linuxproc), tasks are not confined
(task/none), and nothing is accounted.
"""
import contextlib
import os
import shutil
import subprocess
import time

from ddpdemo.runtime import waiting

import hosts as hostlib

DAEMONS = {"munged": "/usr/sbin/munged", "slurmctld": "/usr/sbin/slurmctld",
           "slurmd": "/usr/sbin/slurmd"}
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "srun")
CTLD_PORT, SLURMD_PORT = 6817, 6818     # inside our namespaces only
CPUS = 2            # per node, as configured: 2 ranks on each host
# Per node, two "GPUs" that are character devices every machine has, so
# that --gpus-per-task reaches the job's record (no rank uses them).
GPU_FILES = ("/dev/null", "/dev/zero")
GPUS = len(GPU_FILES)
PARTITION = "ddpdemo"
START_TIMEOUT = 30.0    # s; both nodes idle in ~2 s on the 2-core box
STEP_TIMEOUT = 10.0     # s; one client command


def missing():
    """Why Slurm cannot run here, or None if it can."""
    why = hostlib.missing()
    if why:
        return why
    for name, path in DAEMONS.items():
        if not os.path.exists(path):
            return (f"needs Debian's {name} (apt-get install slurmctld "
                    "slurmd munge slurm-client)")
    for tool in CLIENTS:
        if shutil.which(tool) is None:
            return f"needs `{tool}` (apt-get install slurm-client)"
    return None


class Slurm:
    """munged + slurmctld on host a, a slurmd on each host; `env()` is
    the environment a client (sbatch, squeue, ...) needs."""

    def __init__(self, hosts):
        self.hosts = hosts
        self.dir = os.path.join(hosts.tmp, "slurm")
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.socket = os.path.join(self.dir, "munge.socket")
        self.nodes = dict(hosts.hostnames)        # {"a": "hosta", ...}
        self._procs = {}

    def env(self, base=None):
        """Environment for Slurm's clients: our configuration."""
        return dict(os.environ if base is None else base,
                    SLURM_CONF=self.conf)

    def start(self):
        try:
            os.makedirs(self.dir)
            os.chmod(self.dir, 0o711)   # munged: its socket's directory
            self._munge()
            self._configure()
            self._daemon("a", "slurmctld", ["/usr/sbin/slurmctld", "-D",
                                            "-i", "-f", self.conf])
            for host, node in self.nodes.items():
                self._daemon(host, f"slurmd-{node}", [
                    "/usr/sbin/slurmd", "-D", "-f", self.conf, "-N", node])
            self._wait_idle()
        except BaseException:
            self.close()
            raise
        return self

    def _munge(self):
        """A key for this run, and munged with its own socket and files."""
        key = os.path.join(self.dir, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self._daemon("a", "munged", [
            DAEMONS["munged"], "-F", "--force", f"--key-file={key}",
            f"--socket={self.socket}",
            f"--pid-file={self.dir}/munged.pid",
            f"--log-file={self.dir}/munged.log",
            f"--seed-file={self.dir}/munged.seed"])
        def opened():
            self._check_alive()
            return os.path.exists(self.socket)

        if not waiting.until(opened, START_TIMEOUT, every=0.05):
            raise TimeoutError("munged did not open its socket")

    def _configure(self):
        d = self.dir
        nodes = ",".join(self.nodes.values())
        lines = [
            "ClusterName=ddpdemo",
            f"SlurmctldHost={self.nodes['a']}"
            f"({hostlib.ADDRESSES['a']})",
            f"SlurmctldPort={CTLD_PORT}", f"SlurmdPort={SLURMD_PORT}",
            "AuthType=auth/munge", "CredType=cred/munge",
            f"AuthInfo=socket={self.socket}",
            "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool-%n",
            f"SlurmctldPidFile={d}/slurmctld.pid",
            f"SlurmdPidFile={d}/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/slurmctld.log",
            f"SlurmdLogFile={d}/slurmd-%n.log",
            # No systemd, maybe no cgroups: /proc, and nothing confined.
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none", "SwitchType=switch/none",
            "MpiDefault=none", "LaunchType=launch/slurm",
            "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            # The configured CPUs and GPUs, not the machine's, count.
            "SlurmdParameters=config_overrides",
            "GresTypes=gpu", "ReturnToService=2",
            "KillWait=2", "MinJobAge=300", "InactiveLimit=0",
            "SlurmctldTimeout=30", "SlurmdTimeout=30",
        ] + [f"NodeName={node} NodeAddr={hostlib.ADDRESSES[host]} "
             f"CPUs={CPUS} Gres=gpu:{GPUS} State=UNKNOWN"
             for host, node in self.nodes.items()] + [
            f"PartitionName={PARTITION} Nodes={nodes} Default=YES "
            "MaxTime=INFINITE State=UP"]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        with open(os.path.join(d, "gres.conf"), "w") as f:
            f.write("".join(f"Name=gpu File={dev}\n" for dev in GPU_FILES))
        # slurmd loads a cgroup plugin even when no other plugin uses it;
        # `ip netns exec` mounts a fresh /sys without cgroups, where
        # autodetection fails, so name one, which is then left unused.
        with open(os.path.join(d, "cgroup.conf"), "w") as f:
            f.write("CgroupPlugin=cgroup/v1\nIgnoreSystemd=yes\n")
        for sub in ["state"] + [f"spool-{n}" for n in self.nodes.values()]:
            os.makedirs(os.path.join(d, sub))

    def _daemon(self, host, name, cmd):
        with open(os.path.join(self.dir, f"{name}.out"), "wb") as log:
            self._procs[name] = self.hosts.popen(
                host, cmd, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env=self.env())

    def _check_alive(self):
        for name, p in self._procs.items():
            if p.poll() is not None:
                raise RuntimeError(f"{name} exited ({p.returncode}):\n"
                                   + self.log_tail(name))

    def log_tail(self, name, lines=15):
        """The end of a daemon's own log and of its output."""
        text = []
        for path in (f"{name}.log", f"{name}.out"):
            try:
                with open(os.path.join(self.dir, path)) as f:
                    text += f.read().splitlines()[-lines:]
            except OSError:
                pass
        return "\n".join(text)

    def run(self, *cmd):
        """A Slurm client command, run on host a; its stdout."""
        done = subprocess.run(
            ["ip", "netns", "exec", self.hosts.namespaces["a"], *cmd],
            capture_output=True, text=True, timeout=STEP_TIMEOUT,
            env=self.env())
        if done.returncode:
            raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
        return done.stdout

    def _wait_idle(self):
        """Until both nodes have registered and are idle (bounded)."""
        seen = {"states": ""}

        def idle():
            self._check_alive()
            try:
                seen["states"] = self.run("sinfo", "-h", "-N", "-o", "%N %t")
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                seen["states"] = str(exc)
            return {line.split()[0] for line in seen["states"].splitlines()
                    if line.split()[1:] == ["idle"]} == set(
                        self.nodes.values())

        if not waiting.until(idle, START_TIMEOUT, every=0.1):
            raise TimeoutError(f"Slurm's nodes are not idle: "
                               f"{seen['states']}\n"
                               + self.log_tail("slurmctld"))

    def jobs(self):
        """Job ids squeue lists (pending or running)."""
        return self.run("squeue", "-h", "-o", "%i").split()

    def job(self, job_id):
        """`scontrol show job` of one job, as {field: value}."""
        out = self.run("scontrol", "show", "job", "-o", str(job_id))
        fields = {}
        for word in out.split():
            key, _, value = word.partition("=")
            fields[key] = value
        return fields

    def daemon_pids(self):
        """{daemon name: pid} of what start() launched."""
        return {name: p.pid for name, p in self._procs.items()}

    def close(self):
        """Cancel every job, then stop the daemons (killing them kills
        nothing else: jobs' processes are in the namespaces, which
        TwoHosts.close() empties). Safe to call twice."""
        if "slurmctld" in self._procs and \
                self._procs["slurmctld"].poll() is None:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self.run("scancel", "--full", "--partition", PARTITION)
        for p in self._procs.values():
            if p.poll() is None:
                p.kill()
        for p in self._procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=STEP_TIMEOUT)


if __name__ == "__main__":
    # A run that test_slurm.py kills outright, to test the sweep: the
    # hosts, Slurm and one running job; then it says where they are.
    import json
    made = hostlib.TwoHosts().start()
    slurm = Slurm(made).start()
    slurm.run("sbatch", f"--output={made.tmp}/job.out", "--wrap",
              "sleep 300")
    if not waiting.until(
            lambda: slurm.run("squeue", "-h", "-t", "R", "-o", "%i").split(),
            START_TIMEOUT, every=0.1):
        raise TimeoutError("the job did not start")
    print(json.dumps({"namespaces": list(made.namespaces.values()),
                      "tmp": made.tmp, "jobs": slurm.jobs()}), flush=True)
    time.sleep(START_TIMEOUT)   # until killed; close() never runs
