"""Two hosts on one Linux machine, to test ddpdemo past one machine
(README, "Past one machine"; tests/test_multihost.py).

Each host is a network namespace with a hostname of its own (a UTS
namespace), a /tmp of its own (a mount namespace with a private tmpfs
there) and its own sshd; a veth pair joins them, with one /30 on that
link and nothing else, so their traffic never reaches this machine's
interfaces. Past /tmp they share this machine's files, as hosts with an
NFS home share a virtualenv, and this run's own directory (`tmp`: keys,
configs, the cluster's directories) is bound into both /tmp; processes
still reach the other host only by ssh. Every process of a host is
started inside its sshd's namespaces.

    hosts = TwoHosts().start()      # needs root, `ip netns`, sshd
    try:
        hosts.popen("a", [sys.executable, "script.py"])  # runs on host a
    finally:
        hosts.close()               # every process, namespace and key

`missing()` says why two hosts cannot be made here (no root, ...), and
`sweep()` removes what a run that was killed outright left behind.
"""
import contextlib
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile

import psutil

from ddpdemo.runtime import processes, waiting

PREFIX = "ddpdemo-mh"          # namespaces and directories we own
# A private /30 inside our own namespaces: it exists nowhere else, so it
# cannot collide with this machine's networks (start() checks anyway).
ADDRESSES = {"a": "10.213.77.1", "b": "10.213.77.2"}
PREFIXLEN = 30
SSH_PORT = 2222   # inside our namespaces only, where every port is free
SSHD = "/usr/sbin/sshd"
START_TIMEOUT = 20.0    # s; sshd answers in well under a second
STEP_TIMEOUT = 10.0     # s; one `ip` or ssh-keygen command


def missing():
    """Why two hosts cannot be made here, or None if they can."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "unshare", "nsenter", "mount", "ssh", "scp",
                 "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"needs `{tool}`"
    if not os.path.exists(SSHD):
        return "needs Debian's openssh-server (apt-get install openssh-server)"
    probe = f"{PREFIX}-probe-{os.getpid()}"
    try:
        _sh("ip", "netns", "add", probe)
    except (subprocess.SubprocessError, OSError) as exc:
        return f"`ip netns add` does not work here: {exc}"
    _sh("ip", "netns", "del", probe, check=False)
    if _sh("unshare", "--uts", "true", check=False).returncode:
        return "`unshare --uts` does not work here (a hostname per host)"
    if _sh("unshare", "--mount", "mount", "-t", "tmpfs", "tmpfs", "/tmp",
           check=False).returncode:
        return "`unshare --mount` cannot mount a tmpfs (a /tmp per host)"
    return None


def _sh(*cmd, check=True, input=None):
    return subprocess.run(cmd, check=check, capture_output=True, text=True,
                          input=input, timeout=STEP_TIMEOUT)


def namespace_pids(name):
    """Pids of the processes in network namespace `name`."""
    try:
        inode = os.stat(f"/run/netns/{name}").st_ino
    except FileNotFoundError:
        return []
    pids = []
    for pid in psutil.pids():
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino == inode:
                pids.append(pid)
        except OSError:
            pass
    return pids


def leftovers(namespaces, keep=(), wait=10.0):
    """Processes still running on the hosts {host: namespace} besides the
    pids in `keep` and this process, once those stopping have had `wait` s
    to go: {host: [command lines]}. A zombie is not running (the runtime's
    one meaning of alive, ddpdemo.runtime.processes.alive). What the
    two-host, Slurm and MPI tests all check after a stop."""
    keep = set(keep) | {os.getpid()}

    def found():
        left = {}
        for host, ns in namespaces.items():
            for pid in namespace_pids(ns):
                if pid in keep or not processes.alive(pid):
                    continue
                try:
                    cmd = " ".join(psutil.Process(pid).cmdline())
                except psutil.NoSuchProcess:
                    continue
                left.setdefault(host, []).append(cmd)
        return left
    waiting.until(lambda: not found(), wait, every=0.1)
    return found()


def _kill_namespace(name):
    """SIGKILL everything in a namespace (bounded), then delete it."""
    def emptied():
        pids = [p for p in namespace_pids(name) if p != os.getpid()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        psutil.wait_procs([psutil.Process(p) for p in pids
                           if psutil.pid_exists(p)], timeout=1)
        return not pids

    waiting.until(emptied, STEP_TIMEOUT, every=0)
    _sh("ip", "netns", "del", name, check=False)


def sweep():
    """Remove namespaces and directories left by runs whose process is
    gone (a test killed before its cleanup ran)."""
    listed = _sh("ip", "netns", "list", check=False).stdout.split()
    for name in listed:
        if name.startswith(PREFIX + "-"):
            owner = name.split("-")[2]
            if owner.isdigit() and not psutil.pid_exists(int(owner)):
                _kill_namespace(name)
    for path in glob.glob(os.path.join(tempfile.gettempdir(),
                                       PREFIX + "-*")):
        owner = os.path.basename(path).split("-")[2]
        if owner.isdigit() and not psutil.pid_exists(int(owner)):
            shutil.rmtree(path, ignore_errors=True)


def kept_under_tmp(run_dir):
    """What a host's own /tmp must still show: this run's directory, and
    the repository and the virtualenv (sys.prefix) where they are under
    /tmp; a path inside another kept one is kept with it."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tmp = "/tmp/"          # where each host mounts its own tmpfs
    paths = sorted({os.path.realpath(p) for p in (run_dir, repo, sys.prefix)
                    if os.path.realpath(p).startswith(tmp)})
    return [p for p in paths
            if not any(p.startswith(q + os.sep) for q in paths if q != p)]


class TwoHosts:
    """Hosts "a" and "b" (hostnames hosta, hostb): namespaces, a veth
    link, an sshd on each, and an ssh config (`ssh_config`) that reaches
    both with a key made for this run."""

    def __init__(self):
        tag = f"{PREFIX}-{os.getpid()}-{os.urandom(3).hex()}"
        self.namespaces = {h: f"{tag}-{h}" for h in ADDRESSES}
        self.interfaces = {h: f"veth-{h}" for h in ADDRESSES}
        self.hostnames = {h: f"host{h}" for h in ADDRESSES}
        self.tmp = tempfile.mkdtemp(prefix=tag + "-")
        self.ssh_config = os.path.join(self.tmp, "ssh_config")
        self._sshd = {}

    def start(self):
        try:
            self._check_subnet()
            self._link()
            self._keys()
            for host in ADDRESSES:
                self._start_sshd(host)
            for host in ADDRESSES:
                self._wait_for_ssh(host)
        except BaseException:
            self.close()
            raise
        return self

    def _check_subnet(self):
        """Our /30 must not be a network this machine already uses, or
        its addresses would be ambiguous to a reader's eye (the
        namespaces themselves could not collide)."""
        net = ADDRESSES["a"].rsplit(".", 1)[0] + "."
        used = _sh("ip", "-4", "addr", check=False).stdout
        if net in used:
            raise RuntimeError(f"{net}0/24 is in use on this machine")

    def _link(self):
        a, b = self.namespaces["a"], self.namespaces["b"]
        for ns in (a, b):
            _sh("ip", "netns", "add", ns)
        # Both ends are made inside the namespaces: no name, however
        # briefly, in this machine's own namespace.
        _sh("ip", "link", "add", "name", self.interfaces["a"], "netns", a,
            "type", "veth", "peer", "name", self.interfaces["b"],
            "netns", b)
        for host, ns in self.namespaces.items():
            ip = ("ip", "netns", "exec", ns, "ip")
            _sh(*ip, "addr", "add", f"{ADDRESSES[host]}/{PREFIXLEN}",
                "dev", self.interfaces[host])
            _sh(*ip, "link", "set", self.interfaces[host], "up")
            _sh(*ip, "link", "set", "lo", "up")

    def _keys(self):
        """A client key and a host key for this run; a known_hosts entry
        so ssh checks the hosts instead of trusting them blindly."""
        key, host_key = (os.path.join(self.tmp, n) for n in ("id", "host"))
        for path in (key, host_key):
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path)
        shutil.copy(key + ".pub", os.path.join(self.tmp, "authorized_keys"))
        with open(host_key + ".pub") as f:
            host_pub = " ".join(f.read().split()[:2])
        with open(os.path.join(self.tmp, "known_hosts"), "w") as f:
            f.write(f"ddpdemo-test-hosts {host_pub}\n")
        lines = []
        for host, address in ADDRESSES.items():
            lines += [f"Host {self.hostnames[host]}",
                      f"    HostName {address}"]
        lines += ["Host *", f"    Port {SSH_PORT}", "    User root",
                  f"    IdentityFile {key}", "    IdentitiesOnly yes",
                  "    HostKeyAlias ddpdemo-test-hosts",
                  f"    UserKnownHostsFile {self.tmp}/known_hosts",
                  "    StrictHostKeyChecking yes", "    BatchMode yes",
                  "    ConnectTimeout 5", "    LogLevel ERROR"]
        with open(self.ssh_config, "w") as f:
            f.write("\n".join(lines) + "\n")
        # Debian's sshd needs its privilege-separation directory, which
        # its service would make at boot.
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)

    def _start_sshd(self, host):
        config = os.path.join(self.tmp, f"sshd_config_{host}")
        with open(config, "w") as f:
            f.write("\n".join([
                f"ListenAddress {ADDRESSES[host]}:{SSH_PORT}",
                f"HostKey {self.tmp}/host",
                f"AuthorizedKeysFile {self.tmp}/authorized_keys",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no", "KbdInteractiveAuthentication no",
                "UsePAM no", "StrictModes no", "PrintMotd no",
                f"PidFile {self.tmp}/sshd_{host}.pid",
                "Subsystem sftp internal-sftp", ""]))
        # The host is born with its sshd: a hostname, and a tmpfs on /tmp
        # with this run's directory bound back in, and the repository and
        # virtualenv too where they live under /tmp (a CI clone may). Each
        # bind's source is the directory opened before the tmpfs hid it
        # (fd 3, 4, ...), given as-is: mount would otherwise resolve the
        # path again, under the new /tmp.
        keep = kept_under_tmp(self.tmp)
        script = 'hostname "$0"'
        for i, _ in enumerate(keep):
            script += f' && exec {3 + i}<"${i + 1}"'
        script += ' && mount -t tmpfs -o mode=1777 tmpfs /tmp'
        for i, _ in enumerate(keep):
            script += (f' && mkdir -p "${i + 1}" && mount --no-canonicalize'
                       f' --bind /proc/self/fd/{3 + i} "${i + 1}"'
                       f' && exec {3 + i}<&-')
        script += f' && shift {len(keep)} && exec "$@"'
        self._sshd[host] = subprocess.Popen(
            ["ip", "netns", "exec", self.namespaces[host], "unshare",
             "--uts", "--mount", "--propagation", "private", "sh", "-c",
             script, self.hostnames[host], *keep,
             SSHD, "-D", "-e", "-f", config],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def popen(self, host, cmd, **kwargs):
        """Start `cmd` on `host`: in its sshd's namespaces (network,
        hostname, mounts: its own /tmp), as a process ssh started there
        would be."""
        return subprocess.Popen(
            ["nsenter", "--target", str(self._sshd[host].pid), "--net",
             "--uts", "--mount", "--", *cmd], **kwargs)

    def run_scenario(self, host, script, args, env, timeout, log=str):
        """Run `python script args-as-JSON` on `host` and return the last
        JSON line it prints (the tests' scenarios print what they saw as
        one); fail the test, with the tail of its stderr and of `log()`,
        if it takes over `timeout` seconds or exits non-zero."""
        import json
        import sys

        import pytest
        run = self.popen(host, [sys.executable, script, json.dumps(args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
        try:
            out, err = run.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            run.kill()
            out, err = run.communicate()
            pytest.fail(f"the scenario took over {timeout} s:\n"
                        f"{err[-3000:]}\n{log()}")
        results = [line for line in out.splitlines() if line.startswith("{")]
        assert run.returncode == 0 and results, err[-3000:] + "\n" + log()
        return json.loads(results[-1])

    def ssh_command(self, host):
        """The ssh command line that reaches `host` (from the other one)."""
        return ["ssh", "-F", self.ssh_config, self.hostnames[host]]

    def _wait_for_ssh(self, host):
        """Until sshd on `host` answers from the other host (bounded)."""
        other = "b" if host == "a" else "a"
        last = {}

        def answers():
            last["done"] = done = subprocess.run(
                ["ip", "netns", "exec", self.namespaces[other],
                 *self.ssh_command(host), "hostname"],
                capture_output=True, text=True, timeout=START_TIMEOUT)
            if done.stdout.strip() == self.hostnames[host]:
                return True
            if self._sshd[host].poll() is not None:
                raise RuntimeError(f"sshd on host {host} exited "
                                   f"({self._sshd[host].returncode})")
            return False

        if not waiting.until(answers, START_TIMEOUT, every=0.05):
            raise TimeoutError(f"sshd on host {host} did not answer: "
                               f"{last['done'].stderr.strip()}")

    def sshd_pids(self):
        """Pids of the listening sshd of each host."""
        return {h: p.pid for h, p in self._sshd.items()}

    def close(self):
        """Kill every process in both namespaces, delete them, and remove
        the keys and configs. Safe to call twice, and after a failure."""
        for ns in self.namespaces.values():
            _kill_namespace(ns)
        for p in self._sshd.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=STEP_TIMEOUT)
        shutil.rmtree(self.tmp, ignore_errors=True)
