"""What torchrun's output alone says went wrong at launch or at a rank's
end: the input side of `python -m ddpdemo.explain` for failures that
leave no stack and no Flight Recorder dump (chapter 0c shows each live).

`failures(text)` finds torchrun's own failures before any rank ran, each
by the line torchrun prints (tests/test_explain.py runs torchrun on gloo
to get them): [(name, line)]. `signal_meaning(signum)` says what a rank
killed by a signal most often means, and how to check.
"""
import re

from ..runtime.processes import signal_name

# name: the line torchrun prints (torch 2.13), found in its output.
FAILURES = {
    # The static rendezvous (--master-addr/--master-port, several
    # nodes): node 0's agent holds the store and waits for the others.
    "static-rendezvous": re.compile(
        r"^\S*DistStoreError: Timed out after \d+ seconds waiting for "
        r"clients\. (\d+)/(\d+) clients joined\.$", re.M),
    # c10d's rendezvous (--rdzv-backend c10d): join_timeout ran out.
    "rendezvous-timeout": re.compile(
        r"^\S*RendezvousTimeoutError\b.*$", re.M),
    # Another node's launcher, static rendezvous: the store on node 0
    # (--master-addr, --master-port) never answered its connection.
    "client-timeout": re.compile(
        r"^\S*DistNetworkError: The client socket has timed out after "
        r"\d+ms while trying to connect to \((.+), (\d+)\)\.$", re.M),
    # The master port is taken: the store's server cannot listen.
    "port-in-use": re.compile(
        r"^\S*DistNetworkError: .*name: EADDRINUSE.*$", re.M),
}


def failures(text):
    """[(name, the line torchrun printed)] for each failure in `text`,
    also where each line carries Slurm's `srun -l` prefix (`0: `) or
    ends in CRLF."""
    text = _SRUN_PREFIX.sub("", text.replace("\r\n", "\n"))
    found = []
    for name, pattern in FAILURES.items():
        m = pattern.search(text)
        if m:
            found.append((name, m[0].strip()))
    return found


# `srun -l` writes each line of task N as `N: line`.
_SRUN_PREFIX = re.compile(r"^\d+: ", re.M)


def joined(line):
    """(joined, expected) from the static rendezvous's line."""
    m = FAILURES["static-rendezvous"].search(line)
    return int(m[1]), int(m[2])


def signal_meaning(signum):
    """`SIGKILL`, with what it most often means and how to check, for a
    rank torchrun reports killed by signal `signum`."""
    name = signal_name(signum)
    if name == "SIGKILL":
        return (f"{name}: often the kernel's out-of-memory killer; that "
                f"node's kernel log says so (`sudo dmesg -T | grep -i "
                f"'killed process'` or `journalctl -k | grep -i 'out of "
                f"memory'`: \"Out of memory: Killed process <pid>\"), else "
                f"someone or a scheduler ran kill -9")
    if name == "SIGSEGV":
        return f"{name}: a crash in native code (a C/C++ extension, CUDA)"
    if name == "SIGABRT":
        return (f"{name}: the process aborted itself (an uncaught C++ "
                f"exception, or a watchdog that tears the process down)")
    if name == "SIGTERM":
        return f"{name}: asked to stop (torchrun, a scheduler, or kill)"
    return name
