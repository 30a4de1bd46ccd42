"""Ranks on other hosts, started over ssh by ipyparallel's SSH launcher:
`Cluster(world_size=4, engines="ssh", hosts={"node1": 2, "node2": 2})`.
Plumbing for ddpdemo.runtime.engines (README, "Past one machine"; tested on two
hosts made of network namespaces, tests/hosts.py).

One engine set per rank, like local clusters, so each engine has its
RANK from birth; each started in one ssh round trip; killed and cleaned
up with one ssh per host.
"""
import contextlib
import os
import re
import shlex
import subprocess
import sys

from ipyparallel.cluster.launcher import (SSHEngineLauncher,
                                          SSHEngineSetLauncher)

from . import enginesets
from .placement import RemotePlacement


class QuickSSHEngineLauncher(SSHEngineLauncher):
    """ipyparallel's SSH engine launcher, started in one ssh round trip.

    Its own start takes seven (shell check, `python --version`, `IPython
    profile create`, two checks and copies of connection files, the
    start): 4.7 s per engine, measured on the 2-core test machine. The
    engine needs none of the files, as ipyparallel documents for
    `send_engines_connection_env` (its connection info travels in
    $IPP_CONNECTION_INFO), so one `ssh host sh -` makes its directory and
    starts it with nohup, the way ipyparallel's `sshx` does. No thread
    polls the remote pid (one ssh and one Python a minute per engine):
    a dead engine is noticed by the controller's heartbeat.
    """

    def start(self, hostname=None, user=None, port=None):
        self.hostname = hostname or self.hostname
        self.user = user or self.user
        if port is not None:
            self.ssh_args = [*self.ssh_args, "-p", str(port)]
        log_dir = os.path.join(self.remote_profile_dir, "log")
        script = "\n".join(
            ["set -eu", f"mkdir -p {shlex.quote(log_dir)}"]
            + [f"export {k}={shlex.quote(str(v))}"
               for k, v in self.get_env().items()]
            + [f"exec nohup {shlex.join(self.program + self.program_args)}"
               f" > {shlex.quote(self.remote_output_file)} 2>&1"
               " </dev/null & echo __remote_pid=$!__", ""])
        done = subprocess.run(
            [*self.ssh_cmd, *self.ssh_args, self.location, "--", "sh -"],
            input=script, capture_output=True, text=True,
            timeout=SSHRanks.SSH_TIMEOUT)
        found = re.search(r"__remote_pid=(\d+)__", done.stdout)
        if done.returncode or not found:
            raise RuntimeError(f"could not start an engine on "
                               f"{self.location} over ssh (exit status "
                               f"{done.returncode}): {done.stderr.strip()}")
        self.pid = int(found.group(1))
        self.notify_start({"host": self.location, "pid": self.pid})


class QuickSSHEngineSetLauncher(SSHEngineSetLauncher):
    launcher_class = QuickSSHEngineLauncher


class SSHRanks(RemotePlacement):
    """Ranks on hosts reached by ssh (`engines="ssh"`), a placement of
    ddpdemo.runtime.placement's interface: one engine set
    per rank, each of one engine started on its host by ipyparallel's SSH
    engine launcher (QuickSSHEngineLauncher) with the rank's RANK,
    LOCAL_RANK and WORLD_SIZE in its environment from birth.

    hosts: {host: ranks there}, in rank order, spelled as ipyparallel's
    `SSHEngineSetLauncher.engines` spells them ("host", "user@host:port",
    or an alias from the ssh config that `ssh_args=["-F", path]` names).
    ssh_args: given to every ssh. controller_ip: this host's address as
    the ranks see it. Each host gets a directory named after
    this cluster's own, <its path>-<host> (/tmp/ddpdemo-...-<host>
    unless TMPDIR says otherwise), for the engines' logs;
    killing and stopping take one ssh per host. The engines run this
    Python (`remote_python`): the hosts must share this virtualenv's path.
    They carry no guard (this kernel's pid means nothing there): if the
    kernel dies, its guarded controller goes, and each remote engine
    ends itself after 50 missed heartbeats (ipyparallel's
    IPEngine.max_heartbeat_misses), about 40 s at our heartbeat.
    """

    SSH_TIMEOUT = 15.0   # s; one ssh command (a start, a kill)
    OPTIONS = ("hosts", "ssh_args", "controller_ip")
    engine_set_launcher = QuickSSHEngineSetLauncher
    owns_controller = True   # the controller is local: kill its tree

    def __init__(self, world_size, hosts, ssh_args=(), controller_ip=None):
        if sum(hosts.values()) != world_size:
            raise ValueError(f"hosts={hosts!r} hold {sum(hosts.values())} "
                             f"ranks, but world_size={world_size}")
        self.hosts = dict(hosts)
        self.slots = [(host, local_rank) for host, n in hosts.items()
                      for local_rank in range(n)]
        self.ssh_args = list(ssh_args)
        self.controller_kwargs = ({"controller_ip": controller_ip}
                                  if controller_ip else {})
        self.remote_dirs = {}

    def start(self, engines):
        """Name each host's directory after the cluster's own."""
        self.remote_dirs = {
            host: engines.tmpdir.rstrip("/") + "-" + re.sub(r"[^\w.-]", "_",
                                                            host)
            for host in self.hosts}

    def launch(self, engines, generation, env, preload=()):
        """One engine set of one engine per rank, each on its host."""
        world_size = len(self.slots)
        for rank, (host, local_rank) in enumerate(self.slots):
            engines.start_engines(
                1, enginesets.name(generation, rank),
                dict(env, RANK=str(rank), LOCAL_RANK=str(local_rank),
                     WORLD_SIZE=str(world_size)),
                engines={host: 1}, ssh_args=self.ssh_args,
                remote_python=sys.executable,
                remote_profile_dir=self.remote_dirs[host])

    def _ssh(self, host, command):
        """Run a shell command on `host` (spelled as in `hosts`)."""
        location, _, port = host.partition(":")
        port_args = ["-p", port] if port else []
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run(["ssh", *self.ssh_args, *port_args, location,
                            command],
                           capture_output=True, timeout=self.SSH_TIMEOUT)

    def kill(self, engines, pids, generation):
        """SIGKILL a generation's engines (their pids belong to other
        hosts: found from their launchers), and forget them."""
        self.kill_sets(engines.forget(generation))

    def stop(self, engines):
        """Every engine, and each host's directory."""
        self.kill_sets(engines.forget(), remove=True)

    def kill_sets(self, engine_sets, remove=False):
        """SIGKILL the engines of these sets, one ssh per host, and
        forget them (ipyparallel's own stop would take two ssh and a
        remote Python per engine); `remove`: also each host's directory.
        `engine_sets`: {set id: engine set}, popped from as they go."""
        pids = {host: [] for host in self.remote_dirs}
        for set_id in list(engine_sets):
            for el in engine_sets.pop(set_id).launchers.values():
                host = el.identifier.rsplit("/", 1)[0]   # "<host>/<i>"
                if getattr(el, "pid", -1) > 0 and host in pids:
                    pids[host].append(el.pid)
        for host, found in pids.items():
            command = [f"kill -KILL {' '.join(map(str, found))}"] if found \
                else []
            if remove:
                command.append(
                    f"rm -rf -- {shlex.quote(self.remote_dirs[host])}")
            if command:
                self._ssh(host, "; ".join(command) + "; true")
