"""The linter: ruff, as pyproject.toml configures it ([tool.ruff]:
pycodestyle's errors, pyflakes, bugbear, pyupgrade, simplify, ruff's own
rules and McCabe complexity, lines of 79; Chinese full-width punctuation
allowed), over the package, the tests and the book's tooling; notebooks
are strict nbval's. A finding fails the test, with ruff's own report."""
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


def test_the_wider_rules_are_on_and_chinese_text_is_not_a_finding(
        tmp_path):
    """Issue 48's rules find what they are for; full-width Chinese
    punctuation is allowed, a Cyrillic look-alike of an ASCII letter is
    not."""
    branches = "\n".join(f"    if x == {i}:\n        return {i}"
                         for i in range(12))
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def pairs(a, b, seen={}):\n    return list(zip(a, b))\n\n\n"
        f"def many(x):\n{branches}\n    return None\n\n\n"
        "LOOK_ALIKE = '\u0430'\n")
    run = ruff("--config", str(CONFIG), str(bad))
    for rule in ("B006", "B905", "C901", "RUF001"):
        assert rule in run.stdout, (rule, run.stdout)
    chinese = tmp_path / "zh.py"
    chinese.write_text('TEXT = "（一）每个 rank：等待，对吗？是的；好！"\n')
    run = ruff("--config", str(CONFIG), str(chinese))
    assert run.returncode == 0, run.stdout + run.stderr
