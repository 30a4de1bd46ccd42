"""Evidence out of the reading path (issue 32, item 4).

A code cell that only quotes torch's source (`cite`, `show_source`: the
checks that the installed torch still says what a sentence relies on) is
folded whole, code and output, behind one line that says what it backs:
MyST-NB's `hide-cell` tag, with that line as the cell's
`mystnb.code_prompt_show`. The sentence it supports stays in the prose;
strict nbval still runs and compares the cell. The line is the citation's
own `claim=` (or, for `show_source`, the name of what it shows), so it
cannot drift from the check; the Chinese edition translates it as the
unit "<cell id>:fold" (ddpdemo.book.i18n).

    python -m ddpdemo.book.evidence           # list what would change
    python -m ddpdemo.book.evidence --write   # fold them (metadata only)

tests/test_evidence.py fails while a notebook is not in the written state.
"""
import argparse
import ast
import json
import sys
from pathlib import Path

from .i18n import ROOT, toc_names

QUOTERS = {"cite", "show_source"}
FOLD_TAG = "hide-cell"
# Tags a folded cell no longer needs: hide-cell hides both parts.
SUPERSEDED = {"hide-input", "hide-output"}
PROMPT = "Evidence from torch's source: "
HIDE_PROMPT = "Hide the evidence"


def _quoter(node):
    """The name of the quoting function `node` calls (cite or
    show_source, bare or as ddpdemo.cite), or None."""
    if not isinstance(node, ast.Call):
        return None
    fn = node.func
    name = fn.attr if isinstance(fn, ast.Attribute) else getattr(
        fn, "id", None)
    return name if name in QUOTERS else None


def _quotes_torch(node):
    """A cite call, or show_source of torch's own code (`dist.x`,
    `torch.x`): evidence. show_source of ddpdemo's code (reduce_mean,
    torch_distributed_zero_first) is the lesson itself and stays open."""
    name = _quoter(node)
    if name == "cite":
        return True
    if name == "show_source" and node.args:
        shown = ast.unparse(node.args[0])
        return shown.split(".")[0] in ("dist", "torch")
    return False


def _constant(node):
    """A string, or strings joined with +: a path being spelled out."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return all(isinstance(n, (ast.Name, ast.Constant))
                   for n in (node.left, node.right))
    return False


def quotes_only(source):
    """The calls to cite/show_source if every statement of the cell is one
    (bare or assigned), an import, an assert (on a docstring's words) or a
    path constant; else None. A cell that computes or prints anything
    else is part of the lesson and stays open."""
    try:
        tree = ast.parse(source)
    except SyntaxError:          # a cell magic (%%ranks): never evidence
        return None
    calls = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assert)):
            continue     # an assert here checks a quoted text
        value = getattr(stmt, "value", None)
        if isinstance(stmt, (ast.Expr, ast.Assign)) and _quotes_torch(value):
            calls.append(value)
        elif isinstance(stmt, ast.Assign) and _constant(value):
            continue
        else:
            return None
    return calls or None


def fold_line(calls):
    """What the folded cell backs, in one line: its citations' claims,
    or the names of what it shows."""
    said = []
    for call in calls:
        kw = {k.arg: k.value for k in call.keywords}
        if "claim" in kw:
            said.append(ast.literal_eval(kw["claim"]))
        elif _quoter(call) == "show_source" and call.args:
            said.append(f"{ast.unparse(call.args[0])}'s code")
        else:
            said.append("torch's source")
    return PROMPT + "; ".join(dict.fromkeys(said))


def folded(cell):
    """The cell as it should be: folded with its line if it only quotes,
    otherwise unchanged except that a stale fold is removed."""
    cell = json.loads(json.dumps(cell))
    meta = cell.setdefault("metadata", {})
    tags = list(meta.get("tags", []))
    mystnb = dict(meta.get("mystnb", {}))
    calls = (quotes_only("".join(cell["source"]))
             if cell["cell_type"] == "code" else None)
    if calls:
        tags = [t for t in tags if t not in SUPERSEDED | {FOLD_TAG}]
        tags.append(FOLD_TAG)
        mystnb.update(code_prompt_show=fold_line(calls),
                      code_prompt_hide=HIDE_PROMPT)
    elif mystnb.get("code_prompt_show", "").startswith(PROMPT):
        # no longer evidence; other folds (an exercise's solution) are
        # not this tool's
        tags = [t for t in tags if t != FOLD_TAG]
        mystnb.pop("code_prompt_show")
        mystnb.pop("code_prompt_hide", None)
    if tags:
        meta["tags"] = tags
    else:
        meta.pop("tags", None)
    if mystnb:
        meta["mystnb"] = mystnb
    else:
        meta.pop("mystnb", None)
    return cell


def notebooks(root=ROOT):
    return [Path(root) / f"{name}.ipynb" for name in toc_names(root)
            if (Path(root) / f"{name}.ipynb").is_file()]


def changes(path):
    """[(cell index, cell id, its fold line or None)] of the cells whose
    metadata differs from the written state."""
    nb = json.loads(Path(path).read_text())
    out = []
    for i, cell in enumerate(nb["cells"]):
        want = folded(cell)
        if want["metadata"] != cell.get("metadata", {}):
            line = want["metadata"].get("mystnb", {}).get("code_prompt_show")
            out.append((i, cell.get("id"), line))
    return out


def write(path):
    """Fold the notebook's evidence cells in place (metadata only: its
    sources and stored outputs are untouched), written as
    ddpdemo.book.execute writes notebooks (nbformat)."""
    import nbformat
    if not changes(path):
        return
    nb = nbformat.read(str(path), as_version=4)
    nb.cells = [nbformat.from_dict(folded(c)) for c in nb.cells]
    nbformat.write(nb, str(path))


# Issue 44, item 5: lines that only check (an assert) leave the visible
# code. They move, unchanged and in order, to a cell of their own right
# after, removed from the page (MyST-NB's remove-cell). nbval still runs
# it, so the checks stay as strict as before and in the same notebook.
# A citation prints the lines it quotes, so one in a mixed cell stays
# where its output is (a cell of citations alone is folded above).
CHECK_TAG = "remove-cell"
CHECK_SUFFIX = "-checks"
# An assert that calls one of these may print or run ranks: moving it
# would move output, so it stays.
_EFFECTS = {"run", "torchrun", "run_command", "collect", "check", "print",
            "show", "display", "cite", "show_source"}


def _names(node, kinds):
    return {n.id for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, kinds)}


def _pure_assert(stmt):
    """An assert (or a loop of them) that prints nothing."""
    if isinstance(stmt, ast.For) and not stmt.orelse:
        return all(_pure_assert(s) for s in stmt.body)
    if not isinstance(stmt, ast.Assert):
        return False
    calls = [n.func for n in ast.walk(stmt) if isinstance(n, ast.Call)]
    return not any((getattr(f, "attr", None) or getattr(f, "id", None))
                   in _EFFECTS for f in calls)


def _checks(body):
    """The statements that can move: pure asserts that no later statement
    of the cell rebinds a name of (they would check another value)."""
    moved = []
    for i, stmt in enumerate(body):
        if not _pure_assert(stmt):
            continue
        read = _names(stmt, ast.Load)
        later = set().union(*(_names(s, (ast.Store, ast.Del))
                              for s in body[i + 1:]
                              if not _pure_assert(s)))
        if not read & later:
            moved.append(stmt)
    return moved


def split_checks(source):
    """(the cell's source without its top-level checks, the checks'
    source); ("", source) when the cell is nothing but checks; None when
    there is nothing to move, the cell is a magic, or moving would change
    what the cell displays (its last expression would become another)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    if quotes_only(source):
        return None      # already evidence, folded whole
    body = tree.body
    moved = _checks(body)
    kept = [s for s in body if s not in moved]
    if not moved:
        return None
    if not kept:
        return "", source    # the whole cell checks: it leaves the page
    last = body[-1]
    if kept[-1] is not last and isinstance(kept[-1], ast.Expr) and not (
            isinstance(kept[-1].value, ast.Call)
            and getattr(kept[-1].value.func, "id", None) == "print"):
        return None      # it would start to display a value
    lines = source.splitlines()
    take = set()
    for stmt in moved:
        first = stmt.lineno - 1
        # the comment lines right above a check say why it holds
        while first > 0 and lines[first - 1].lstrip().startswith("#"):
            first -= 1
        take.update(range(first, stmt.end_lineno))
    keep_text = "\n".join(line for i, line in enumerate(lines)
                           if i not in take)
    check_text = "\n".join(lines[i] for i in sorted(take))
    keep_text = "\n".join(_squeeze(keep_text.strip("\n").splitlines()))
    return keep_text, check_text.strip("\n")


def _squeeze(lines):
    out = []
    for line in lines:
        if not line.strip() and out and not out[-1].strip():
            continue
        out.append(line)
    return out


def split_notebook(path):
    """Move every code cell's checks into a cell after it (sources and
    tags only; the stored outputs stay with the cell that made them).
    Returns how many cells were split."""
    import nbformat
    nb = nbformat.read(str(path), as_version=4)
    cells, n = [], 0
    for cell in nb.cells:
        hidden = CHECK_TAG in cell.metadata.get("tags", [])
        parts = (split_checks(cell.source)
                 if cell.cell_type == "code" and not hidden else None)
        cells.append(cell)
        if parts is None:
            continue
        n += 1
        if not parts[0]:          # nothing but checks: remove it whole
            tags = cell.metadata.setdefault("tags", [])
            if CHECK_TAG not in tags:
                tags.append(CHECK_TAG)
            else:
                n -= 1
            continue
        cell.source = parts[0]
        checks = nbformat.v4.new_code_cell(parts[1])
        checks.id = (cell.get("id") or f"cell{len(cells)}") + CHECK_SUFFIX
        checks.metadata["tags"] = [CHECK_TAG]
        cells.append(checks)
    nb.cells = [nbformat.from_dict(folded(c)) for c in cells]
    nbformat.write(nb, str(path))
    return n


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--split", action="store_true",
                        help="move checks out of the visible code")
    args = parser.parse_args(argv)
    if args.split:
        for path in notebooks():
            print(f"{path.name}: {split_notebook(path)} cells split")
    pending = False
    for path in notebooks():
        for i, cell_id, line in changes(path):
            pending = True
            print(f"{path.name}: cell {i} (id {cell_id}): "
                  + (f"fold behind {line!r}" if line else "unfold"))
        if args.write:
            write(path)
    return 1 if pending and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
