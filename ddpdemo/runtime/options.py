"""What a Cluster may be asked for, checked before anything starts: a
mistyped world size, backend or keyword fails at once, with the accepted
values, not half-way through starting engines. Chapter 0
(`ddpdemo.Cluster`).
"""
import datetime
import os
from collections.abc import Mapping

from .placement import LauncherPlacement, LocalPlacement, ProfilePlacement
from .ssh import SSHRanks

BACKENDS = ("auto", "gloo", "nccl")
BACKEND_VARIABLE = "DDPDEMO_BACKEND"   # what backend="auto" means, if set
RENDEZVOUS = (None, "file", "tcp")


def requested_backend(backend):
    """backend, or what DDPDEMO_BACKEND says "auto" means."""
    if backend == "auto":
        return os.environ.get(BACKEND_VARIABLE) or "auto"
    return backend


def check_args(world_size, backend, timeout):
    if isinstance(world_size, bool) or not isinstance(world_size, int):
        raise TypeError(
            f"world_size must be a positive int, got {world_size!r}")
    if world_size < 1:
        raise ValueError(
            f"world_size must be a positive int, got {world_size}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of "
                         f"{', '.join(map(repr, BACKENDS))}")
    check_timeout(timeout)


def check_timeout(timeout, name="timeout"):
    """`timeout` in seconds (a float), from a positive number of seconds
    or a datetime.timedelta; the error names the parameter, `name`."""
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    elif isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{name} must be a positive number of seconds "
                        f"(or a timedelta), got {timeout!r}")
    if not 0 < timeout < float("inf"):
        raise ValueError(f"{name} must be a positive number of seconds "
                         f"(or a timedelta), got {timeout!r}")
    return float(timeout)


def check_address(address, name):
    """A host's address or name as a rank reaches it: a non-empty str
    (None: the placement's default)."""
    if address is None:
        return None
    if not isinstance(address, str):
        raise TypeError(f"{name} must be a host name or IP address as a "
                        f"str, got {address!r}")
    if not address.strip():
        raise ValueError(f"{name} must be a host name or IP address, "
                         f"got {address!r}")
    return address


def check_env(env):
    """Variables for every rank: None, or a mapping of str to str (what an
    environment holds)."""
    if env is None:
        return {}
    if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str)
            for k, v in env.items()):
        raise TypeError(f"env must be a dict of str to str (variables for "
                        f"every rank), got {env!r}")
    return dict(env)


def check_flag(value, name):
    """A bool, strictly: "no" or 0 is a mistake, not False."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def check_rendezvous(rendezvous, local):
    """"file" (a FileStore: no listener) needs every rank on this host."""
    if rendezvous not in RENDEZVOUS:
        raise ValueError(f"unknown rendezvous {rendezvous!r}; "
                         "choose 'file' or 'tcp'")
    if rendezvous == "file" and not local:
        raise ValueError("rendezvous='file' needs all ranks on this "
                         "machine; use 'tcp' with remote engines")
    return rendezvous or ("file" if local else "tcp")


def reject_unknown(options, known, where):
    """TypeError naming every keyword in `options` not in `known`, and
    the placement it was given to: a misspelling, or an option of
    another placement, would otherwise be dropped without a word."""
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(
            f"Cluster() got unexpected keyword argument(s) "
            f"{', '.join(unknown)} for {where} (which takes "
            f"{', '.join(known) if known else 'none of its own'})")


def placement(world_size, engines=None, profile=None, options=None):
    """The placement (ddpdemo.runtime.placement) that a Cluster's keywords
    ask for: engines (None: "local"), or profile, not both; `options`:
    the keywords Cluster does not take itself (hosts=, ssh_args=,
    sbatch_args=, mpiexec_args=, controller_ip=)."""
    options = dict(options or {})
    if profile is not None and engines is not None:
        raise ValueError(
            f"profile={profile!r} and engines={engines!r} conflict: a "
            f"profile's engines are already running; give one of them")
    engines = engines or "local"
    check_address(options.get("controller_ip"), "controller_ip")
    if profile is not None:
        if not isinstance(profile, str) or not profile:
            raise TypeError(f"profile must be the name of a running "
                            f"ipyparallel cluster, got {profile!r}")
        reject_unknown(options, ProfilePlacement.OPTIONS,
                       f"profile={profile!r}")
        return ProfilePlacement(profile)
    if engines == "local":
        reject_unknown(options, LocalPlacement.OPTIONS, "engines='local'")
        return LocalPlacement(world_size)
    if engines == "ssh":
        reject_unknown(options, SSHRanks.OPTIONS, "engines='ssh'")
        if "hosts" not in options:
            raise TypeError("engines='ssh' needs hosts={host: ranks there}, "
                            "e.g. hosts={'node1': 2, 'node2': 2}")
        return SSHRanks(world_size, **options)
    reject_unknown(options, LauncherPlacement.options(engines),
                   f"engines={engines!r}")
    return LauncherPlacement(world_size, engines, options)
