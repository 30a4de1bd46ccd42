"""ddpdemo.timeouts: torch's default group timeouts, read and checked
against the installed source."""
from datetime import timedelta

import pytest

from ddpdemo import quote, timeouts

pytestmark = [pytest.mark.timeout(60), pytest.mark.fast]


def test_defaults_are_torchs_and_the_source_is_cited(capsys):
    import torch.distributed as dist
    found = timeouts.default_timeouts()
    assert found["gloo"] == timedelta(minutes=30)
    assert found["nccl"] == dist.constants.default_pg_nccl_timeout
    out = capsys.readouterr().out
    assert "default_pg_timeout (gloo and every backend but NCCL): 0:30:00" \
        in out
    assert "distributed_c10d.py:" in out and "return default_pg_timeout" \
        in out
    assert "std::chrono::milliseconds(10 * 60 * 1000)" in out


def test_quiet_checks_without_printing(capsys):
    assert timeouts.default_timeouts(show=False)["gloo"] == \
        timedelta(minutes=30)
    assert capsys.readouterr().out == ""


def test_a_changed_default_fails(monkeypatch):
    import torch.distributed.constants as constants
    monkeypatch.setattr(constants, "default_pg_timeout",
                        timedelta(minutes=5))
    with pytest.raises(AssertionError):
        timeouts.default_timeouts(show=False)


def test_a_vanished_source_line_fails(monkeypatch):
    real = quote.find

    def find(path, *texts):
        return real(path, *texts, "a line torch never had")
    monkeypatch.setattr(timeouts, "find", find)
    with pytest.raises(LookupError):
        timeouts.default_timeouts(show=False)
