"""One cluster's life under a real Slurm or a real MPI, for
tests/test_slurm.py and tests/test_mpi.py: run on host a of the test
hosts (TwoHosts in tests/hosts.py) as

    python tests/batch_scenario.py ARGS_JSON

where ARGS_JSON holds the Cluster's keywords. It forms a group of four,
runs the documentation's all_reduce, hangs rank 3 in a lonely barrier,
runs the all_reduce again (on the engines the restart started), stops,
and prints what it saw as one JSON line, which the tests check.
"""
import json
import sys
import time

WORLD_SIZE = 4
HANG_TIMEOUT = 3.0       # s; the lonely barrier's bound


def check_named_hang(hang):
    """What both tests assert of the lonely barrier's HangError: rank 3
    named, with its stack down to barrier() and its Flight Recorder
    ledger one collective ahead of its peers'."""
    assert hang["ranks"] == [3]
    assert "rank 3 is blocked in barrier(), called from:" in hang["message"]
    assert hang["stack"][0] == "lonely_barrier_on_rank_3"
    assert hang["stack"][-1] == "barrier"
    ops = {int(r): o for r, o in hang["ops"].items()}
    assert len(ops[3]) == len(ops[0]) + 1, ops
    assert "rank 3" in hang["divergence"], hang["divergence"]


# -- on the ranks ------------------------------------------------------
def probe():
    """Chapter 1's all_reduce (rank r holds arange(2) + 1 + 2r), and
    where this rank runs: its host, pid, and the rank and job its
    launcher gave it."""
    import os
    import socket
    import torch
    import torch.distributed as dist
    rank = dist.get_rank()
    t = torch.arange(2) + 1 + 2 * rank
    dist.all_reduce(t)
    names = ("SLURM_PROCID", "SLURM_JOB_ID", "SLURM_JOB_NODELIST",
             "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
             "LOCAL_RANK")
    return {"rank": rank, "sum": t.tolist(), "host": socket.gethostname(),
            "pid": os.getpid(),
            "env": {n: os.environ.get(n) for n in names}}


def lonely_barrier_on_rank_3():
    import torch.distributed as dist
    if dist.get_rank() == 3:
        dist.barrier()
    return dist.get_rank()


# -- on host a -------------------------------------------------------------
def scenario(kwargs):
    """Everything the tests check, in one cluster's life. Returns a dict;
    times["formed"] is from Cluster(...) to a formed group."""
    from ddpdemo import Cluster, HangError
    seen, began = {"times": {}}, time.monotonic()

    def lap(name):
        seen["times"][name] = round(time.monotonic() - began, 2)

    cluster = Cluster(world_size=WORLD_SIZE, backend="gloo", timeout=30,
                      **kwargs)
    try:
        cluster.start()
        lap("formed")
        seen["tmpdir"] = cluster.tmpdir
        seen["probe"] = cluster.run(probe)
        try:
            cluster.run(lonely_barrier_on_rank_3, timeout=HANG_TIMEOUT)
        except HangError as exc:
            seen["hang"] = {
                "ranks": exc.ranks, "message": str(exc),
                "stack": [f for _, _, f in exc.stacks.get(3) or []],
                "divergence": exc.ledger and exc.ledger.divergence,
                "ops": exc.ledger and {
                    r: [e["op"] for e in es]
                    for r, es in exc.ledger.by_rank.items()}}
        lap("hang")
        seen["after_hang"] = cluster.run(probe)
        lap("restarted")
    finally:
        cluster.stop()
    lap("stopped")
    return seen


if __name__ == "__main__":
    result = scenario(json.loads(sys.argv[1]))
    print(json.dumps(result), flush=True)
