"""ddpdemo.quote: citations of the installed torch fail when the text is
gone, and show_source slices by text."""
import re

import pytest
import torch.distributed as dist

from ddpdemo.quote import cite, find, show_source

pytestmark = pytest.mark.fast


def test_cite_prints_path_line_and_source(capsys):
    numbers = cite("torch/distributed/constants.py", "default_pg_timeout:")
    out = capsys.readouterr().out
    assert re.fullmatch(r"torch/distributed/constants\.py:(\d+): "
                        r"default_pg_timeout: timedelta = \S+\n", out)
    assert numbers == [int(out.split(":")[1])]


def test_cite_prints_its_claim_above_the_quoted_lines(capsys):
    cite("torch/distributed/constants.py", "default_pg_timeout:",
         claim="gloo's default timeout is 30 minutes")
    claim, quoted = capsys.readouterr().out.splitlines()
    assert claim == "claim: gloo's default timeout is 30 minutes"
    assert quoted.startswith("torch/distributed/constants.py:")


def test_a_claim_is_not_printed_when_its_text_is_gone(capsys):
    with pytest.raises(LookupError):
        cite("torch/distributed/constants.py", "no such text", claim="x")
    assert capsys.readouterr().out == ""


def test_cite_finds_texts_in_order():
    (a, _), (b, _) = find("torch/distributed/distributed_c10d.py",
                          "def barrier(", "work.wait()")
    assert a < b


def test_a_wrong_citation_fails():
    with pytest.raises(LookupError, match="no longer in torch/distributed"):
        cite("torch/distributed/constants.py", "default_pg_timeout = 42 days")


def test_order_matters():
    # "def barrier(" comes long after "def all_reduce(" in the file.
    with pytest.raises(LookupError):
        find("torch/distributed/distributed_c10d.py", "def barrier(",
             "def all_reduce(")


def test_a_missing_file_fails():
    with pytest.raises(LookupError, match="not part of the installed torch"):
        cite("torch/distributed/no_such_file.py", "x")


def test_show_source_drops_the_docstring_and_slices_by_text(capsys):
    text = show_source(dist.barrier, start="opts = BarrierOptions()",
                       end="opts.timeout = timeout")
    assert capsys.readouterr().out == text + "\n"
    assert text.splitlines()[0].strip().startswith("opts = BarrierOptions()")
    assert text.splitlines()[-1].strip() == "opts.timeout = timeout"
    assert '"""' not in show_source(dist.barrier)


def test_show_source_fails_on_missing_text():
    with pytest.raises(LookupError, match="barrier"):
        show_source(dist.barrier, start="this line is not there")
