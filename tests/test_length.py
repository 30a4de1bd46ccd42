"""The book stays within issue 44's length: 36,000 words as a reader sees
them (markdown, visible code, printed text) over the toc's pages, and no
page over 4,500, counted by ddpdemo.book.length."""
import json
import subprocess
import sys

import pytest

from ddpdemo.book import length

pytestmark = pytest.mark.fast


def test_book_is_within_its_length():
    sizes = length.measure()
    assert "live_cluster" in sizes and "glossary" in sizes
    print(length.table(sizes))
    assert sum(sizes.values()) <= length.MAX_WORDS
    assert max(sizes.values()) <= length.MAX_PAGE_WORDS, sizes


def test_count_reads_what_the_page_shows(tmp_path):
    nb = {"cells": [
        {"cell_type": "markdown", "source": ["(label)=\n", "# A title\n"]},
        {"cell_type": "code", "metadata": {}, "source": ["x = 1  # two\n"],
         "outputs": [{"output_type": "stream", "text": ["a b\n"]}]},
        {"cell_type": "code", "metadata": {"tags": ["remove-cell"]},
         "source": ["assert x == 1\n"], "outputs": []},
        {"cell_type": "code", "metadata": {"tags": ["remove-input"]},
         "source": ["hidden code\n"],
         "outputs": [{"output_type": "execute_result",
                      "data": {"text/plain": ["'shown'"]}}]},
        {"cell_type": "code", "metadata": {}, "source": [],
         "outputs": [{"output_type": "display_data",
                      "data": {"image/png": "xx", "text/plain": "<Fig>"}}]},
        {"cell_type": "raw", "source": ["not counted"]}]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    # 4 markdown, 5 code, 2 printed, 1 result; checks and pictures: none
    assert length.count(path) == 4 + 5 + 2 + 1


def test_command_prints_the_table_and_its_status():
    run = subprocess.run([sys.executable, "-m", "ddpdemo.book.length"],
                         capture_output=True, text=True, timeout=60)
    assert "glossary" in run.stdout
    total = int(run.stdout.splitlines()[-2].split()[1])
    assert total == sum(length.measure().values())
    assert run.returncode == (0 if length.within(length.measure()) else 1)


def test_main_fails_over_a_bound(monkeypatch, capsys):
    sizes = length.measure()
    monkeypatch.setattr(length, "MAX_WORDS", sum(sizes.values()) - 1)
    assert length.main() == 1
    monkeypatch.setattr(length, "MAX_WORDS", 10**9)
    monkeypatch.setattr(length, "MAX_PAGE_WORDS", max(sizes.values()) - 1)
    assert length.main() == 1
    assert "over the page bound" in capsys.readouterr().out
