"""The ipyparallel controller of one cluster: started in the cluster's
private directory under ddpdemo.runtime.guard (it ends with this kernel
and removes that directory), with a quick heartbeat, listening where the
placement says; stopped fast. Plumbing for ddpdemo.runtime.engines
(chapter 0, "How the live cluster works"). The few private names of
ipyparallel the runtime reaches are listed here, in IPP_PRIVATES.
"""
import contextlib
import logging
import os
import sys

import ipyparallel as ipp
from ipyparallel.cluster.launcher import (LocalEngineLauncher,
                                          LocalEngineSetLauncher)

from . import processes
from .placement import HEARTBEAT_MS

# The names of ipyparallel's that are not its documented API and that the
# runtime relies on, in one place; tests/test_engines.py fails if
# ipyparallel drops one (pyproject.toml keeps it below version 10).
IPP_PRIVATES = {
    LocalEngineLauncher: ("_start_waiting",   # forks.RankEngineLauncher
                          "process", "pid", "identifier", "args",
                          "work_dir", "output_file", "notify_start"),
    LocalEngineSetLauncher: ("launchers", "launcher_class",
                             "_notice_engine_stopped"),   # forks too
    ipp.Cluster: ("engines", "controller"),
}


def quiet_log():
    """ipyparallel logs to stdout in IPython; that would land in the stored
    outputs. Only its errors reach stderr."""
    log = logging.getLogger("ddpdemo.ipyparallel")
    if not log.handlers:
        log.addHandler(logging.StreamHandler(sys.stderr))
        log.setLevel(logging.ERROR)
        log.propagate = False
    return log


def start(tmpdir, placement):
    """An ipyparallel Cluster whose controller is started; the placement
    gives its engine launcher and where it listens."""
    from IPython.core.profiledir import ProfileDir
    profile_dir = ProfileDir.create_profile_dir(
        os.path.join(tmpdir, "profile")).location
    cluster = ipp.Cluster(
        profile_dir=profile_dir, delay=0, log=quiet_log(),
        engines=placement.engine_set_launcher,
        # ddpdemo.runtime.cluster stops it at exit, engines first and
        # fast; ipyparallel's own hook would stop the controller first,
        # politely, and a kernel manager may kill us while it waits.
        shutdown_atexit=False,
        controller_args=["--usethreads",
                         f"--HeartMonitor.period={HEARTBEAT_MS}"],
        **placement.controller_kwargs)
    guard = {}
    if placement.local_controller:
        guard["controller_cmd"] = processes.guarded(
            "ipyparallel.controller", remove=tmpdir)
    cluster.start_controller_sync(**guard)
    return cluster


def stop(cluster, placement):
    """Stop the controller, after the placement stopped the engines."""
    controller = getattr(cluster.controller, "pid", -1)
    if placement.owns_controller and controller > 0:
        # Nothing to save: SIGKILL, so stopping takes no grace time. The
        # placement has stopped its engines itself. Not ipyparallel's
        # stop: it waits up to 5 s per launcher on a thread that, in a
        # kernel shutting down, never sees the process go, and a kernel
        # manager SIGTERMs a kernel still busy after 2.5 s, before this
        # cluster's directory is removed (the kernel shutdown test in
        # tests/test_cluster.py).
        processes.kill_tree(controller)
        return
    with contextlib.suppress(Exception):
        cluster.stop_cluster_sync()
