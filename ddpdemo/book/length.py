"""How long the book is, as a reader sees it: words per page.

    python -m ddpdemo.book.length        # a table, then the total

Every page of _toc.yml counts, the markdown pages too (the triage page and
the glossary are read as well as looked up). A word is a
whitespace-separated run of characters in what the page shows: markdown,
the code of a visible cell and its printed text (stream, text/plain or
text/markdown output, an error's traceback). A cell tagged remove-cell (the
checks that issue 44 moved out of the reading path) shows nothing;
remove-input shows its output only, remove-output its code only. Issue 44
bounds the book at 36,000 words and any page at 4,500; tests/test_length.py
holds it to that.
"""
import json
import pathlib
import re
import sys

from .i18n import ROOT, toc_names

MAX_WORDS = 36_000
MAX_PAGE_WORDS = 4_500


def words(text):
    return len(re.findall(r"\S+", text))


def _joined(value):
    return value if isinstance(value, str) else "".join(value)


def output_text(output):
    """The text a reader sees of one output ('' for a picture)."""
    if output.get("output_type") == "stream":
        return _joined(output["text"])
    if output.get("output_type") == "error":
        return "\n".join(output.get("traceback", []))
    data = output.get("data", {})
    if "text/markdown" in data:
        return _joined(data["text/markdown"])
    if "text/plain" in data and not {"image/png", "text/html"} & set(data):
        return _joined(data["text/plain"])
    return ""


def count(notebook):
    """Words a reader sees in one notebook file."""
    total = 0
    for cell in json.loads(pathlib.Path(notebook).read_text())["cells"]:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] == "markdown":
            total += words(_joined(cell["source"]))
        if cell["cell_type"] != "code" or "remove-cell" in tags:
            continue
        if "remove-input" not in tags:
            total += words(_joined(cell["source"]))
        if "remove-output" not in tags:
            total += sum(words(output_text(o))
                         for o in cell.get("outputs", []))
    return total


def measure(root=ROOT):
    """{page name: words}, in reading order."""
    sizes = {}
    for name in toc_names(root):
        path = pathlib.Path(root) / name
        notebook = path.with_suffix(".ipynb")
        sizes[path.name] = (count(notebook) if notebook.exists() else
                            words(path.with_suffix(".md").read_text()))
    return sizes


def table(sizes):
    rows = [f"{'page':<28} {'words':>6}"]
    rows += [f"{name:<28} {n:>6}"
             + ("  over the page bound" if n > MAX_PAGE_WORDS else "")
             for name, n in sizes.items()]
    rows.append(f"{'total':<28} {sum(sizes.values()):>6}")
    rows.append(f"{'bound (issue 44)':<28} {MAX_WORDS:>6}  "
                f"(a page: {MAX_PAGE_WORDS})")
    return "\n".join(rows)


def within(sizes):
    return (sum(sizes.values()) <= MAX_WORDS
            and max(sizes.values()) <= MAX_PAGE_WORDS)


def main():
    sizes = measure()
    print(table(sizes))
    return 0 if within(sizes) else 1


if __name__ == "__main__":
    sys.exit(main())
