"""torch's Flight Recorder on every rank of a Cluster, and a way to read it
from a rank whose main thread is stuck inside a collective.

The Flight Recorder is a ring buffer of each rank's last collectives,
filled by the backend (on gloo too, in torch 2.13); its size is read once,
from TORCH_FR_BUFFER_SIZE (older name: TORCH_NCCL_TRACE_BUFFER_SIZE), when
the first group is made, so `env()` goes into the rank's environment
before torch is imported. Introduced in chapter 5.

How a stuck rank answers: its main thread is blocked in gloo with the GIL
released, so an ipyparallel request would queue behind it, and a signal
handler written in Python would never run. A daemon thread (`arm`) waits
on its own connection to the group's store for a request key, then
publishes its dump on the stuck task's own output channel (ipyparallel's
datapub), so the data comes back through ipyparallel with the task, like
its printed output: no pid and no local file, so remote ranks answer too.
Ranks that are not stuck are simply asked through ipyparallel. The dump
from that thread leaves out stack frames: gathering them waits for the
GIL-free main thread in torch 2.13 (measured: the dump returned only when
the stuck collective did).

The same answer carries the rank's Python stack: faulthandler's dump of
every thread, taken by that thread (the stuck main thread holds no GIL).
That is how a rank on another host, whose pid means nothing here, says
where it is blocked (`stacks=` of `collect`).
"""
import datetime
import faulthandler
import os
import pickle
import tempfile
import threading
import time

from . import waiting


BUFFER_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
DEFAULT_BUFFER = 2000   # FlightRecorder.hpp's default when neither is set
PREFIX = "ddpdemo/flight"
ANSWER_TIMEOUT = 3.0    # s; a responder answers in milliseconds


def env(buffer_size):
    """The environment that sets a rank's Flight Recorder size (0: off)."""
    if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) \
            or buffer_size < 0:
        raise ValueError(f"flight_recorder must be an int >= 0 (entries), "
                         f"got {buffer_size!r}")
    return {BUFFER_VARS[0]: str(buffer_size)}


def buffer_size(environ=os.environ):
    """The ring's size as torch reads it: the first variable set wins."""
    for name in BUFFER_VARS:
        if name in environ:
            return int(environ[name])
    return DEFAULT_BUFFER


def record(stacks=True):
    """This rank's Flight Recorder dump (the pickle torch's analyzer reads,
    as a dict) with the facts a ledger needs. On the rank."""
    import torch.distributed as dist
    from torch._C._distributed_c10d import _dump_fr_trace
    size = buffer_size()
    raw = _dump_fr_trace(includeCollectives=True,
                         includeStackTraces=stacks, onlyActive=False)
    return {"rank": dist.get_rank(), "buffer_size": size,
            "dump": pickle.loads(raw), "raw": raw}


def open_store(rendezvous):
    """A new connection to the group's store, reached through its
    rendezvous (ddpdemo.runtime.rendezvous), under this module's prefix.
    """
    import torch.distributed as dist
    return dist.PrefixStore(PREFIX, rendezvous.store(ANSWER_TIMEOUT))


def arm(rank, rendezvous):
    """On a rank: start the thread that answers ledger requests. Request
    n is the store key `request/n`; the answer is published as the data
    key `answer_key(n)` of whatever task the rank is running."""
    store = open_store(rendezvous)
    long_wait = datetime.timedelta(hours=1)

    def serve():
        from ipyparallel.datapub import publish_data
        n = 1
        while True:
            began = time.monotonic()
            try:
                store.wait([f"request/{n}"], long_wait)
            except Exception:
                if time.monotonic() - began < 1.0:
                    return      # the store is gone: so is the group
                continue
            try:
                answer = record(stacks=False)
            except Exception as exc:   # say why, rather than stay silent
                answer = {"rank": rank, "error": repr(exc)}
            answer["stack"] = thread_dump()
            publish_data({answer_key(n): answer})
            n += 1

    threading.Thread(target=serve, name="ddpdemo-flight", daemon=True).start()
    return True


def thread_dump():
    """faulthandler's dump of this process's threads, as text: what a
    SIGUSR1 dump holds, taken without a signal or a file left behind."""
    with tempfile.TemporaryFile("w+") as f:
        faulthandler.dump_traceback(f, all_threads=True)
        f.seek(0)
        return f.read()


def answer_key(n):
    return f"ddpdemo_flight_{n}"


def collect(rendezvous, ars, pending, ask, dead=(), timeout=ANSWER_TIMEOUT,
            stacks=None, is_alive=None):
    """From the notebook, when a run went wrong: every live rank's record,
    {rank: record, {"rank", "error"} (its responder failed, and said
    why), or None (no answer in time)}. `ars`: the run's
    AsyncResults by rank; `pending`: the ranks still running it, asked
    through the store and answering on their task's data channel; the
    other live ranks are idle and asked directly, by `ask(ranks)`.
    `stacks`: a dict that gets each pending rank's thread dump (text).
    `is_alive(rank)`: whether a rank's process still runs; one that died
    meanwhile (a stack dump can kill it: ddpdemo.runtime.watch.read_dumps)
    is not waited for."""
    idle = [r for r in range(len(ars)) if r not in pending and r not in dead]
    if pending:     # ask the stuck ranks first: they answer meanwhile
        store = open_store(rendezvous)
        n = store.add("requests", 1)
        store.set(f"request/{n}", b"1")
        key, deadline = answer_key(n), time.monotonic() + timeout
    records = dict(zip(idle, ask(idle), strict=True)) if idle else {}
    if pending:
        def answered(r):
            return key in ars[r].data or (is_alive and not is_alive(r))

        waiting.until(lambda: all(answered(r) for r in pending),
                      deadline - time.monotonic())
        answers = {r: dict(ars[r].data.get(key) or {}) for r in pending}
        if stacks is not None:
            stacks.update({r: a["stack"] for r, a in answers.items()
                           if a.get("stack")})
        for answer in answers.values():
            answer.pop("stack", None)
        records.update(answers)
    # A responder that failed answers {"rank", "error"}: kept, so that
    # the ledger says why that rank's record is missing.
    return {r: rec or None for r, rec in records.items()}


def write_dumps(records, directory, prefix="rank_", name_group=False):
    """Write each rank's raw dump as `<prefix><rank>`, the layout torch's
    analyzer (`python -m torch.distributed.flight_recorder.fr_trace`)
    reads; with name_group, first add the entry `name_default_group`
    adds. Returns the paths."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for rec in records:
        path = os.path.join(directory, f"{prefix}{rec['rank']}")
        raw = rec["raw"]
        if name_group:
            raw = pickle.dumps(name_default_group(pickle.loads(raw)))
        with open(path, "wb") as f:
            f.write(raw)
        paths.append(path)
    return paths


def name_default_group(dump):
    """A gloo dump lists its default group in `pg_config` under the empty
    name "", while its entries name it "0" (torch 2.13); the analyzer
    looks groups up by the entries' name. Add the group under that name,
    with the ranks the dump gives it. Returns a new dump."""
    config = dict(dump["pg_config"])
    for entry in dump["entries"]:
        name, desc = entry["process_group"]
        if name not in config and "" in config:
            config[name] = dict(config[""], name=name, desc=desc)
    return dict(dump, pg_config=config)


def analyze(directory, *args):
    """Run torch's offline analyzer on `directory` in this process, as
    `python -m torch.distributed.flight_recorder.fr_trace DIR -p rank_`
    would. Its report goes to its logger (stderr), and is returned as a
    list of lines too. Its loader turns the garbage collector off and
    leaves it off; we turn it back on."""
    import gc
    import logging
    from torch.distributed.flight_recorder import fr_trace

    class Keep(logging.Handler):
        def emit(self, record):
            lines.extend(self.format(record).splitlines())

    lines, keep = [], Keep()
    log = logging.getLogger("Flight Recorder")   # fr_logger's name
    log.addHandler(keep)
    try:
        fr_trace.main([directory, "-p", "rank_", *args])
    finally:
        log.removeHandler(keep)
        gc.enable()
    return lines
