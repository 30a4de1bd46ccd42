"""How a generation of engines becomes one torch.distributed group: which
engine is which rank, each rank's environment, and init_process_group
through a fresh store. Plumbing for ddpdemo.cluster (chapter 0, "How the
live cluster works"); the code that runs on the ranks is ddpdemo.engine,
and `engines` below is a ddpdemo.engines.Engines.
"""
from . import engine


def assign_ranks(engines, ids, world_size):
    """(engine ids in rank order, LOCAL_RANK of each rank). An engine's
    rank comes from its environment when we launched it (local), else
    from its engine id; LOCAL_RANK counts the ranks on each host."""
    found = engines.call_each(ids, engine.identify)
    ranks = [rank for rank, _ in found]
    if sorted(ranks) != list(range(world_size)):
        ranks = list(range(world_size))
    order = sorted(zip(ranks, ids, [host for _, host in found]))
    hosts = [host for _, _, host in order]
    return ([eid for _, eid, _ in order],
            [hosts[:r].count(h) for r, h in enumerate(hosts)])


def prepare_ranks(engines, ids, local_ranks, env, dump=None):
    """Set every rank's environment and arm its stack dump (`dump`: a
    path with {} for the rank; local clusters only). Returns each rank's
    facts: pid, host, GPUs."""
    world_size = len(ids)
    return engines.call_each(ids, engine.prepare, per_rank=lambda r: (
        r, local_ranks[r], world_size, env,
        dump.format(r) if dump else None))


def backend_for(facts, local_ranks):
    """"nccl" when every rank has a GPU of its own, else "gloo"."""
    fits = all(f["gpus"] > lr for f, lr in zip(facts, local_ranks))
    return "nccl" if fits else "gloo"


def init_group(engines, ids, backend, timeout_s, file_path=None,
               master_addr=None):
    """init_process_group on every rank, through a FileStore at
    `file_path` (local: no listener), or else a TCPStore that rank 0
    opens on port 0 at `master_addr`. Returns how the store was reached:
    {"file_path": ...} or {"tcp": (address, port)}."""
    world_size = len(ids)
    store = {}
    if file_path is not None:
        store["file_path"] = file_path
    else:
        store["tcp"] = engines.call_each(
            ids[:1], engine.open_tcp_store,
            per_rank=lambda r: (world_size, master_addr, timeout_s))[0]
    engines.call_each(ids, engine.init_group, per_rank=lambda r: (
        backend, r, world_size, timeout_s), **store)
    return store
