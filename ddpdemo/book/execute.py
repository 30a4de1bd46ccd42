"""Re-execute the book's notebooks and store their outputs.

    python -m ddpdemo.book.execute                # every notebook in _toc.yml
    python -m ddpdemo.book.execute book/all_reduce.ipynb
    python -m ddpdemo.book.execute --backend nccl --check  # GPUs: no storing

The only way stored outputs change: never edit them by hand. Each notebook
runs top to bottom in a fresh kernel, exactly as strict nbval will re-run
it, with progress output off (IPP_NONINTERACTIVE). Run-to-run noise that
nbval ignores anyway (timing metadata, widget state) is stripped, and
execution counts are renumbered 1, 2, 3... (nbval needs them, and a top to
bottom run always gives these), and an output whose text differs from the
stored one only where book/sanitize.cfg masks it (a duration, a pid, a
port, a bandwidth) keeps its stored text, so a refresh shows diffs only
where something really changed. Stops at the first failing cell.

An output must hold on every reader's CPU. Before storing, each notebook
runs twice: on torch's default (scalar) CPU kernels, which every CPU has,
and on this machine's own (AVX2, AVX-512, ...), through
ATEN_CPU_CAPABILITY, which the kernel and its ranks inherit. If any text
output differs between the two runs, masked fields aside (a count of
floats that differ, a `randn` value), nothing is stored and the cells
are named. `--capabilities` names the two (default: `default,native`).

--check runs the notebooks and stores nothing: what CI or a GPU machine
runs to see every chapter pass. --timings prints how long each code cell
took (where a chapter's seconds go), slowest first. --backend sets
DDPDEMO_BACKEND, which the notebook kernels inherit and
`Cluster(backend="auto")` obeys.
"""
import argparse
import configparser
import contextlib
import os
import pathlib
import re
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]   # the repository
CELL_TIMEOUT = 180  # s, the same bound nbval uses (pyproject.toml)


def book_notebooks(root=ROOT):
    """Notebooks listed in _toc.yml, in reading order (the one reader of
    _toc.yml's order is i18n.toc_names; ddpdemo.book.bench uses this too)."""
    from .i18n import toc_names
    root = pathlib.Path(root)
    return [root / (f + ".ipynb") for f in toc_names(root)
            if (root / (f + ".ipynb")).exists()]


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
        cell.outputs = coalesce(cell.outputs)
        for output in cell.outputs:
            if "execution_count" in output:
                output["execution_count"] = count
    return nb


def coalesce(outputs):
    """Consecutive chunks of one stream as one output: a busy kernel may
    send one print's text in two messages, which would store a cell's
    output in a shape that differs from run to run (nbval joins them when
    it compares, so this changes no check)."""
    out = []
    for output in outputs:
        if (output.get("output_type") == "stream" and out
                and out[-1].get("output_type") == "stream"
                and out[-1].get("name") == output.get("name")):
            out[-1]["text"] += output["text"]
        else:
            out.append(output)
    return out


def sanitizers(path=ROOT / "book" / "sanitize.cfg"):
    """(regex, replacement) pairs from the file nbval sanitises with."""
    config = configparser.ConfigParser()
    config.read(path)
    return [(re.compile(config[name]["regex"]), config[name]["replace"])
            for name in config.sections()]


def sanitize(text, rules):
    for regex, replace in rules:
        text = regex.sub(replace, text)
    return text


def _texts(output):
    """The text nbval compares in one output, and where it lives."""
    if output.get("output_type") == "stream":
        return {"text": output.get("text", "")}
    data = output.get("data", {})
    return {k: v for k, v in data.items() if k == "text/plain"}


def keep_unchanged(old, new, rules):
    """In `new`, put back the stored text of every output that equals the
    stored one after sanitising: same cell source, same output position,
    same text but for durations, pids, ports and bandwidths."""
    old_cells = [c for c in old.cells if c.cell_type == "code"]
    new_cells = [c for c in new.cells if c.cell_type == "code"]
    # Cell by position: a cell added or removed ends the comparison.
    for before, after in zip(old_cells, new_cells, strict=False):
        if before.source != after.source or \
                len(before.outputs) != len(after.outputs):
            continue
        for was, now in zip(before.outputs, after.outputs, strict=True):
            if was.get("output_type") != now.get("output_type"):
                continue
            was_text, now_text = _texts(was), _texts(now)
            if was_text.keys() != now_text.keys():
                continue
            for key, text in now_text.items():
                if text != was_text[key] and sanitize(text, rules) == \
                        sanitize(was_text[key], rules):
                    if key == "text":
                        now["text"] = was_text[key]
                    else:
                        now["data"][key] = was_text[key]
    return new


def cell_seconds(nb):
    """[(seconds, cell number, first line)] of each executed code cell,
    from the timing metadata nbclient records (record_timing=True)."""
    from datetime import datetime
    rows = []
    for n, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        times = cell.metadata.get("execution", {})
        start = times.get("iopub.execute_input")
        end = times.get("shell.execute_reply")
        if start and end:
            took = (datetime.fromisoformat(end.replace("Z", "+00:00")) -
                    datetime.fromisoformat(start.replace("Z", "+00:00")))
            first = (cell.source.splitlines() or [""])[0]
            rows.append((took.total_seconds(), n + 1, first[:60]))
    return rows


# torch's scalar kernels, which every CPU runs (torch/csrc: the
# ATEN_CPU_CAPABILITY variable), and "native": the variable unset, so
# torch picks this CPU's best.
CAPABILITIES = ("default", "native")


class KernelDependent(Exception):
    """Outputs that differ between two CPU capabilities: not stored."""


@contextlib.contextmanager
def capability(name):
    """ATEN_CPU_CAPABILITY=name for the kernels started inside (they and
    their ranks inherit the environment); "native" unsets it."""
    before = os.environ.get("ATEN_CPU_CAPABILITY")
    if name == "native":
        os.environ.pop("ATEN_CPU_CAPABILITY", None)
    else:
        os.environ["ATEN_CPU_CAPABILITY"] = name
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ATEN_CPU_CAPABILITY", None)
        else:
            os.environ["ATEN_CPU_CAPABILITY"] = before


def differing_cells(one, other, rules):
    """[(code cell number, first line)] where the two runs' text outputs
    differ after sanitising (what strict nbval would see differ)."""
    found = []
    pairs = zip([c for c in one.cells if c.cell_type == "code"],
                [c for c in other.cells if c.cell_type == "code"],
                strict=True)
    for n, (a, b) in enumerate(pairs, 1):
        texts = [_compared(cell.outputs, rules) for cell in (a, b)]
        if texts[0] != texts[1]:
            found.append((n, (a.source.splitlines() or [""])[0][:60]))
    return found


def _compared(outputs, rules):
    """A cell's text outputs as nbval compares them: sanitised, and
    consecutive chunks of one stream joined (a busy kernel may send one
    print's text in two messages; nbval coalesces them too)."""
    import copy
    return [{k: sanitize(v, rules) for k, v in _texts(output).items()}
            for output in coalesce(copy.deepcopy(outputs))]


def run_once(stored, path, timings=False):
    """A copy of `stored` run top to bottom in a fresh kernel, and
    cell_seconds() of the run where timings=True."""
    import copy

    from nbclient import NotebookClient
    nb = copy.deepcopy(stored)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            record_timing=timings)
    started = time.monotonic()
    client.execute()
    rows = cell_seconds(nb) if timings else None
    if rows is not None:
        rows.append((time.monotonic() - started - sum(r[0] for r in rows),
                     0, "(kernel start and between cells)"))
    return nb, rows


def execute(path, store=True, timings=False, capabilities=CAPABILITIES):
    """Run the notebook top to bottom in a fresh kernel; store its outputs
    unless store=False (the file is then not touched). Storing runs it
    once per capability and raises KernelDependent, storing nothing, if
    their outputs differ. timings=True: return cell_seconds() of the
    (first) run."""
    import nbformat
    stored = nbformat.read(path, as_version=4)
    if not store:
        return run_once(stored, path, timings)[1]
    rules = sanitizers()
    runs = []
    for name in capabilities:
        with capability(name):
            runs.append((name, *run_once(stored, path, timings)))
    (first, nb, rows), *others = runs
    for name, other, _ in others:
        cells = differing_cells(nb, other, rules)
        if cells:
            code = [[c for c in run.cells if c.cell_type == "code"]
                    for run in (nb, other)]
            n = cells[0][0]
            shown = "\n".join(
                f"  cell {n} under {cap}: "
                f"{_compared(run[n - 1].outputs, rules)!r:.400}"
                for cap, run in ((first, code[0]), (name, code[1])))
            raise KernelDependent(
                f"{path.name}: outputs differ between the CPU capabilities "
                f"{first} and {name}, so they would fail strict nbval on "
                "another CPU; nothing stored. Cells: " + "; ".join(
                    f"{n} ({line})" for n, line in cells) + "\n" + shown)
    nbformat.write(keep_unchanged(stored, clean(nb), rules), path)
    return rows


# The book's largest cluster has 4 ranks (chapters 1 and 4); NCCL wants a
# GPU of its own for each.
NCCL_GPUS = 4


def visible_gpus():
    """GPUs torch sees here (0 on a CPU build), asked in a child process so
    that this one never initialises CUDA before the kernels do."""
    code = ("import torch; print(torch.cuda.device_count() "
            "if torch.cuda.is_available() else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=120)
    return int(out.stdout.strip() or 0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    parser.add_argument("--check", action="store_true",
                        help="run every cell, store nothing")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"),
                        help="what Cluster(backend='auto') uses")
    parser.add_argument("--timings", action="store_true",
                        help="print each code cell's seconds")
    parser.add_argument("--capabilities", default=",".join(CAPABILITIES),
                        help="the CPU capabilities (ATEN_CPU_CAPABILITY, "
                             "or native) whose outputs must agree before "
                             "storing (default: %(default)s)")
    args = parser.parse_args(argv)
    capabilities = tuple(args.capabilities.split(","))
    if args.backend not in (None, "gloo") and not args.check:
        parser.error("stored outputs are gloo's: use --backend "
                     f"{args.backend} with --check")
    if args.backend == "nccl":
        gpus = visible_gpus()
        if gpus < NCCL_GPUS:
            # Say it before a kernel starts: a chapter's first cell would
            # otherwise end in a traceback from deep inside the cluster.
            parser.exit(2, f"--backend nccl needs {NCCL_GPUS} GPUs (one per "
                           f"rank of the book's largest cluster); this "
                           f"machine's torch sees {gpus}: nothing was run\n")
    os.environ["IPP_NONINTERACTIVE"] = "1"
    if args.backend:
        os.environ["DDPDEMO_BACKEND"] = args.backend
    verb = "checking" if args.check else "executing"
    total = time.monotonic()
    for path in args.notebooks or book_notebooks():
        start = time.monotonic()
        print(f"{verb} {path} ...", end=" ", flush=True)
        try:
            rows = execute(path.resolve(), store=not args.check,
                           timings=args.timings, capabilities=capabilities)
        except Exception as exc:
            print(f"FAILED after {time.monotonic() - start:.1f} s")
            print(exc, file=sys.stderr)
            return 1
        print(f"{time.monotonic() - start:.1f} s", flush=True)
        for seconds, n, first in sorted(rows or (), reverse=True):
            print(f"  {seconds:6.2f} s  cell {n:2d}  {first}")
    print(f"done in {time.monotonic() - total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
