"""Progress for a person, silence under nbval and CI."""
from ddpdemo.runtime.progress import Progress, interactive

import pytest

pytestmark = pytest.mark.fast


def test_progress_is_shown_to_a_person(monkeypatch, capsys):
    monkeypatch.delenv("IPP_NONINTERACTIVE", raising=False)
    monkeypatch.delenv("CI", raising=False)
    assert interactive()
    p = Progress("Starting 2 ranks")
    p.update("engines 1/2")
    p.update("engines 1/2")       # unchanged: not written again
    p.done("gloo group of 2 ready")
    err = capsys.readouterr().err
    assert err.count("engines 1/2") == 1
    assert "Starting 2 ranks: gloo group of 2 ready in" in err


def test_progress_is_silent_under_nbval_and_ci(monkeypatch, capsys):
    for var in ("IPP_NONINTERACTIVE", "CI"):
        monkeypatch.delenv("IPP_NONINTERACTIVE", raising=False)
        monkeypatch.delenv("CI", raising=False)
        monkeypatch.setenv(var, "1")
        assert not interactive()
        p = Progress("Starting 2 ranks")
        p.update("engines 1/2")
        p.done("ready")
        assert capsys.readouterr().err == ""
