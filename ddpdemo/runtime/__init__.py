"""The runtime: what makes `ddpdemo.Cluster` work. No reader opens these;
the chapters see only `ddpdemo.Cluster`, `%%ranks`, HangError and
RankError.

    cluster    the policy: life cycle, running, when to restart
    options    checks what a Cluster is asked for
    engines    the ipyparallel side: client, generations of engines
    controller the ipyparallel controller, and the ipyparallel privates
               used (IPP_PRIVATES)
    placement  where engines run, one object per way: local, launcher,
               a running cluster's (profile); each holds the facts that
               differ by placement
    ssh        ranks placed on other hosts over ssh (the fourth way)
    batch      the Slurm and MPI launchers a LauncherPlacement uses
    forks      the fork server's handle, and the launcher that asks it
    enginesets how engine sets are named (g<generation>-rank<r>)
    background one launch at a time on a thread of its own
    group      turns a generation of engines into a process group
    outcome    what a run came to, gathered before a restart
    watch      bounded waits on the ranks; stacks of stuck ranks
    magic      the `%%ranks` cell magic; progress: start-up progress
    processes  the operating system's side: guarded commands, kill, exit
    waiting    the one deadline-polling helper (both sides use it)
    engine     RANK SIDE: what runs inside each rank's engine
    guard      RANK SIDE: ends an engine (or the controller) with its kernel
    forkserver RANK SIDE: imports torch once and forks local engines

What it may import: the standard library, torch, ipyparallel (and its
IPython, zmq, traitlets), psutil, cloudpickle; of ddpdemo, only the
four flat modules a hang report is made of: ddpdemo.errors,
ddpdemo.ledger, ddpdemo.flight and ddpdemo.devices (they in turn use
only the rank side and `waiting` of this folder). Never ddpdemo.book,
never a lesson module. The rank-side modules (engine, guard, forkserver)
import none of the kernel side (cluster, engines, placement, ssh, batch,
outcome, watch, magic, progress, options, group, controller, forks,
enginesets, background) nor ipyparallel's
client: tests/test_imports.py checks this, and that the whole package
has no import cycle.

This file imports nothing, so that a rank importing
ddpdemo.runtime.engine loads no ipyparallel client with it.
"""
