"""The linter: ruff, as pyproject.toml configures it ([tool.ruff]:
pycodestyle's errors and pyflakes, lines of 79), over the package, the
tests and the book's tooling; notebooks are strict nbval's. A finding
fails the test, with ruff's own report."""
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.fast

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pyproject.toml"


def ruff(*args):
    return subprocess.run([sys.executable, "-m", "ruff", "check",
                           "--no-cache", "--output-format", "concise",
                           *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_ruff_finds_nothing():
    run = ruff()
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_configuration_is_the_one_checked(tmp_path):
    # A line of 80 characters (ruff's own default allows 88) and an unused
    # import: both found under the project's configuration, so the clean
    # run above was made with it.
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nx = '" + "a" * 74 + "'\n")
    run = ruff("--config", str(CONFIG), str(bad))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "E501" in run.stdout and "F401" in run.stdout
    # And notebooks are left out, as the configuration says.
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text('{"cells": [], "metadata": {}, "nbformat": 4, '
                        '"nbformat_minor": 5}')
    run = ruff("--config", str(CONFIG), str(tmp_path))
    assert "nb.ipynb" not in run.stdout
