"""What a test needs from the machine, and what happens when it is
missing: a reader's `pytest` skips the test and says why; CI fails it
with the same reason. `.ci/run` sets DDPDEMO_NO_SKIP=1, so a broken
install step (Chromium, Slurm, Open MPI, sshd, JupyterLab's MyST
renderer, ...) turns CI red instead of passing as skips (README: Set
up)."""
import importlib
import os

import pytest

VARIABLE = "DDPDEMO_NO_SKIP"


def required():
    """Whether every dependency must be there (CI): DDPDEMO_NO_SKIP=1."""
    return os.environ.get(VARIABLE, "") == "1"


def missing(reason):
    """The test cannot run here because of `reason`: skipped, or failed
    under DDPDEMO_NO_SKIP=1. Never returns."""
    if required():
        pytest.fail(f"{reason} ({VARIABLE}=1: a missing dependency fails)",
                    pytrace=False)
    pytest.skip(reason)


def module(name, install):
    """The imported module `name`, or missing() with how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"cannot import {name} ({exc}); {install}")
