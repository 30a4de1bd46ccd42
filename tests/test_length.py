"""ddpdemo.book.length counts what issue 21 bounds: markdown words and code
cells across the chapters (13,000 and 250). The book is not yet within
them (the cut is issue 21's open work), so the command's exit status says
whether it is, and the test that holds the book to the bound comes with
the cut."""
import json
import subprocess
import sys

from ddpdemo.book import length


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


def test_command_prints_the_table_and_fails_over_the_bound():
    run = subprocess.run([sys.executable, "-m", "ddpdemo.book.length"],
                         capture_output=True, text=True)
    assert "total" in run.stdout and "09_when_ddp_hangs" in run.stdout
    words, code = (int(x) for x in
                   run.stdout.splitlines()[-2].split()[1:3])
    within = words <= length.MAX_WORDS and code <= length.MAX_CODE_CELLS
    assert run.returncode == (0 if within else 1)
