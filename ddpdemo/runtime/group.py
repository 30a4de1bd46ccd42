"""How a generation of engines becomes one torch.distributed group: which
engine is which rank, each rank's environment, and init_process_group
through a fresh store. Plumbing for ddpdemo.runtime.cluster (chapter 0,
"How the live cluster works"); the code that runs on the ranks is
ddpdemo.runtime.engine, and `engines` below is a
ddpdemo.runtime.engines.Engines. `form` runs the steps in order; the
backend for local ranks is chosen here too.
"""
import collections

from . import engine
from .devices import auto_backend


def assign_ranks(engines, ids, world_size):
    """(engine ids in rank order, LOCAL_RANK of each rank). An engine's
    rank comes from its environment when we launched it (local), else
    from its engine id; LOCAL_RANK counts the ranks on each host."""
    found = engines.call_each(ids, engine.identify)
    ranks = [rank for rank, _ in found]
    if sorted(ranks) != list(range(world_size)):
        ranks = list(range(world_size))
    order = sorted(zip(ranks, ids, [host for _, host in found],
                       strict=True))
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
    """"auto" for ranks anywhere, from what each one sees
    (devices.auto_backend)."""
    return auto_backend(zip([f["gpus"] for f in facts], local_ranks,
                            strict=True))


def init_group(engines, ids, backend, timeout_s, rendezvous=None,
               master_addr=None, arm=False):
    """init_process_group on every rank, through `rendezvous` (a
    FileRendezvous: local, no listener), or else the TCPStore that rank 0
    opens on port 0 at `master_addr`; with `arm`, each rank's Flight
    Recorder responder starts in the same call. Returns the rendezvous
    (ddpdemo.runtime.rendezvous) the ranks met at."""
    world_size = len(ids)
    if rendezvous is None:
        rendezvous = engines.call_each(
            ids[:1], engine.open_tcp_store,
            per_rank=lambda r: (world_size, master_addr, timeout_s))[0]
    engines.call_each(ids, engine.init_group, per_rank=lambda r: (
        backend, r, world_size, timeout_s, rendezvous), arm=arm)
    return rendezvous


def local_backend(backend, world_size):
    """The backend for ranks on this machine: "nccl" when it has a GPU
    per rank, else "gloo"; ValueError if "nccl" is asked without them."""
    if backend == "gloo":
        return backend
    from .devices import gpu_count
    gpus = gpu_count()
    fits = auto_backend((gpus, rank) for rank in range(world_size))
    if backend == "nccl" and fits != "nccl":
        raise ValueError(f"backend='nccl' needs one GPU per rank: "
                         f"world_size={world_size}, but {gpus} "
                         f"GPU(s) found")
    return fits


# ledger_store: the rendezvous, where the Flight Recorder's requests go.
Formed = collections.namedtuple("Formed", "ids pids backend ledger_store")


def form(engines, ids, backend, env, timeout_s, dump=None, rendezvous=None,
         master_addr=None):
    """Every step from registered engines to a working group: assign
    ranks, prepare them, settle backend="auto" from what the ranks see,
    init_process_group and, in the same call, arm each rank's Flight
    Recorder responder (a thread that answers ledger requests through the
    store, so a rank stuck in a collective still says what it recorded).
    Returns Formed."""
    ids, local_ranks = assign_ranks(engines, ids, len(ids))
    facts = prepare_ranks(engines, ids, local_ranks, env, dump)
    if backend == "auto":
        backend = backend_for(facts, local_ranks)
    # Each round trip to the ranks costs tens of ms on a busy machine,
    # and a restart after a hang pays them all: the responder is armed in
    # init_group's call.
    rendezvous = init_group(engines, ids, backend, timeout_s, rendezvous,
                            master_addr=master_addr, arm=True)
    return Formed(ids, [f["pid"] for f in facts], backend, rendezvous)
