"""Check a training script against the book's rules before it runs.

    python -m ddpdemo.check train.py utils/ [--json] [--site URL]
    ddpdemo-check train.py utils/

Reads the Python files given (a folder: every .py file in it) with
`ast`, never importing or running them, and prints each finding as
`file:line: rule: why`, then the fix and the book's section that shows
it live. Calls between the files given are followed at any depth, so
give the helpers too (YOLOv5: train.py with utils/). Exit status 0:
clean; 1: findings; 2: bad input (no such file, not Python, a syntax
error), in one line. A finding is silenced on its line with
`# ddpdemo-check: ignore` or `# ddpdemo-check: ignore[rule-id, ...]`.
The launching chapter and the triage page offer it (check before a
run; `python -m ddpdemo.explain` after a hang); chapter 5 runs it on
its own broken script and on the fix.
"""
import argparse
import ast
import json
import os
import re
import sys

from . import checkrules
from .checkflow import Program
from .checkread import Module

# The hosted book, as ddpdemo.triage.explain's SITE (a test checks they
# agree; importing explain here would load the runtime for nothing).
SITE = "https://ddpdemo.github.io/ddpdemo/"
_IGNORE = re.compile(r"#\s*ddpdemo-check:\s*ignore(?:\[([^\]]*)\])?")
_SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", "node_modules",
              ".tox", "build", "dist"}


class BadInput(Exception):
    """What the command cannot read: said in one line, exit status 2."""


def link(rule, site=SITE):
    """The book's section for a rule."""
    page, label = checkrules.SECTIONS[rule]
    return f"{site}book/{page}.html" + (f"#{label}" if label else "")


def python_files(paths):
    """The .py files given, folders walked in sorted order."""
    files = []
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS
                                 and not d.startswith("."))
                files += [os.path.join(root, n) for n in sorted(names)
                          if n.endswith(".py")]
        elif not os.path.exists(path):
            raise BadInput(f"{path}: no such file or folder")
        elif not path.endswith(".py"):
            raise BadInput(f"{path}: not a Python file (.py)")
        else:
            files.append(path)
    if not files:
        raise BadInput(f"{' '.join(paths)}: no Python files in it")
    return files


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not Python (not UTF-8 text)") from None
    except OSError as error:
        raise BadInput(f"{path}: {error.strerror}") from None
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as error:
        raise BadInput(f"{path}:{error.lineno}: syntax error: "
                       f"{error.msg}") from None
    return Module(path, tree, text.splitlines() or [""])


def check(paths, site=SITE):
    """The findings in the files given, as dicts (file, line, rule, why,
    fix, link), sorted by file and line, silenced ones left out."""
    modules = [read(p) for p in python_files(paths)]
    program = Program(modules)
    found = {}
    for rule in checkrules.RULES:
        for module, line, rule_id, why, fix in rule(program):
            if _silenced(module, line, rule_id):
                continue
            key = (module.path, line, rule_id)
            found.setdefault(key, {
                "file": module.path, "line": line, "rule": rule_id,
                "why": why, "fix": fix, "link": link(rule_id, site)})
    return [found[k] for k in sorted(found)]


def _silenced(module, line, rule_id):
    text = module.lines[line - 1] if line <= len(module.lines) else ""
    match = _IGNORE.search(text)
    if not match:
        return False
    named = match.group(1)
    return named is None or rule_id in {r.strip() for r in
                                        named.split(",")}


def report(findings):
    """The findings as the command prints them."""
    if not findings:
        return "no findings"
    out = []
    for f in findings:
        out += [f"{f['file']}:{f['line']}: {f['rule']}: {f['why']}",
                f"    fix: {f['fix']}", f"    see: {f['link']}"]
    n = len(findings)
    out.append(f"{n} finding{'s' if n > 1 else ''}")
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m ddpdemo.check",
        description="Check training scripts against the book's rules, "
                    "without running them.")
    parser.add_argument("paths", nargs="+", metavar="FILE_OR_DIR")
    parser.add_argument("--json", action="store_true",
                        help="the findings as a JSON list")
    parser.add_argument("--site", default=os.environ.get(
        "DDPDEMO_BOOK_URL", SITE), help="the book's base address (default: "
        "$DDPDEMO_BOOK_URL, else the hosted book)")
    args = parser.parse_args(argv)
    site = args.site if args.site.endswith("/") else args.site + "/"
    try:
        findings = check(args.paths, site)
    except BadInput as error:
        print(f"ddpdemo.check: {error}", file=sys.stderr)
        return 2
    print(json.dumps(findings, indent=1) if args.json else report(findings))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
