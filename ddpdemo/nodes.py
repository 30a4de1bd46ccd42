"""Nodes: what torchrun tells each rank about where it runs, and several
nodes played on one machine, without root. "Launching a real job"
(book/launching: torchrun_nodes) and chapter 6 ("Across nodes":
SimulatedNodes).

`torchrun --nnodes 2 --nproc-per-node 2 --node-rank N ...` starts two
ranks on each node and gives each one, in its environment:

    RANK              its rank in the whole job, 0..3: unique
    LOCAL_RANK        its rank on its node, 0..1: 0 once per node
    GROUP_RANK        its node's rank, N (torchrun sets no NODE_RANK)
    LOCAL_WORLD_SIZE  ranks per node, 2;  WORLD_SIZE  ranks in all, 4

`torchrun_nodes("-m", "ddpdemo.examples.node_cache")` runs that command
once per node, here, at once, each launcher with a temporary directory of
its own; `torchrun_env(rank, nproc_per_node, nnodes)` is the table for one
rank, which tests/test_nodes.py checks against such a run.

`SimulatedNodes(nnodes=2, nproc_per_node=2)` plays the nodes on one
machine: `cluster.run(nodes.enter)` gives each rank of a 4-rank cluster
the variables torchrun would (ranks 0-1 on node 0, 2-3 on node 1) and a
node-local temporary directory of its node's own (TMPDIR, so
`tempfile.gettempdir()` is the node's "/tmp"). On real hosts (the
network-namespace hosts of tests/test_multihost.py) nothing is simulated:
each host has its own /tmp.
"""
import os
import shutil
import socket
import sys
import tempfile
import time

import torch.distributed as dist

from . import scripts
# What torchrun tells a rank about where it runs: the torchrun side's
# (ddpdemo.launch) list, which a script like node_cache prints.
from .launch import VARIABLES


def torchrun_env(rank, nproc_per_node, nnodes):
    """The variables torchrun gives global rank `rank` when every node
    runs `nproc_per_node` ranks: node n holds ranks n*nproc_per_node and
    on (static rendezvous, `--node-rank n`)."""
    if not 0 <= rank < nproc_per_node * nnodes:
        raise ValueError(f"rank {rank} is not in a job of {nnodes} nodes "
                         f"of {nproc_per_node} ranks")
    node, local_rank = divmod(rank, nproc_per_node)
    values = (rank, local_rank, node, nproc_per_node,
              nproc_per_node * nnodes)      # in VARIABLES' order
    return {name: str(v) for name, v in zip(VARIABLES, values, strict=True)}


def free_port():
    """A port the operating system says is free now, for torchrun's
    static rendezvous: every node needs it before node 0 opens it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# A free port can still be taken before node 0's store binds it: any
# process's outgoing connection may draw it from the same ephemeral range.
# Node 0 then fails with this, and the launch is repeated on a new port.
PORT_TAKEN = "EADDRINUSE"
PORT_TRIES = 3
AFTER_FAILURE = 10.0    # s; the other nodes' time to end once one failed


def torchrun_nodes(*args, nnodes=2, nproc_per_node=2,
                   timeout=scripts.TIMEOUT):
    """`torchrun --nnodes .. --nproc-per-node .. --node-rank n
    --master-addr 127.0.0.1 --master-port P args` for each node n, all at
    once on this machine, each with a temporary directory (TMPDIR) of its
    own; prints each command and its output as ddpdemo.torchrun does.
    Bounded: `timeout` s in all; once a node has failed, the others are
    stopped AFTER_FAILURE s later (a node waits for a failed partner until
    its timeout otherwise). Returns the CompletedProcesses, node by
    node."""
    deadline = time.monotonic() + timeout
    for _ in range(PORT_TRIES):
        commands, done = _launch_nodes(
            args, nnodes, nproc_per_node,
            max(deadline - time.monotonic(), 0.001))
        if PORT_TAKEN not in done[0].stderr:
            break
    for command, run in zip(commands, done, strict=True):
        print("$", *command)
        scripts.show(run, "ranks")
    return done


def _launch_nodes(args, nnodes, nproc_per_node, timeout):
    port = free_port()
    commands = [("torchrun", "--nnodes", str(nnodes), "--nproc-per-node",
                 str(nproc_per_node), "--node-rank", str(node),
                 "--master-addr", "127.0.0.1", "--master-port", str(port),
                 *args) for node in range(nnodes)]
    with tempfile.TemporaryDirectory(prefix="ddpdemo-nodes-") as root:
        argvs = []
        for node, (program, *rest) in enumerate(commands):
            tmp = os.path.join(root, f"node{node}")
            os.mkdir(tmp)
            argvs.append(["env", f"TMPDIR={tmp}",
                          os.path.join(os.path.dirname(sys.executable),
                                       program), *rest])
        return commands, scripts.collect(*argvs, timeout=timeout,
                                         after_failure=AFTER_FAILURE)


class SimulatedNodes:
    """`nnodes` nodes of `nproc_per_node` ranks on this machine: a
    scratch directory per node (`scratch[n]`, under one private temporary
    directory) standing in for its /tmp. `enter` runs on every rank;
    `close` removes the directories."""

    def __init__(self, nnodes=2, nproc_per_node=2):
        self.nnodes, self.nproc_per_node = nnodes, nproc_per_node
        self.root = tempfile.mkdtemp(prefix="ddpdemo-nodes-")
        self.scratch = [os.path.join(self.root, f"node{n}")
                        for n in range(nnodes)]
        for path in self.scratch:
            os.mkdir(path)

    def enter(self):
        """On a rank: set the variables torchrun would give it, and point
        its temporary directory at its node's scratch. Returns the
        variables, and `TMPDIR` as the node's name (`node1`)."""
        if dist.get_world_size() != self.nnodes * self.nproc_per_node:
            raise ValueError(f"{self.nnodes} nodes of "
                             f"{self.nproc_per_node} ranks need "
                             f"{self.nnodes * self.nproc_per_node} ranks, "
                             f"not {dist.get_world_size()}")
        env = torchrun_env(dist.get_rank(), self.nproc_per_node, self.nnodes)
        os.environ.update(env)
        os.environ["TMPDIR"] = self.scratch[int(env["GROUP_RANK"])]
        tempfile.tempdir = None         # gettempdir() reads TMPDIR again
        return dict(env, TMPDIR=os.path.basename(tempfile.gettempdir()))

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)
