"""How a page is cut into units of translation, and put back together.

A Markdown page is cut before each heading (outside code fences; a MyST
target "(label)=" above a heading goes with it), and each entry of a
{glossary} block is a unit of its own, keyed by its first term line, which
translations keep in English. What lies between units (blank lines, the
glossary's fence and options) is not translated: render_md() puts the
translated units back into the English page's text. A notebook's figure
caption (a code cell's mystnb.figure.caption metadata) is a unit keyed
"<cell id>:caption", and a folded evidence cell's line (its
mystnb.code_prompt_show) one keyed "<cell id>:fold". A code cell's
Markdown output (text/markdown, what IPython's Markdown() displays) is
translated too, being the page's prose: each row of a table a unit keyed
"<cell id>:row-<slug of its first column>" (issue 36: the debugging
variables' table), any other Markdown output one unit "<cell id>:output".
Used by ddpdemo.book.i18n (issue 14).

In a notebook's markdown cell, MyST target lines "(label)=" are not
prose: cell_prose() leaves them out of the unit (a cell of labels alone
has no unit), so adding a label to a section leaves its translation
current, and with_labels() puts them back into the Chinese cell, each
above the same heading as in the English one.
"""
import re

CAPTION = ":caption"    # a code cell's figure caption: "<cell id>:caption"
FOLD = ":fold"          # a folded evidence cell's line: "<cell id>:fold"
ROW = ":row-"           # a row of a Markdown output's table
OUTPUT = ":output"      # a Markdown output that is not a table
TARGET = re.compile(r"^\(([^()\s]+)\)=\s*$")   # a MyST target line, "(label)="


def _slug(heading):
    text = heading.lstrip("#").strip().lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "section"


def _trim(text, start, end):
    """(start, end) without the blank lines at either edge."""
    while start < end and text[start] == "\n":
        start += 1
    while end > start and text[end - 1] == "\n":
        end -= 1
    return start, end


def _sections(text):
    """[(key, start, end)]: split before each heading outside code fences;
    a MyST target line "(label)=" just above a heading travels with it."""
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
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
    return [(key, offsets[a], min(offsets[b], len(text)))
            for (a, key), (b, _) in zip(
                starts, [*starts[1:], (len(lines), "")], strict=True)]


GLOSSARY = re.compile(r"^(`{3,})\{glossary\}[^\n]*\n(?::[^\n]*\n)*"
                      r"(.*?)^\1[ \t]*$", re.M | re.S)


def _glossary_entries(key, text, start, end):
    """[(key, start, end)] of a section: each {glossary} entry (its term
    lines and definition) a unit keyed "term-<first term>", the text
    around the block units of their own; the fence and options stay as
    they are."""
    spans, pos = [], start
    for m in GLOSSARY.finditer(text, start, end):
        spans.append((key, pos, m.start()))
        body, body_end = m.start(2), m.end(2)
        entry = re.compile(r"^(?=[^\s:])", re.M)   # a line starting a term
        heads = []
        for e in entry.finditer(text, body, body_end):
            at = e.start()
            if at == body or text[at - 2:at] == "\n\n":
                heads.append(at)
        for a, b in zip(heads, [*heads[1:], body_end], strict=True):
            term = text[a:text.index("\n", a)]
            spans.append((f"term-{_slug(term)}", a, b))
        pos, key = m.end(), f"{key}-after"
    spans.append((key, pos, end))
    return spans


def _md_spans(text):
    """[(key, start, end)] of a Markdown page's units, in page order."""
    keys, spans = set(), []
    for section, start, end in _sections(text):
        for key, a, b in _glossary_entries(section, text, start, end):
            a, b = _trim(text, a, b)
            if a == b:
                continue
            base, n = key, 2
            while key in keys:
                key, n = f"{base}-{n}", n + 1
            keys.add(key)
            spans.append((key, a, b))
    return spans


def md_units(text):
    """{key: text} of a Markdown page's units, in page order."""
    return {key: text[a:b] for key, a, b in _md_spans(text)}


def render_md(text, zh):
    """The page text with each unit replaced by zh[key]; what lies between
    units (blank lines, a glossary's fence and options) unchanged."""
    out, pos = [], 0
    for key, a, b in _md_spans(text):
        out += [text[pos:a], zh[key]]
        pos = b
    return "".join([*out, text[pos:]])


def split_md_unit(key, text):
    """{key: text} of one section, split as _md_spans splits a page
    (glossary entries keyed by their first term line, which translations
    keep in English)."""
    found = {}
    for k, a, b in _glossary_entries(key, text, 0, len(text)):
        a, b = _trim(text, a, b)
        if a < b:
            found[k] = text[a:b]
    return found


def fold_line(cell):
    """The line a folded evidence cell shows (MyST-NB's
    mystnb.code_prompt_show, written by ddpdemo.book.evidence), or
    None."""
    return cell.get("metadata", {}).get("mystnb", {}).get(
        "code_prompt_show")


def markdown_output(cell):
    """(index of the output, its Markdown text) of a code cell whose
    output is Markdown (an execute_result or display_data with
    text/markdown), or None."""
    for i, output in enumerate(cell.get("outputs", [])):
        text = output.get("data", {}).get("text/markdown")
        if text is not None:
            return i, text if isinstance(text, str) else "".join(text)
    return None


_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")    # |---|:--| a table's rule


def output_units(cell_id, markdown):
    """{key: text} of a Markdown output: each row of a table (its rule
    line "|---|" aside) keyed by the slug of its first column; text that
    is not a table is one unit."""
    lines = [line for line in markdown.split("\n") if line.strip()]
    if not lines or not all(line.startswith("|") for line in lines):
        return {f"{cell_id}{OUTPUT}": markdown.strip("\n")}
    found = {}
    for line in lines:
        if _RULE.match(line):
            continue
        base = key = f"{cell_id}{ROW}{_slug(line.strip('|').split('|')[0])}"
        n = 2
        while key in found:
            key, n = f"{base}-{n}", n + 1
        found[key] = line
    return found


def render_output(cell_id, markdown, zh):
    """The Markdown output with each unit replaced by zh[key]: a table's
    rows in place (its rule and line ends kept), or the whole text."""
    keys = output_units(cell_id, markdown)
    if f"{cell_id}{OUTPUT}" in keys:
        return zh[f"{cell_id}{OUTPUT}"]
    rows = iter(keys)
    return "\n".join(zh[next(rows)] if line.strip() and not _RULE.match(line)
                     else line for line in markdown.split("\n"))


def figure_caption(cell):
    """A code cell's figure caption (MyST-NB's mystnb.figure.caption
    metadata), or None."""
    figure = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
    return figure.get("caption")


def cell_prose(source):
    """A markdown cell's text without its MyST target lines (and the blank
    line after each): the unit of translation; "" for a cell of labels."""
    lines = source.split("\n")
    kept, skip_blank = [], False
    for line in lines:
        if TARGET.match(line):
            skip_blank = True
            continue
        if skip_blank and not line.strip():
            skip_blank = False
            continue
        skip_blank = False
        kept.append(line)
    return "\n".join(kept).strip("\n") if len(kept) < len(lines) else source


def with_labels(en_source, zh_text):
    """zh_text with the English cell's target lines put back: a label
    above the English cell's k-th heading goes above the k-th heading of
    zh_text (the first line when there is none)."""
    heading = re.compile(r"^#{1,6} ")
    pending, above = [], {}
    k = 0
    for line in en_source.split("\n"):
        if TARGET.match(line):
            pending.append(line)
        elif heading.match(line):
            above.setdefault(k, []).extend(pending)
            pending, k = [], k + 1
        elif line.strip():
            above.setdefault(k, []).extend(pending)
            pending = []
    if pending:
        above.setdefault(k, []).extend(pending)
    if not above:
        return zh_text
    out, k = [], 0
    for line in zh_text.split("\n") if zh_text else []:
        if heading.match(line):
            out.extend(above.pop(k, []))
            k += 1
        out.append(line)
    rest = [label for labels in above.values() for label in labels]
    return "\n".join(rest + out) if zh_text else "\n".join(rest)
