"""The runtime: what makes `ddpdemo.Cluster` work. No reader opens these;
the chapters see only `ddpdemo.Cluster`, `%%ranks`, HangError and
RankError.

    cluster    the policy: life cycle, running, when to restart
    options    checks every value a Cluster is given, when it is made
    engines    the ipyparallel side: client, generations of engines
    controller the ipyparallel controller, and the ipyparallel privates
               used (IPP_PRIVATES)
    placement  where engines run, one object per way: local, launcher,
               a running cluster's (profile); each holds the facts that
               differ by placement, locality included, and satisfies
               the Placement protocol
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
    torchversion  the oldest torch it works on, checked on import here
    errors     HangError, RankError and each rank's Failure: the hang
               report's words (with signal_name, package_root and the
               faulthandler frame pattern, FRAME)
    ledger     the Flight Recorder's ledger, side by side, and what it
               finds (a divergence, as data, then as a sentence)
    flight     the Flight Recorder on every rank, read from a stuck one
    devices    a rank's device, gloo's network interface, and what
               backend="auto" means (auto_backend)
    rendezvous where a group's ranks meet: a file or rank 0's TCP store
    engine     RANK SIDE: what runs inside each rank's engine
    guard      RANK SIDE: ends an engine (or the controller) with its kernel
    forkserver RANK SIDE: imports torch once and forks local engines

errors, ledger, flight and devices are what a hang report and a rank are
made of; a chapter imports one by its short name (`from ddpdemo import
ledger`), which ddpdemo's __init__ serves from here.

What it may import: the standard library, torch, ipyparallel (and its
IPython, zmq, traitlets), psutil, cloudpickle; of ddpdemo, nothing
outside this folder, so the package's top level may use the runtime and
never the other way round. Never ddpdemo.book, never a lesson module.
The rank-side modules (engine, guard, forkserver, and flight, devices,
errors, ledger and rendezvous that they use) import none of the kernel side
(cluster, engines, placement, ssh, batch, outcome, watch, magic,
progress, options, group, controller, forks, enginesets, background)
nor ipyparallel's client; the guard and the
fork server import the standard library only. tests/test_imports.py
checks this, and that neither the package nor its parts have an import
cycle.

This file imports only torchversion (the standard library; it reads
torch's version without importing torch), so that a rank importing
ddpdemo.runtime.engine loads no ipyparallel client with it, and an older
torch than the runtime needs is named before any of it loads.
"""
from . import torchversion

torchversion.check()
