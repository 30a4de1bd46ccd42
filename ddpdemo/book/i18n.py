"""Translations of the book's prose, stored as reviewable text (issue 14).

The unit of translation is a notebook's markdown cell (keyed by its cell
id; its MyST target lines "(label)=" are not part of it) or figure
caption (a code cell's mystnb.figure.caption metadata, keyed
"<cell id>:caption"), folded evidence line ("<cell id>:fold") or
Markdown output, a table's rows one by one ("<cell id>:row-<slug>");
a section of a Markdown page (keyed by its heading's slug, "top" for
what comes before the first heading), each
entry of a {glossary} block being a unit of its own ("term-<slug>");
or the book's title and a part's caption in _toc.yml ("title",
"caption-N"). ddpdemo/book/i18n_units.py cuts pages into units. Code cells
and their other outputs are never translated: the Chinese notebooks are
built from the English ones (ddpdemo/book/zh_book.py).

A translation file (i18n/zh/<page stem>.md) holds, for every unit, the
English it translates, its hash, and the translation:

    %%% page book/all_reduce.ipynb
    %%% unit 3f2a1b9c en=1a2b3c4d5e6f
    %%% en
    English text
    %%% zh
    中文

A unit whose English hash no longer matches the page is stale; check()
names it, `python -m ddpdemo.book stale` shows the old and new English.

    python -m ddpdemo.book import [DIR]   # DIR/<stem>.zh.json -> i18n/zh/
    python -m ddpdemo.book stale          # stale or missing units, exit 1
    python -m ddpdemo.book export DIR     # those as DIR/<stem>.en.json
    python -m ddpdemo.book accept PAGE [KEY...]  # Chinese brought up to
                                          # date: record the current English
    python -m ddpdemo.book build          # the Chinese site, _build/html/zh
"""
import difflib
import hashlib
import json
import re
from pathlib import Path

import yaml

# How pages are cut into units; part of this module's interface.
from .i18n_units import (CAPTION, FOLD, OUTPUT, ROW,  # noqa: F401
                         cell_prose, figure_caption, fold_line,
                         markdown_output, md_units, output_units,
                         render_md, render_output, split_md_unit,
                         with_labels)

ROOT = Path(__file__).resolve().parents[2]   # the repository
LANG = "zh"
MARK = "%%% "
TOC = "_toc.yml"        # the pseudo-page of the title and part captions


def en_hash(text):
    """Twelve hex digits of the English text's SHA-256."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _toc_units(root):
    config = yaml.safe_load((root / "_config.yml").read_text())
    toc = yaml.safe_load((root / TOC).read_text())
    units = {"title": config["title"]}
    for i, part in enumerate(toc.get("parts", [])):
        if "caption" in part:
            units[f"caption-{i}"] = part["caption"]
    return units


def units(page, root=ROOT):
    """{key: English text} of one page (a path relative to root), in page
    order."""
    if str(page) == TOC:
        return _toc_units(Path(root))
    path = Path(root) / page
    if path.suffix == ".ipynb":
        found = {}
        for cell in json.loads(path.read_text())["cells"]:
            prose = cell_prose("".join(cell["source"]))
            if cell["cell_type"] == "markdown" and prose:
                found[cell["id"]] = prose
            caption = figure_caption(cell)
            if caption is not None:
                found[f"{cell['id']}{CAPTION}"] = caption
            fold = fold_line(cell)
            if fold is not None:
                found[f"{cell['id']}{FOLD}"] = fold
            output = markdown_output(cell)
            if cell["cell_type"] == "code" and output is not None:
                found.update(output_units(cell["id"], output[1]))
        return found
    return md_units(path.read_text())


def toc_names(root=ROOT):
    """The book's document names (no suffix) in reading order: _toc.yml's
    root, then every entry of every part."""
    toc = yaml.safe_load((Path(root) / TOC).read_text())
    names = [toc["root"]]

    def walk(entries):
        for entry in entries:
            if "file" in entry:
                names.append(entry["file"])
            walk(entry.get("sections", []))

    for part in toc.get("parts", [toc]):
        walk(part.get("chapters", []))
    return names


def pages(root=ROOT):
    """Every page of the book, as paths relative to root, in _toc.yml's
    order; _toc.yml itself (title and captions) comes first."""
    found = [TOC]
    for name in toc_names(root):
        for suffix in (".ipynb", ".md"):
            if (Path(root) / f"{name}{suffix}").is_file():
                found.append(f"{name}{suffix}")
                break
        else:
            raise FileNotFoundError(f"{TOC} lists {name}, which is not there")
    return found


def translation_file(page, root=ROOT):
    stem = "_toc" if str(page) == TOC else Path(page).stem
    return Path(root) / "i18n" / LANG / f"{stem}.md"


def read(path):
    """Parse a translation file: (page, {key: (hash, en, zh)})."""
    page, entries, key, part = None, {}, None, None
    buf = {"en": [], "zh": []}

    def flush():
        if key is not None:
            entries[key] = (h, "\n".join(buf["en"]).strip("\n"),
                            "\n".join(buf["zh"]).strip("\n"))

    for line in Path(path).read_text().split("\n"):
        if line.startswith(MARK + "page "):
            page = line[len(MARK) + 5:].strip()
        elif line.startswith(MARK + "unit "):
            flush()
            m = re.match(r"unit (\S+) en=([0-9a-f]{12})$", line[len(MARK):])
            if not m:
                raise ValueError(f"{path}: bad unit line: {line!r}")
            key, h = m.groups()
            buf, part = {"en": [], "zh": []}, None
        elif line.strip() in (MARK + "en", MARK + "zh"):
            part = line.strip()[len(MARK):]
        elif part is not None:
            buf[part].append(line)
    flush()
    return page, entries


def write(path, page, entries):
    """Write {key: (hash, en, zh)} for page, in the order given."""
    out = [f"{MARK}page {page}", ""]
    for key, (h, en, zh) in entries.items():
        out += [f"{MARK}unit {key} en={h}", f"{MARK}en", en, f"{MARK}zh",
                zh, ""]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("\n".join(out))


def _where(page, key, root):
    """'cell 7 (id 3f2a1b9c)' for a notebook, 'section "key"' for a page."""
    if str(page).endswith(".ipynb"):
        nb = json.loads((Path(root) / page).read_text())
        cell_id = key.removesuffix(CAPTION).removesuffix(FOLD)
        cell_id = cell_id.removesuffix(OUTPUT).partition(ROW)[0]
        ids = [c.get("id") for c in nb["cells"]]
        index = ids.index(cell_id) if cell_id in ids else "?"
        what = ("figure caption of " if key.endswith(CAPTION) else
                "folded evidence line of " if key.endswith(FOLD) else
                f"Markdown output's row {key.partition(ROW)[2]!r} of "
                if ROW in key else
                "Markdown output of " if key.endswith(OUTPUT) else "")
        return f"{what}cell {index} (id {cell_id})"
    return f"section {key!r}"


def problems(root=ROOT):
    """(page, key, what) for every unit that is not translated from the
    current English: 'missing' (no file or no entry), 'untranslated'
    (empty Chinese) or 'stale' (the English changed since)."""
    found = []
    for page in pages(root):
        path = translation_file(page, root)
        entries = read(path)[1] if path.is_file() else {}
        for key, en in units(page, root).items():
            if key not in entries:
                found.append((page, key, "missing"))
            elif not entries[key][2].strip():
                found.append((page, key, "untranslated"))
            elif entries[key][0] != en_hash(en):
                found.append((page, key, "stale"))
    return found


def describe(page, key, what, root=ROOT):
    """One line naming the page and the unit, for test failures."""
    where = _where(page, key, root)
    if what == "stale":
        return f"{page}: {where} changed since it was translated"
    if what == "untranslated":
        return f"{page}: {where} has an empty translation"
    path = translation_file(page, root).relative_to(root)
    return f"{page}: {where} has no translation in {path}"


def stale_report(root=ROOT):
    """Every stale or missing unit, with the old and new English side by
    side (a unified diff), as text."""
    out = []
    for page, key, what in problems(root):
        out.append(describe(page, key, what, root))
        new = units(page, root)[key]
        if what == "stale":
            old = read(translation_file(page, root))[1][key][1]
            if old == new.strip("\n"):
                out.append("    (the English recorded is the same text; "
                           "its hash line was edited)")
            out += [f"    {line}" for line in difflib.unified_diff(
                old.splitlines(), new.splitlines(), "translated English",
                "current English", lineterm="")]
        else:
            out += [f"    + {line}" for line in new.splitlines()]
        out.append("")
    for page in pages(root):        # help only: these fail no test
        path = translation_file(page, root)
        gone = set(read(path)[1]) - set(units(page, root)) if (
            path.is_file()) else ()
        for key in sorted(gone):
            out.append(f"{page}: unit {key} is no longer on the page; "
                       "its entry can go (`accept` drops it)")
    return "\n".join(out)


def import_json(source, root=ROOT):
    """Turn source/<stem>.zh.json ({key: Chinese}) into translation files.

    Each entry records the English the translator was given
    (source/<stem>.en.json) or, without it, the page's current English,
    so English that changed after it was handed out shows up as stale.
    Entries already in a translation file that the JSON lacks are kept.
    Rerunnable: returns {page: number of units written}.
    """
    done = {}
    for page in pages(root):
        stem = "_toc" if page == TOC else Path(page).stem
        zh_json = Path(source) / f"{stem}.zh.json"
        if not zh_json.is_file():
            continue
        zh = json.loads(zh_json.read_text())
        en_json = Path(source) / f"{stem}.en.json"
        given = json.loads(en_json.read_text()) if en_json.is_file() else {}
        if page.endswith(".md"):    # a glossary handed out as one unit
            zh, given = ({k: v for key, text in d.items()
                          for k, v in split_md_unit(key, text).items()}
                         for d in (zh, given))
        path = translation_file(page, root)
        old = read(path)[1] if path.is_file() else {}
        entries = {}
        for key, en in units(page, root).items():
            if key in zh and zh[key].strip():
                en = given.get(key, en)
                entries[key] = (en_hash(en), en, zh[key].strip("\n"))
            elif key in old:
                entries[key] = old[key]
        write(path, page, entries)
        done[page] = len(entries)
    return done


def export_todo(target, root=ROOT):
    """Write target/<stem>.en.json ({key: current English}) holding only
    the stale, missing or empty units of each page: what a translator
    needs; import_json(target) then merges the <stem>.zh.json files back.
    Returns {page: number of units}."""
    todo = {}
    for page, key, _ in problems(root):
        todo.setdefault(page, {})[key] = units(page, root)[key]
    Path(target).mkdir(parents=True, exist_ok=True)
    for page, found in todo.items():
        stem = "_toc" if page == TOC else Path(page).stem
        (Path(target) / f"{stem}.en.json").write_text(
            json.dumps(found, ensure_ascii=False, indent=1) + "\n")
    return {page: len(found) for page, found in todo.items()}


def accept(page, keys, root=ROOT):
    """Record the page's current English for these units, once their
    Chinese has been brought up to date; a unit with no entry yet gets one
    with an empty translation to fill in. Entries of units the page no
    longer has are dropped. The diff of the file shows the old and new
    English and the Chinese side by side for review."""
    current = units(page, root)
    path = translation_file(page, root)
    entries = read(path)[1] if path.is_file() else {}
    for key in keys:
        if key not in current:
            raise KeyError(f"{page} has no unit {key!r}")
        zh = entries[key][2] if key in entries else ""
        entries[key] = (en_hash(current[key]), current[key], zh)
    write(path, page, {k: entries[k] for k in current if k in entries})


def translated(page, root=ROOT):
    """{key: Chinese} of a page, raising if any unit lacks a current
    translation (the Chinese book is never built from stale text)."""
    bad = [p for p in problems(root) if p[0] == page]
    if bad:
        raise LookupError("\n".join(describe(*p, root) for p in bad))
    entries = read(translation_file(page, root))[1]
    return {key: entries[key][2] for key in units(page, root)}
