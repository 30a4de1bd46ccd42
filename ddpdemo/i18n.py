"""Translations of the book's prose, stored as reviewable text.

The unit of translation is a notebook's markdown cell (keyed by its cell
id) or a section of a Markdown page (keyed by its heading's slug, "top" for
what comes before the first heading). Code cells and outputs are never
translated: the Chinese notebooks are built from the English ones.

A translation file (i18n/zh/<page stem>.md) holds, for every unit, the
English it translates, its hash, and the translation:

    %%% page book/01_all_reduce.ipynb
    %%% unit 3f2a1b9c en=1a2b3c4d5e6f
    %%% en
    English text
    %%% zh
    中文

A unit whose English hash no longer matches the page is stale.
"""
import hashlib
import json
import re
from pathlib import Path

MARK = "%%% "


def en_hash(text):
    """Twelve hex digits of the English text's SHA-256."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _slug(heading):
    text = heading.lstrip("#").strip().lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "section"


def _md_units(text):
    # Split before each heading outside code fences; a MyST target line
    # "(label)=" just above a heading travels with it.
    lines = text.split("\n")
    starts, fence = [(0, "top")], None
    for i, line in enumerate(lines):
        m = re.match(r"^(`{3,}|~{3,})", line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif line.startswith(fence) and not line[len(fence):].strip():
                fence = None
            continue
        if fence is None and re.match(r"^#{1,6} ", line) and i > 0:
            j = i
            while j > 0 and re.match(r"^\(.+\)=\s*$", lines[j - 1]):
                j -= 1
            starts.append((j, _slug(line)))
    keys, units = set(), {}
    for (start, key), (end, _) in zip(starts, starts[1:] + [(len(lines), "")]):
        chunk = "\n".join(lines[start:end]).strip("\n")
        if not chunk:
            continue
        base, n = key, 2
        while key in keys:
            key, n = f"{base}-{n}", n + 1
        keys.add(key)
        units[key] = chunk
    return units


def units(page):
    """{key: English text} of one page, in page order."""
    page = Path(page)
    if page.suffix == ".ipynb":
        nb = json.loads(page.read_text())
        return {c["id"]: "".join(c["source"]) for c in nb["cells"]
                if c["cell_type"] == "markdown"}
    return _md_units(page.read_text())


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


if __name__ == "__main__":
    import sys
    # python -m ddpdemo.i18n dump PAGE: the page's units as JSON.
    if sys.argv[1:2] == ["dump"]:
        json.dump(units(sys.argv[2]), sys.stdout, ensure_ascii=False,
                  indent=1)
