"""What a run on the ranks came to: results, ranks that raised or died,
ranks still stuck, and what to tell the reader about them.

ddpdemo.runtime.cluster decides what to do next (restart, check the group);
this module only gathers the facts, and it gathers them before anything
is restarted, because a restart kills the ranks that hold them.
"""
import dataclasses
import os
import signal

from .. import flight
from ..ledger import Ledger
from . import processes, watch


@dataclasses.dataclass
class Outcome:
    pending: list           # ranks still running at the timeout
    dead: list              # ranks whose process is gone
    errors: dict            # rank -> what went wrong (raised or died)
    ledger: object = None   # a Ledger, when something went wrong
    stacks: dict = None     # stuck rank -> frames, outermost first


def settle(ars, timeout, engines, ids, pids, is_alive, store, tmpdir=None):
    """Wait for every rank's result (bounded) and describe what failed.

    `is_alive(rank)` looks at a rank's process; `store` reaches the
    ranks' Flight Recorder side threads; `tmpdir` (local clusters) holds
    the files each engine's faulthandler writes its stack to on SIGUSR1.
    """
    pending, failed, dead = watch.wait(
        ars, timeout, is_alive,
        grace=max(watch.FAILURE_GRACE, engines.death_notice_s))
    # A remote rank's task fails (EngineError) when its engine dies.
    dead += [r for r in failed if not is_alive(r)]
    failed = [r for r in failed if r not in dead]
    watch.echo_output(ars)
    errors = {r: watch.describe_error(ars[r]) for r in failed}
    errors.update({r: processes.describe_exit(engines.exit_code(pids[r]))
                   for r in dead})
    out = Outcome(pending, dead, errors)
    if not (errors or pending):
        return out
    dumps = {}
    out.ledger = gather_ledger(
        store, ars, pending, dead=dead, stacks=dumps,
        ask=lambda ranks: engines.call_each(
            [ids[r] for r in ranks], flight.record, stacks=False))
    # Each stuck rank's own dump (it came with the ledger) is the way for
    # ranks on other hosts; local ones are signalled, which also works
    # when a rank's side thread cannot answer.
    out.stacks = watch.parse_dumps(dumps, pending)
    if tmpdir is not None and hasattr(signal, "SIGUSR1"):
        out.stacks = {r: watch.dump_stack(pids[r], os.path.join(
            tmpdir, f"stack-{r}.txt")) for r in pending}
    return out


def gather_ledger(spec, ars, pending, ask, dead=(), stacks=None):
    """The Ledger of a run that went wrong (see flight.collect, which
    fills `stacks`); None if the ranks cannot be reached (the error is
    then shown without one)."""
    if spec is None:
        return None
    try:
        return Ledger(len(ars), flight.collect(spec, ars, pending, ask, dead,
                                               stacks=stacks), dead)
    except Exception:
        return None
