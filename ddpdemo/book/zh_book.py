"""The Chinese book, derived from the English one and i18n/zh/ (issue 14).

generate() writes a second Jupyter Book into _build/zh-src/: every page of
_toc.yml with its prose replaced by the stored translation (ddpdemo.book.i18n);
the notebooks' code cells and outputs taken unchanged from the English
notebooks (never stored twice, never executed twice; only a figure's
caption and a folded cell's line, in the cell's metadata, and a Markdown
output's text, the debugging variables' table, are translated); the
assets under book/ copied; a _config.yml and _toc.yml derived from the
English ones
(language zh_CN, the Chinese title and captions, the Chinese site's
extensions in EXTENSIONS; every other setting as in English, so the two
cannot drift). build() builds it like the English
book (-W -n --keep-going) and puts the site at _build/html/zh/, beside
the English one:

    .venv/bin/python -m ddpdemo.book build

Jupyter Book 1's gettext route (sphinx-intl) breaks on .ipynb pages
(MyST-NB issue 587), hence a second book built from generated notebooks.
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from . import i18n, zhfigures, zhsearch

LANGUAGE = "zh_CN"
# Sphinx extensions the Chinese book loads besides the English book's:
# its search, and its interactive figures in Chinese.
EXTENSIONS = (zhsearch.__name__, zhfigures.__name__)
ASSETS = ("_templates", "_static")     # root folders copied when present


def _write(path, data):
    # Only what changed is rewritten, so Sphinx rebuilds only those pages.
    if isinstance(data, str):
        data = data.encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_bytes() != data:
        path.write_bytes(data)


# What a folded cell's button says once open: the evidence cells'
# (ddpdemo.book.evidence) and the exercises' solutions.
HIDE = {"Hide the evidence": "收起证据", "Hide the solution": "收起答案",
        "Hide the job's code": "收起作业的代码"}

def notebook(en_text, zh):
    """The Chinese notebook: the English one with each markdown cell's
    source replaced by zh[cell id] (its MyST labels kept, above the same
    headings), each figure caption by zh[cell id + ':caption'] and each
    folded evidence line by zh[cell id + ':fold'] and each Markdown
    output (its text/markdown) by its units (a table's rows);
    everything else untouched (a cell of labels alone stays as it is)."""
    nb = json.loads(en_text)
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown" and cell["id"] in zh:
            source = i18n.with_labels("".join(cell["source"]), zh[cell["id"]])
            cell["source"] = source.splitlines(keepends=True)
        if i18n.figure_caption(cell) is not None:
            figure = cell["metadata"]["mystnb"]["figure"]
            figure["caption"] = zh[cell["id"] + i18n.CAPTION]
        if i18n.fold_line(cell) is not None:
            cell["metadata"]["mystnb"]["code_prompt_show"] = \
                zh[cell["id"] + i18n.FOLD]
            mystnb = cell["metadata"]["mystnb"]
            if "code_prompt_hide" in mystnb:
                mystnb["code_prompt_hide"] = HIDE[mystnb["code_prompt_hide"]]
        output = i18n.markdown_output(cell)
        if cell["cell_type"] == "code" and output is not None:
            index, markdown = output
            text = i18n.render_output(cell["id"], markdown, zh)
            cell["outputs"][index]["data"]["text/markdown"] = (
                text.splitlines(keepends=True))
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def config(root, title):
    """The English _config.yml with the Chinese language and title, and
    the Chinese site's own extensions (EXTENSIONS)."""
    cfg = yaml.safe_load((root / "_config.yml").read_text())
    cfg["title"] = title
    sphinx = cfg.setdefault("sphinx", {})
    sphinx.setdefault("config", {})["language"] = LANGUAGE
    # A config's extensions replace Jupyter Book's list, extra_extensions
    # add to it (and are ignored beside the former).
    key, where = (("extensions", sphinx["config"])
                  if "extensions" in sphinx["config"]
                  else ("extra_extensions", sphinx))
    where[key] = list(where.get(key, [])) + [
        e for e in EXTENSIONS if e not in where.get(key, [])]
    return cfg


def toc(root, zh):
    """The English _toc.yml with the parts' captions translated."""
    data = yaml.safe_load((root / i18n.TOC).read_text())
    for i, part in enumerate(data.get("parts", [])):
        if "caption" in part:
            part["caption"] = zh[f"caption-{i}"]
    return data


def generate(root=i18n.ROOT, out=None):
    """Write the Chinese book's sources into out (_build/zh-src); raise
    LookupError naming every page and unit without a current
    translation."""
    root = Path(root)
    out = Path(out or root / "_build" / "zh-src")
    missing = i18n.problems(root)
    if missing:
        raise LookupError("no Chinese book from stale or missing "
                          "translations (`python -m ddpdemo.book stale`):\n"
                          + "\n".join(i18n.describe(*p, root)
                                      for p in missing))
    written = _write_pages(root, out) | _copy_assets(root, out)
    _remove_others(out, written)
    return out


def _write_pages(root, out):
    """Each page in Chinese, and the book's _config.yml and _toc.yml with
    their translated title and captions. Returns the paths written."""
    written = set()
    for page in i18n.pages(root):
        zh = i18n.translated(page, root)
        if page == i18n.TOC:
            for name, data in [("_config.yml", config(root, zh["title"])),
                               (i18n.TOC, toc(root, zh))]:
                text = ("# Generated by ddpdemo.book.zh_book from the English "
                        f"{name}: do not edit.\n") + yaml.safe_dump(
                    data, allow_unicode=True, sort_keys=False)
                _write(out / name, text)
                written.add(out / name)
            continue
        text = (root / page).read_text()
        if page.endswith(".ipynb"):
            text = notebook(text, zh)
        else:
            text = i18n.render_md(text, zh)
        _write(out / page, text)
        written.add(out / page)
    return written


def _copy_assets(root, out):
    """The assets the pages use (images, the favicon) beside them, as in
    English. Returns the paths written."""
    written = set()
    folders = {(root / p).parent for p in i18n.pages(root)[1:]} - {root}
    folders |= {root / name for name in ASSETS if (root / name).is_dir()}
    for folder in folders:
        for path in folder.rglob("*"):
            rel = path.relative_to(root)
            if (path.is_file() and ".ipynb_checkpoints" not in rel.parts
                    and path.suffix not in (".ipynb", ".md")):
                _write(out / rel, path.read_bytes())
                written.add(out / rel)
    return written


def _remove_others(out, written):
    """Nothing left over from pages or assets that are gone."""
    for path in sorted(out.rglob("*"), reverse=True):
        rel = path.relative_to(out)
        if rel.parts[0] == "_build":
            continue
        if path.is_file() and path not in written:
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def jupyter_book():
    beside = Path(sys.executable).with_name("jupyter-book")
    return str(beside) if beside.exists() else shutil.which("jupyter-book")


def build(root=i18n.ROOT, html=None, src=None, **run):
    """Generate the Chinese book into src (default _build/zh-src), build
    it, and copy the site to html (default _build/html/zh). Returns
    the finished jupyter-book process (generate() raises LookupError
    before it if a translation is stale or missing); run goes to
    subprocess.run (the tests capture the log)."""
    root = Path(root)
    html = Path(html or root / "_build" / "html" / "zh")
    src = generate(root, src)
    proc = subprocess.run([jupyter_book(), "build", str(src), "-W", "-n",
                           "--keep-going"], **run)
    if proc.returncode == 0:
        if html.exists():
            shutil.rmtree(html)
        shutil.copytree(src / "_build" / "html", html)
        print(f"The Chinese edition is in {html}", file=sys.stderr)
    return proc
