"""What a run on the ranks came to: results, ranks that raised or died,
ranks still stuck, and what to tell the reader about them.

ddpdemo.runtime.cluster decides what to do next (restart, check the group);
this module only gathers the facts, and it gathers them before anything
is restarted, because a restart kills the ranks that hold them.
"""
import dataclasses
import signal

from . import flight
from .ledger import Ledger
from . import processes, watch


@dataclasses.dataclass
class Outcome:
    pending: list           # ranks still running at the timeout
    dead: list              # ranks whose process is gone
    errors: dict            # rank -> what went wrong (raised or died)
    ledger: object = None   # a Ledger, when something went wrong
    stacks: dict = None     # stuck rank -> frames, outermost first
    ledger_error: str = None    # why there is no ledger, if building it
                                # failed: "KeyError: 'entries'"


@dataclasses.dataclass
class Generation:
    """The ranks a run went to, as settle needs them: one object for the
    cluster's current generation rather than six arguments."""
    engines: object         # ddpdemo.runtime.engines.Engines
    ids: list               # engine id of each rank, by rank
    pids: list              # process id of each rank, by rank
    is_alive: object        # is_alive(rank): its process still runs
    store: object = None    # the group's rendezvous (runtime.rendezvous)
    dump: str = None        # where rank {}'s faulthandler writes its stack
                            # on SIGUSR1 (the placement's stack_dumps)
    local: bool = False     # the placement's `local`: pids ours to signal

    def dump_path(self, rank):
        return self.dump.format(rank)


def settle(ars, timeout, gen):
    """Wait for every rank's result (bounded) and describe what failed.

    `gen` (a Generation) reaches the ranks: their processes, their Flight
    Recorder side threads (through the group's store) and, for local
    ranks, the files their faulthandler writes stacks to.
    """
    pending, failed, dead = watch.wait(
        ars, timeout, gen.is_alive,
        grace=max(watch.FAILURE_GRACE, gen.engines.death_notice_s))
    # A remote rank's task fails (EngineError) when its engine dies.
    dead += [r for r in failed if not gen.is_alive(r)]
    failed = [r for r in failed if r not in dead]
    watch.echo_output(ars)
    errors = {r: watch.describe_error(ars[r]) for r in failed}
    errors.update({r: processes.describe_exit(
        gen.engines.exit_code(gen.pids[r])) for r in dead})
    out = Outcome(pending, dead, errors)
    if not (errors or pending):
        return out
    # Everything below is gathered side by side, so a hang is reported
    # about as soon as it is seen: local stuck ranks are signalled first
    # (their dumps are written while the ledger is gathered), then every
    # rank's ledger is asked for (stuck ones answer through the store, with
    # their own stack), then the signalled dumps are read.
    signalled = {}
    if gen.local and hasattr(signal, "SIGUSR1"):
        signalled = watch.signal_dumps(
            {r: (gen.pids[r], gen.dump_path(r)) for r in pending})
    dumps = {}
    try:
        out.ledger = gather_ledger(
            gen.store, ars, pending, dead=dead, stacks=dumps,
            is_alive=gen.is_alive,
            ask=lambda ranks: gen.engines.call_each(
                [gen.ids[r] for r in ranks], flight.record, stacks=False))
    except Exception as error:
        # Ranks out of reach, or a bug in the ledger's code: the failure
        # is still reported, and the report says why it has no ledger.
        out.ledger_error = f"{type(error).__name__}: {error}"
    # Each stuck rank's own dump (it came with the ledger) is the way for
    # ranks on other hosts; local ones are also signalled, which works
    # when a rank's side thread cannot answer. A signalled dump that did
    # not come keeps the stack the rank's responder sent.
    out.stacks = watch.parse_dumps(dumps, pending)
    for rank, frames in watch.read_dumps(signalled).items():
        if frames is not None:
            out.stacks[rank] = frames
    return out


def gather_ledger(spec, ars, pending, ask, dead=(), stacks=None,
                  is_alive=None):
    """The Ledger of a run that went wrong (see flight.collect, which
    fills `stacks`); None without a group's store (`spec`). What goes
    wrong while it is built is raised: settle reports it."""
    if spec is None:
        return None
    return Ledger(len(ars), flight.collect(spec, ars, pending, ask, dead,
                                           stacks=stacks,
                                           is_alive=is_alive), dead)
