"""The Chinese edition's word lint (issue 27): words that must not return,
terms glossed at their first use on a page, and typesetting that Chinese
prose does not use. The rules live in i18n/zh/terms.md, beside the terms
they protect, in two tables this module reads:

    ## Words that must not return      | not | but | unless the English says |
    ## Glossed at first use            | term | first use |

`not` is a regular expression (in backticks), matched against a unit's
Chinese with code, links' targets and math taken out; "unless the English
says" lets a unit whose English matches that regular expression keep
it (排序 where the English really sorts). Typesetting rules are fixed
here: no italics
(`*…*`: a synthetic slant on Chinese), no stacked parentheses `）（`, no
straight ASCII quotes in prose (“…”), a number's digits written together
(65504, like a port's 29500, never 65 504). So are the glosses'
(issue 36): a gloss, 损失（loss） or Flight Recorder（飞行记录器）, goes in
the prose, never in a heading, once per term on a page, and one at a
time: two in one phrase (no punctuation between them) read as a list of
brackets.

    python -m ddpdemo.book.zhlint            # every page; exit 1 on a finding
    python -m ddpdemo.book.zhlint seeds   # some pages (stems)

Each finding names the page, the unit and the text around the match.
"""
import re
import string
import sys
import unicodedata
from pathlib import Path

from .i18n import LANG, ROOT, read

TERMS = "terms.md"
# Pages the first-use glosses do not apply to: the glossary names every
# term in both languages anyway, and a caption is navigation, not prose.
GLOSS_EXEMPT = {"_toc.yml", "book/glossary.md"}
TYPESETTING = [
    (r"(?<![*A-Za-z0-9_])\*(?![*\s])[^*\n]+?(?<![*\s])\*(?![*A-Za-z0-9_])",
     "italics in Chinese prose: use bold (**…**) or nothing"),
    (r"）\s*（", "stacked parentheses （…）（…）: merge them into one"),
    (r"\*\*[^*\n]{1,12}：\*\*",
     "a label's colon goes after the bold: **原因**："),
    (r'"', 'straight ASCII quotes in Chinese prose: use “…”'),
    (r"(?<![\d.])\d{1,3}(?: \d{3})+(?![\d.])",
     "a number's digits go together, as a port's do: 65504, not 65 504"),
]
# Issue 49: Chinese and Latin text (words, digits, code) are set apart by
# a space, 在 docstring 里, never 在docstring里. Checked on the prose with
# each code span standing in as one Latin word, so `x` counts as Latin.
CJK = "\u4e00-\u9fff"
SPACING = re.compile(f"[{CJK}][A-Za-z0-9]|[A-Za-z0-9][{CJK}]")
# A sentence ends at 。！？, a line's end or a table cell's edge; two
# colons inside one read as a chain (issue 49: 原因：…：…).
SENTENCE = re.compile(r"[。！？!?\n|]")
# Quotation marks hug what they quote: “rank 0”, never “ rank 0 ”.
QUOTE_SPACE = re.compile("[“\u2018][ \t]|[ \t][”\u2019]")
# Bold that CommonMark does not close (issue 49): a `**` next to
# punctuation inside the bold and a letter outside it, 。**本章, or
# 说**“好”**了, is no delimiter, and the asterisks show as typed.
BOLD = re.compile(r"\*\*([^*\n]+?)\*\*")
# A gloss: a Chinese term with its English in parentheses, 损失（loss）,
# 汇合（rendezvous，…）; or an English name with its Chinese,
# Flight Recorder（飞行记录器）. Group 1 or 2 is the English it glosses.
GLOSS = re.compile(r"(?<=[\u4e00-\u9fff*])（([A-Za-z][A-Za-z0-9 .'-]*?)"
                   r"(?:，[^（）\n]*)?）"
                   r"|(?<![\w-])([A-Za-z][A-Za-z0-9 .-]*[A-Za-z0-9])"
                   r"（[\u4e00-\u9fff]+）")
PHRASE_END = re.compile(r"[，。；：、！？,;:\n]")
NEAR = 12       # characters between two glosses that make one phrase
# What is not prose: fenced code, code spans, roles' targets, math, URLs,
# {{ substitutions }} and the "% checked: ..." comment under quoted output.
_NOT_PROSE = re.compile(r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]+\$"
                        r"|\{\{.*?\}\}|^% [^\n]*$"
                        r"|\]\([^)]*\)|<[^>\n]+>|https?://\S+", re.S | re.M)


def _table(text, heading):
    """Rows (lists of cells) of the first table under `## heading`."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith("## "):
            inside = line[3:].strip() == heading
            continue
        if inside and line.startswith("|") and not line.startswith("|--"):
            # a cell's own "|" is written "\|", as Markdown tables want
            cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
            rows.append([c.strip().replace("\\|", "|") for c in cells])
    return rows[1:]                     # without the header row


def _pattern(cell):
    m = re.fullmatch(r"`(.+)`", cell)
    if not m:
        raise ValueError(f"{TERMS}: a pattern goes in backticks: {cell!r}")
    return m.group(1)


def rules(root=ROOT):
    """(forbidden, glossed): [(regex, message, unless)], [(term, first)]."""
    text = (Path(root) / "i18n" / LANG / TERMS).read_text()
    banned = _table(text, "Words that must not return")
    forbidden = [(_pattern(no), f"{_pattern(no)}: use {but}", unless)
                 for no, but, unless in banned]
    forbidden += [(rx, msg, "") for rx, msg in TYPESETTING]
    glossed = [(term, first) for term, first in
               _table(text, "Glossed at first use")]
    return forbidden, glossed


# A role's text is prose ({doc}`现场集群 <live_cluster>`), its target is
# not; a {term} link names its English term, as a gloss does.
TERM_LINK, TERM_END = "\ue000", "\ue001"
_ROLE = re.compile(r"\{([\w:-]+)\}`([^`<]*?)\s*(?:<([^>`]*)>)?`")


def _role_text(m):
    role, text, target = m.groups()
    if target is None:              # {ref}`label`, {term}`rendezvous`
        return text if role == "term" else " "
    # a term link glosses itself; marked apart so that it is no bracket
    return f"{text}{TERM_LINK}{target}{TERM_END}" if role == "term" else text


def prose(zh):
    """The unit's Chinese without code, math, link targets and URLs."""
    return _NOT_PROSE.sub(" ", _ROLE.sub(_role_text, zh))


_INLINE_CODE = re.compile(r"`[^`\n]+`")


def _with_code_as_words(zh):
    """The prose with each code span standing in as one Latin word, C."""
    return _NOT_PROSE.sub(" ", _INLINE_CODE.sub("C", _ROLE.sub(_role_text,
                                                               zh)))


def _spacing(zh):
    """Places where Chinese touches Latin text or code with no space, and
    spaces inside quotation marks."""
    text = _with_code_as_words(zh)
    return [_excerpt(text, m.start(), m.end())
            for rx in (SPACING, QUOTE_SPACE) for m in rx.finditer(text)]


def _punct(char):
    """CommonMark's punctuation: ASCII's (the backtick a code span ends
    with among it) and Unicode's P and S categories."""
    return char in string.punctuation or unicodedata.category(char)[0] in "PS"


def _bold(zh):
    """Bold spans CommonMark would leave as asterisks."""
    text = _NOT_PROSE.sub(" ", _INLINE_CODE.sub("`", zh))
    found = []
    for m in BOLD.finditer(text):
        inner, end = m.group(1), m.end()
        before = text[m.start() - 1] if m.start() else " "
        after = text[end] if end < len(text) else " "
        if (_punct(inner[-1]) and after.isalnum()) or (
                _punct(inner[0]) and before.isalnum()):
            found.append(_excerpt(text, m.start(), end))
    return found


def _colons(text):
    """Sentences of the prose with more than one full-width colon."""
    return [s.strip() for s in SENTENCE.split(text) if s.count("：") > 1]


def _body(text):
    """Text without its heading lines: a gloss belongs in the prose, not in
    a title the navigation repeats."""
    return "\n".join(line for line in text.splitlines()
                     if not line.lstrip().startswith("#"))


def _excerpt(text, start, end):
    return text[max(0, start - 12):end + 12].replace("\n", " ")


def _glosses(page, key, text, glossed_here):
    """Findings of the glosses in one unit's prose: in a heading, a term
    glossed twice on the page (glossed_here, updated), two in a phrase."""
    found, before = [], None
    for m in GLOSS.finditer(text):
        term = (m.group(1) or m.group(2)).strip().lower()
        where = f"…{_excerpt(text, m.start(), m.end())}…"
        line = text[text.rfind("\n", 0, m.start()) + 1:]
        if line.lstrip().startswith("#"):
            found.append(f"{page} {key}: a gloss in a heading: put it in "
                         f"the prose below: {where}")
        elif term in glossed_here:
            found.append(f"{page} {key}: {term} is glossed again on the "
                         f"page: gloss a term once: {where}")
        glossed_here.add(term)
        start = m.start() if m.group(2) else text.rfind("（", 0, m.end())
        if before is not None and before <= start and (
                start - before <= NEAR
                and not PHRASE_END.search(text, before, start)):
            found.append(f"{page} {key}: two glosses in one phrase: keep "
                         f"one, or say the other apart: {where}")
        before = m.end()
    return found


def _typesetting(where, zh, text):
    """Spacing, quote, bold and colon findings of one unit (zh, and its
    prose text)."""
    return ([f"{where}: a space missing between Chinese and Latin text, "
             f"or one inside quotation marks: …{w}…" for w in _spacing(zh)]
            + [f"{where}: bold that does not render (punctuation inside "
               f"the **, a letter outside): add a space or move the "
               f"punctuation out: …{w}…" for w in _bold(zh)]
            + [f"{where}: two colons in one sentence: split it: {s[:60]}"
               for s in _colons(text)])


# The glossary's entries begin with the English term on a line of its own,
# as in the English edition (tests/test_glossary compares them).
GLOSSARY = "book/glossary.md"
_TERM_TARGET = re.compile(f"{TERM_LINK}[^{TERM_END}]*{TERM_END}")


def _words(page, text):
    """The prose the banned words are looked for in: without a {term}
    link's target (an English key, {term}`桶 <bucket>`) and, in the
    glossary, without the English term an entry starts with."""
    text = _TERM_TARGET.sub(" ", text)
    return text.split("\n", 1)[-1] if page == GLOSSARY else text


def _banned(where, en, text, forbidden):
    found = []
    for rx, message, unless in forbidden:
        if unless and re.search(unless, en, re.I):
            continue
        found += [f"{where}: {message}: "
                  f"…{_excerpt(text, m.start(), m.end())}…"
                  for m in re.finditer(rx, text)]
    return found


def check_file(path, forbidden, glossed):
    """Findings ("page unit: message: …excerpt…") of one translation file."""
    page, entries = read(path)
    found, first_seen, glossed_here = [], set(), set()
    for key, (_, en, zh) in entries.items():
        text = prose(zh)
        if page not in GLOSS_EXEMPT:
            found += _glosses(page, key, text, glossed_here)
        found += _banned(f"{page} {key}", en, _words(page, text), forbidden)
        found += _typesetting(f"{page} {key}", zh, text)
        body = _body(text)
        for term, first in ([] if page in GLOSS_EXEMPT else glossed):
            at = body.find(term)
            if at < 0 or term in first_seen:
                continue
            first_seen.add(term)
            # the gloss may go on inside its parentheses: 汇合（rendezvous，…）
            if not (body.startswith(first.rstrip("）"), at)
                    or body.startswith(term + TERM_LINK, at)):
                found.append(f"{page} {key}: first use of {term} on the page "
                             f"should read {first}: "
                             f"…{_excerpt(body, at, at + len(term))}…")
    return found


# The interactive figures' Chinese (titles, legends, step names) lives in
# the script that translates them on the Chinese pages (issue 27); it is
# held to the same words and typesetting as the pages (issue 49).
FIGURES = Path("ddpdemo") / "book" / "static" / "zhfigures.js"
_JS_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def check_figures(forbidden, root=ROOT):
    """Findings in the Chinese strings of the figures' script."""
    path = Path(root) / FIGURES
    if not path.exists():
        return []
    found = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        for m in _JS_STRING.finditer(line):
            zh = m.group(1)
            if not re.search(f"[{CJK}]", zh):
                continue
            text = prose(zh)
            where = f"{FIGURES.name} line {n}"
            # the line holds the English key too: it plays the unit's en
            found += _banned(where, line, text, forbidden)
            found += _typesetting(where, zh, text)
    return found


def check(root=ROOT, stems=None):
    forbidden, glossed = rules(root)
    found = []
    for path in sorted((Path(root) / "i18n" / LANG).glob("*.md")):
        if path.name == TERMS or (stems and path.stem not in stems):
            continue
        found += check_file(path, forbidden, glossed)
    if not stems:
        found += check_figures(forbidden, root)
    return found


def main(argv=None):
    found = check(stems=set(argv if argv is not None else sys.argv[1:]))
    print("\n".join(found) if found else "the Chinese edition passes its lint")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
