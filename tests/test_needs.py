"""tests/needs.py: a missing dependency skips a reader's test and fails
CI's (DDPDEMO_NO_SKIP=1, which .ci/run sets)."""
import pathlib

import needs
import pytest

pytestmark = pytest.mark.fast

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_missing_skips_where_not_required(monkeypatch):
    monkeypatch.delenv(needs.VARIABLE, raising=False)
    with pytest.raises(pytest.skip.Exception, match="no chromium"):
        needs.missing("no chromium")


def test_missing_fails_where_required(monkeypatch):
    monkeypatch.setenv(needs.VARIABLE, "1")
    with pytest.raises(pytest.fail.Exception, match="no chromium"):
        needs.missing("no chromium")


def test_a_module_that_is_not_there(monkeypatch):
    monkeypatch.setenv(needs.VARIABLE, "1")
    with pytest.raises(pytest.fail.Exception, match="pip install nope"):
        needs.module("ddpdemo_no_such_module", "pip install nope")
    assert needs.module("json", "-").__name__ == "json"


def test_ci_requires_every_dependency():
    """.ci/run runs the README's test command with the variable set."""
    run = (ROOT / ".ci" / "run").read_text()
    assert f"export {needs.VARIABLE}=1" in run


def test_no_test_skips_for_a_dependency_on_its_own():
    """Every skip for something missing goes through needs.missing, so
    that CI fails it: no pytest.skip or importorskip elsewhere."""
    offenders = []
    for path in sorted((ROOT / "tests").glob("*.py")):
        if path.name in ("needs.py", "test_needs.py"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "pytest.skip(" in line or "importorskip(" in line:
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert not offenders, offenders
