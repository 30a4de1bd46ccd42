"""The book stays within issue 21's length: 13,000 markdown words and 250
code cells across its chapters, counted by ddpdemo.book.length."""
import json
import subprocess
import sys

from ddpdemo.book import length

import pytest

pytestmark = pytest.mark.fast


def test_book_is_within_its_length():
    sizes = length.measure()
    assert "00_live_cluster" in sizes and "08_when_ddp_hangs" in sizes
    words = sum(w for w, _ in sizes.values())
    code = sum(c for _, c in sizes.values())
    print(length.table(sizes))
    assert words <= length.MAX_WORDS, f"{words} markdown words"
    assert code <= length.MAX_CODE_CELLS, f"{code} code cells"


def test_count_reads_markdown_words_and_code_cells(tmp_path):
    nb = {"cells": [
        {"cell_type": "markdown", "source": ["(label)=\n", "# A title\n"]},
        {"cell_type": "code", "source": ["x = 1  # not words\n"]},
        {"cell_type": "markdown", "source": "two words"},
        {"cell_type": "code", "source": []},
        {"cell_type": "raw", "source": ["not counted"]}]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    assert length.count(path) == (6, 2)


def test_command_prints_the_table_and_its_status():
    run = subprocess.run([sys.executable, "-m", "ddpdemo.book.length"],
                         capture_output=True, text=True)
    assert "total" in run.stdout and "08_when_ddp_hangs" in run.stdout
    words, code = (int(x) for x in
                   run.stdout.splitlines()[-2].split()[1:3])
    assert (words, code) == tuple(map(sum, zip(*length.measure().values(),
                                         strict=True)))
    assert run.returncode == 0          # within: the test above holds it


def test_main_fails_over_the_bound(monkeypatch, capsys):
    words = sum(w for w, _ in length.measure().values())
    monkeypatch.setattr(length, "MAX_WORDS", words - 1)
    assert length.main() == 1
    assert f"{words - 1:>6}" in capsys.readouterr().out.splitlines()[-1]
