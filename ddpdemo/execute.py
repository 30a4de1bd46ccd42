"""Re-execute the book's notebooks and store their outputs.

    python -m ddpdemo.execute                # every notebook in _toc.yml
    python -m ddpdemo.execute book/01_all_reduce.ipynb

The only way stored outputs change: never edit them by hand. Each notebook
runs top to bottom in a fresh kernel, exactly as strict nbval will re-run
it, with progress output off (IPP_NONINTERACTIVE). Run-to-run noise that
nbval ignores anyway (timing metadata, widget state) is stripped, and
execution counts are renumbered 1, 2, 3... (nbval needs them, and a top to
bottom run always gives these), so diffs show only real changes. Stops at
the first failing cell.
"""
import argparse
import os
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CELL_TIMEOUT = 180  # s, the same bound nbval uses (pyproject.toml)


def book_notebooks():
    """Notebooks listed in _toc.yml, in reading order."""
    import yaml
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = []

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
    walk(toc)
    return [ROOT / (f + ".ipynb") for f in files
            if (ROOT / (f + ".ipynb")).exists()]


def clean(nb):
    """Drop or fix what differs between identical runs."""
    nb.metadata.pop("widgets", None)
    count = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        count += 1
        cell.execution_count = count
        cell.metadata.pop("execution", None)
        for output in cell.outputs:
            if "execution_count" in output:
                output["execution_count"] = count
    return nb


def execute(path):
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            record_timing=False)
    client.execute()
    nbformat.write(clean(nb), path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    args = parser.parse_args(argv)
    os.environ["IPP_NONINTERACTIVE"] = "1"
    for path in args.notebooks or book_notebooks():
        start = time.monotonic()
        print(f"executing {path} ...", end=" ", flush=True)
        execute(path.resolve())
        print(f"{time.monotonic() - start:.1f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
