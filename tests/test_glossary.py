"""The glossary's claims about torch (book/glossary.md), run on the
installed torch: under torchrun the TCPStore's server is the launcher's
agent, not rank 0 (issue 44, item 8).

A rank finds the process that listens on MASTER_PORT (the store's port
torchrun gives it) through /proc: the socket's inode in /proc/net/tcp,
then which process holds that inode among its open files. Linux only.
"""
import os
import subprocess
import sys

import pytest


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")

# Run on every rank: who holds the listening socket of MASTER_PORT.
WHO = '''\
import os

import torch.distributed as dist


def listening_inodes(port):
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table) as f:
            for row in f.read().splitlines()[1:]:
                cols = row.split()
                if int(cols[1].rsplit(":", 1)[1], 16) == port and \\
                        cols[3] == "0A":                  # LISTEN
                    found.add(cols[9])
    return found


def holds(pid, inodes):
    fds = f"/proc/{pid}/fd"
    links = set()
    for fd in os.listdir(fds):
        try:
            links.add(os.readlink(os.path.join(fds, fd)))
        except OSError:                   # closed meanwhile
            pass
    return any(f"socket:[{inode}]" in links for inode in inodes)


dist.init_process_group("gloo")
inodes = listening_inodes(int(os.environ["MASTER_PORT"]))
line = (f"rank {dist.get_rank()}: agent store "
        f"{os.environ['TORCHELASTIC_USE_AGENT_STORE']}, listeners "
        f"{len(inodes)}, agent holds {holds(os.getppid(), inodes)}, "
        f"rank holds {holds(os.getpid(), inodes)}")
lines = [None] * dist.get_world_size()
dist.all_gather_object(lines, line)   # printed by rank 0: no interleaving
if dist.get_rank() == 0:
    print(*lines, sep="\\n", flush=True)
dist.destroy_process_group()
'''


def glossary_says(*phrases):
    with open(os.path.join(ROOT, "book", "glossary.md")) as f:
        flat = " ".join(f.read().split())
    for phrase in phrases:
        assert phrase in flat, phrase


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="reads /proc")
@pytest.mark.timeout(300)
def test_under_torchrun_the_store_server_is_the_agent(tmp_path):
    # One rendezvous: the glossary says "by default"; standalone is the
    # book's (a static one was seen the same, and costs a torchrun run more).
    glossary_says("`TCPStore` (a server: under {term}`torchrun`, by default "
                  "in the launcher's agent on the node that hosts the "
                  "rendezvous, not in rank 0)")
    script = tmp_path / "who.py"
    script.write_text(WHO)
    done = subprocess.run([TORCHRUN, "--standalone", "--nproc-per-node", "2",
                           str(script)], capture_output=True, text=True,
                          timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("rank ")]
    assert lines == [f"rank {r}: agent store True, listeners 1, agent "
                     "holds True, rank holds False" for r in (0, 1)]
