"""How long the book is: markdown words and code cells per chapter.

    python -m ddpdemo.book.length        # a table, then the totals

A chapter is a notebook of _toc.yml (the reference pages in markdown,
symptoms, pitfalls and glossary, are looked up, not read through, and are
not counted). A word is a whitespace-separated run of characters in a
markdown cell, labels and fenced code included: the count a reader's eye
meets. Issue 21 bounds the book at 13,000 words and 250 code cells, and
tests/test_length.py holds it to that.
"""
import json
import pathlib
import re
import sys

from .execute import ROOT, book_notebooks

MAX_WORDS = 13_000
MAX_CODE_CELLS = 250


def count(notebook):
    """(markdown words, code cells) of one notebook file."""
    cells = json.loads(pathlib.Path(notebook).read_text())["cells"]
    words = sum(len(re.findall(r"\S+", "".join(c["source"])))
                for c in cells if c["cell_type"] == "markdown")
    code = sum(1 for c in cells if c["cell_type"] == "code")
    return words, code


def measure(root=ROOT):
    """{chapter stem: (words, code cells)}, in reading order."""
    return {nb.stem: count(nb) for nb in book_notebooks(root)}


def table(sizes):
    rows = [f"{'chapter':<28} {'words':>6} {'code cells':>10}"]
    rows += [f"{stem:<28} {w:>6} {c:>10}" for stem, (w, c) in sizes.items()]
    words = sum(w for w, _ in sizes.values())
    code = sum(c for _, c in sizes.values())
    rows.append(f"{'total':<28} {words:>6} {code:>10}")
    rows.append(f"{'bound (issue 21)':<28} {MAX_WORDS:>6} "
                f"{MAX_CODE_CELLS:>10}")
    return "\n".join(rows)


def main():
    sizes = measure()
    print(table(sizes))
    words = sum(w for w, _ in sizes.values())
    code = sum(c for _, c in sizes.values())
    return 0 if words <= MAX_WORDS and code <= MAX_CODE_CELLS else 1


if __name__ == "__main__":
    sys.exit(main())
