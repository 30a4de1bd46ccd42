"""The Chinese edition's translations (ddpdemo/book/i18n.py,
ddpdemo/book/zh_book.py).

Every page of _toc.yml has a translation file in i18n/zh/ and every unit
(a notebook's markdown cell, a page's section, the title and captions) is
translated from the English that is there now; a stale or missing one
fails here, naming the page and the cell. The Chinese notebooks' code
cells and outputs are the English ones. The built Chinese site (lang,
theme strings, switch links, search) is checked in tests/test_site.py.
"""
import json
import re
import subprocess
import sys

import pytest

from ddpdemo.book import i18n, zh_book

ROOT = i18n.ROOT
pytestmark = [pytest.mark.timeout(120), pytest.mark.fast]
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_every_page_has_a_translation_file():
    pages = i18n.pages()
    assert "book/glossary.md" in pages and i18n.TOC in pages
    missing = [f"{page}: no {i18n.translation_file(page).relative_to(ROOT)}"
               for page in pages if not i18n.translation_file(page).is_file()]
    assert missing == [], "\n".join(missing)


def test_every_unit_is_translated_from_the_current_english():
    found = [i18n.describe(*p) for p in i18n.problems()]
    assert found == [], ("run `python -m ddpdemo.book stale`:\n"
                         + "\n".join(found))


def test_translation_files_name_their_page_and_hold_chinese():
    for page in i18n.pages():
        path = i18n.translation_file(page)
        if not path.is_file():
            continue            # named by the test above
        named, entries = i18n.read(path)
        assert named == page, path
        for key, (_, _, zh) in entries.items():
            assert CJK.search(zh), f"{page}: {key} has no Chinese: {zh!r}"


FENCE = re.compile(r"^(```+|~~~+)([^\n]*)\n(.*?)^\1[ \t]*$", re.M | re.S)
MATH = re.compile(r"\$[^$\n]+\$")


def _code(text):
    """A unit's code blocks (MyST directives aside: their body is prose)
    and inline maths, which translations keep verbatim."""
    blocks = [(m.group(2).strip(), m.group(3)) for m in FENCE.finditer(text)
              if not m.group(2).strip().startswith("{")]
    return blocks, sorted(MATH.findall(text))


def test_translations_keep_code_blocks_and_maths_verbatim():
    changed, seen = [], 0
    for page in i18n.pages():
        path = i18n.translation_file(page)
        if not path.is_file():
            continue
        for key, (_, en, zh) in i18n.read(path)[1].items():
            seen += len(_code(en)[0])
            if _code(en) != _code(zh):
                changed.append(f"{page}: {key}")
    assert changed == [], "\n".join(changed)
    assert seen > 0


# A two-page book in a temporary folder: the stale and missing checks are
# shown on it whatever state the real translations are in.
NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "id": "intro", "metadata": {},
         "source": ["# 1. Barrier\n", "\n", "No rank leaves early."]},
        {"cell_type": "code", "id": "code1", "execution_count": 1,
         "metadata": {"tags": ["hide-output"], "mystnb": {"figure": {
             "caption": "Two ranks.", "name": "fig-two"}}},
         "outputs": [{"name": "stdout", "output_type": "stream",
                      "text": ["[rank 0] ok\n"]}],
         "source": ["print('[rank 0] ok')  # comment"]},
        {"cell_type": "markdown", "id": "after", "metadata": {},
         "source": ["Every rank waits."]},
    ],
    "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                "display_name": "Python 3"}},
    "nbformat": 4, "nbformat_minor": 5,
}
TRANSLATED = {"intro": "# 1. 屏障\n\n没有 rank 会提前离开。",
              "code1:caption": "两个 rank。",
              "after": "每个 rank 都在等待。"}


@pytest.fixture
def book(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "_config.yml").write_text("title: A book\n")
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: book/intro\nparts:\n"
        "  - caption: Ordering\n    chapters:\n"
        "      - file: book/01_barrier\n")
    (tmp_path / "book" / "intro.md").write_text(
        "# Intro\n\nHello.\n\n(sec-why)=\n## Why\n\nBecause.\n")
    (tmp_path / "book" / "01_barrier.ipynb").write_text(
        json.dumps(NOTEBOOK, indent=1))
    (tmp_path / "book" / "images").mkdir()
    (tmp_path / "book" / "images" / "a.svg").write_text("<svg/>")
    zh = {i18n.TOC: {"title": "一本书", "caption-0": "顺序"},
          "book/intro.md": {"top": "# 简介\n\n你好。",
                            "why": "(sec-why)=\n## 为什么\n\n因为。"},
          "book/01_barrier.ipynb": TRANSLATED}
    for page, texts in zh.items():
        en = i18n.units(page, tmp_path)
        assert list(en) == list(texts), (page, list(en))
        i18n.write(i18n.translation_file(page, tmp_path), page,
                   {k: (i18n.en_hash(en[k]), en[k], v)
                    for k, v in texts.items()})
    assert i18n.problems(tmp_path) == []
    return tmp_path


def _edit_cell(book, index, text):
    path = book / "book" / "01_barrier.ipynb"
    nb = json.loads(path.read_text())
    nb["cells"][index]["source"] = text
    path.write_text(json.dumps(nb, indent=1))


def test_a_changed_cell_is_named_with_its_index_and_id(book):
    _edit_cell(book, 2, "Every rank waits at the barrier.")
    found = [i18n.describe(*p, book) for p in i18n.problems(book)]
    assert found == ["book/01_barrier.ipynb: cell 2 (id after) changed "
                     "since it was translated"]
    with pytest.raises(LookupError, match=r"cell 2 .id after. changed"):
        zh_book.generate(book, book / "_build" / "zh-src")


def test_a_missing_translation_is_named(book):
    path = i18n.translation_file("book/intro.md", book)
    page, entries = i18n.read(path)
    del entries["why"]
    i18n.write(path, page, entries)
    (book / "i18n" / "zh" / "01_barrier.md").unlink()
    found = [i18n.describe(*p, book) for p in i18n.problems(book)]
    assert found == [
        "book/intro.md: section 'why' has no translation in i18n/zh/intro.md",
        "book/01_barrier.ipynb: cell 0 (id intro) has no translation in "
        "i18n/zh/01_barrier.md",
        "book/01_barrier.ipynb: figure caption of cell 1 (id code1) has no "
        "translation in i18n/zh/01_barrier.md",
        "book/01_barrier.ipynb: cell 2 (id after) has no translation in "
        "i18n/zh/01_barrier.md"]


def test_an_entry_for_a_deleted_cell_is_listed_but_harmless(book):
    path = book / "book" / "01_barrier.ipynb"
    nb = json.loads(path.read_text())
    del nb["cells"][2]
    path.write_text(json.dumps(nb, indent=1))
    assert i18n.problems(book) == []
    assert i18n.stale_report(book) == (
        "book/01_barrier.ipynb: unit after is no longer on the page; its "
        "entry can go (`accept` drops it)")


GLOSSARY_EN = """# Glossary

Words.

```{glossary}
:sorted:

rank
  The index.

world size
  The number.
```

After.
"""
GLOSSARY_ZH = """# 术语表

词语。

```{glossary}
:sorted:

rank
rank（进程序号）
  序号。

world size
world size（进程总数）
  数目。
```

之后。
"""


def test_each_glossary_entry_is_a_unit_of_its_own():
    units = i18n.md_units(GLOSSARY_EN)
    assert units == {"top": "# Glossary\n\nWords.",
                     "term-rank": "rank\n  The index.",
                     "term-world-size": "world size\n  The number.",
                     "top-after": "After."}
    # A glossary translated as one section splits the same way, by the
    # English first term line each entry keeps.
    zh = i18n.split_md_unit("top", GLOSSARY_ZH.strip("\n"))
    assert list(zh) == list(units)
    assert zh["term-rank"] == "rank\nrank（进程序号）\n  序号。"
    assert i18n.render_md(GLOSSARY_EN, zh) == GLOSSARY_ZH
    # Editing one definition stales that entry only.
    edited = i18n.md_units(GLOSSARY_EN.replace("The number.", "How many."))
    assert [k for k in units if units[k] != edited[k]] == ["term-world-size"]


def test_a_changed_caption_is_stale(book):
    toc = book / "_toc.yml"
    toc.write_text(toc.read_text().replace("Ordering", "Order"))
    assert i18n.problems(book) == [(i18n.TOC, "caption-0", "stale")]


def test_stale_command_shows_old_and_new_english(book):
    cmd = [sys.executable, "-m", "ddpdemo.book", "--root", str(book),
           "stale"]
    clean = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert clean.returncode == 0, clean.stderr
    _edit_cell(book, 0, "# 1. Barrier\n\nNo rank ever leaves early.")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert ("book/01_barrier.ipynb: cell 0 (id intro) changed since it was "
            "translated") in out
    assert "-No rank leaves early." in out
    assert "+No rank ever leaves early." in out


def test_accept_records_the_current_english(book):
    _edit_cell(book, 2, "Every rank waits at the barrier.")
    path = i18n.translation_file("book/01_barrier.ipynb", book)
    page, entries = i18n.read(path)
    entries["after"] = (*entries["after"][:2], "每个 rank 都在屏障处等待。")
    i18n.write(path, page, entries)
    assert i18n.problems(book) != []
    i18n.accept(page, ["after"], book)
    assert i18n.problems(book) == []
    assert i18n.read(path)[1]["after"][1:] == (
        "Every rank waits at the barrier.", "每个 rank 都在屏障处等待。")


def test_import_records_the_english_the_translator_was_given(book, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (book / "i18n" / "zh" / "01_barrier.md").unlink()
    given = i18n.units("book/01_barrier.ipynb", book)
    given["after"] = "An older sentence."       # changed since handed out
    (work / "01_barrier.en.json").write_text(json.dumps(given))
    (work / "01_barrier.zh.json").write_text(
        json.dumps(TRANSLATED, ensure_ascii=False))
    assert i18n.import_json(work, book) == {"book/01_barrier.ipynb": 3}
    assert i18n.problems(book) == [
        ("book/01_barrier.ipynb", "after", "stale")]
    # Rerunnable: the same input gives the same file.
    path = i18n.translation_file("book/01_barrier.ipynb", book)
    before = path.read_text()
    i18n.import_json(work, book)
    assert path.read_text() == before


def test_export_and_import_round_trip_the_units_to_translate(book,
                                                              tmp_path):
    _edit_cell(book, 2, "Every rank waits at the barrier.")
    work = tmp_path / "work"
    assert i18n.export_todo(work, book) == {"book/01_barrier.ipynb": 1}
    given = json.loads((work / "01_barrier.en.json").read_text())
    assert given == {"after": "Every rank waits at the barrier."}
    (work / "01_barrier.zh.json").write_text(json.dumps(
        {"after": "每个 rank 都在屏障处等待。"}, ensure_ascii=False))
    i18n.import_json(work, book)
    assert i18n.problems(book) == []
    assert i18n.translated("book/01_barrier.ipynb", book) == dict(
        TRANSLATED, after="每个 rank 都在屏障处等待。")


def test_generated_book_keeps_code_and_assets(book):
    out = zh_book.generate(book, book / "_build" / "zh-src")
    nb = json.loads((out / "book" / "01_barrier.ipynb").read_text())
    code = json.loads(json.dumps(NOTEBOOK["cells"][1]))
    code["metadata"]["mystnb"]["figure"]["caption"] = "两个 rank。"
    assert nb["cells"][1] == code
    assert nb["metadata"] == NOTEBOOK["metadata"]
    assert "".join(nb["cells"][0]["source"]) == TRANSLATED["intro"]
    assert (out / "book" / "intro.md").read_text() == (
        "# 简介\n\n你好。\n\n(sec-why)=\n## 为什么\n\n因为。\n")
    assert (out / "book" / "images" / "a.svg").read_text() == "<svg/>"
    assert "caption: 顺序" in (out / "_toc.yml").read_text()
    config = (out / "_config.yml").read_text()
    assert "title: 一本书" in config and "language: zh_CN" in config


def test_chinese_config_is_the_english_one_in_chinese():
    import yaml
    en = yaml.safe_load((ROOT / "_config.yml").read_text())
    zh = zh_book.config(ROOT, "标题")
    assert zh["sphinx"]["config"].pop("language") == "zh_CN"
    assert zh.pop("title") == "标题"
    en.pop("title")
    # the English extensions, then the Chinese site's own
    extensions = zh["sphinx"]["config"].pop("extensions")
    assert extensions == (en["sphinx"]["config"].pop("extensions")
                          + list(zh_book.EXTENSIONS))
    assert "ddpdemo.book.langswitch" in extensions
    assert "ddpdemo.book.zhsearch" in extensions
    assert zh == en


def test_chinese_extensions_add_to_jupyter_books_own(book):
    """Without an extensions list of its own the English book loads
    Jupyter Book's; the Chinese one adds to those, not replaces them."""
    zh = zh_book.config(book, "一本书")
    assert "extensions" not in zh["sphinx"]["config"]
    assert zh["sphinx"]["extra_extensions"] == list(zh_book.EXTENSIONS)


@pytest.fixture(scope="module")
def chinese(tmp_path_factory):
    """The real Chinese book's sources, generated (not built)."""
    out = tmp_path_factory.mktemp("zh-src")
    return zh_book.generate(ROOT, out)


def test_chinese_notebooks_have_the_english_code_and_outputs(chinese):
    notebooks = [p for p in i18n.pages() if p.endswith(".ipynb")]
    assert notebooks
    for page in notebooks:
        en = json.loads((ROOT / page).read_text())
        zh = json.loads((chinese / page).read_text())
        assert zh["metadata"] == en["metadata"], page
        assert len(zh["cells"]) == len(en["cells"]), page
        for i, (a, b) in enumerate(zip(en["cells"], zh["cells"], strict=True)):
            assert (a["id"], a["cell_type"]) == (b["id"], b["cell_type"])
            if a["cell_type"] == "code":
                where = f"{page}: cell {i} (id {a['id']})"
                caption = i18n.figure_caption(b)
                if caption is not None:     # translated, all else equal
                    assert CJK.search(caption), where
                    b = json.loads(json.dumps(b))
                    b["metadata"]["mystnb"]["figure"]["caption"] = (
                        i18n.figure_caption(a))
                if i18n.fold_line(b) is not None:   # the same, translated
                    assert CJK.search(i18n.fold_line(b)), where
                    b = json.loads(json.dumps(b))
                    for prompt in ("code_prompt_show", "code_prompt_hide"):
                        if prompt in a["metadata"]["mystnb"]:
                            assert CJK.search(
                                b["metadata"]["mystnb"][prompt]), where
                            b["metadata"]["mystnb"][prompt] = (
                                a["metadata"]["mystnb"][prompt])
                output = i18n.markdown_output(b)
                if output is not None:      # its text translated, in step
                    index, markdown = output
                    assert CJK.search(markdown), where
                    assert len(markdown.splitlines()) == len(
                        i18n.markdown_output(a)[1].splitlines()), where
                    b = json.loads(json.dumps(b))
                    b["outputs"][index]["data"]["text/markdown"] = (
                        a["outputs"][index]["data"]["text/markdown"])
                assert a == b, f"{where} differs"
            elif i18n.cell_prose("".join(a["source"])):
                assert CJK.search("".join(b["source"])), f"{page}: cell {i}"
            else:                   # labels alone: no prose, kept as is
                assert a["source"] == b["source"], f"{page}: cell {i}"


def _glossary_entries(text):
    """[[term line, ...], ...] of a page's {glossary} block."""
    block = re.search(r"```\{glossary\}\n(.*?)\n```", text, re.S).group(1)
    entries, in_terms = [], False
    for line in block.split("\n"):
        term = bool(line) and not line[0].isspace() and line[0] != ":"
        if term and in_terms:
            entries[-1].append(line.strip())   # another name, same entry
        elif term:
            entries.append([line.strip()])
        in_terms = term
    return entries


def _terms():
    """{english: chinese to show} from i18n/zh/terms.md; the Note's
    'glossary: X' where there is one."""
    table = {}
    for line in (ROOT / "i18n" / "zh" / "terms.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("English", "") or "---" in line:
            continue
        english, chinese, note = cells
        shown = re.search(r"glossary: ([^;]+)", note)
        shown = shown.group(1).strip() if shown else chinese
        names = re.split(r",|/", re.sub(r"\(.*?\)", "", english))
        shown = re.split(r"、|/", shown)
        if len(shown) != len(names):        # "average, mean | 平均值"
            shown = ["、".join(shown)] * len(names)
        for name, chinese in zip(names, shown, strict=True):
            table[name.strip().lower()] = chinese.strip()
    return table


def test_glossary_shows_both_languages_from_the_terms_table(chinese):
    en = _glossary_entries((ROOT / "book" / "glossary.md").read_text())
    zh = _glossary_entries((chinese / "book" / "glossary.md").read_text())
    assert [e[0] for e in zh] == [e[0] for e in en]
    both = [e for e in zh if any(CJK.search(t) for t in e[1:])]
    assert len(both) >= len(zh) // 2, zh
    terms, checked = _terms(), 0
    for entry in zh:
        shown = terms.get(entry[0].lower())
        if shown and shown.lower() != entry[0].lower():
            # "汇合（rendezvous）" may be shown as 汇合 beside the English.
            core = re.sub(r"（.*?）", "", shown)
            assert shown in entry[1:] or (
                CJK.search(core) and any(core in t for t in entry[1:])), (
                f"glossary: {entry[0]} should show {shown} (terms.md), "
                f"shows {entry}")
            checked += 1
    assert checked >= 5


def test_readme_builds_both_editions():
    readme = (ROOT / "README.md").read_text()
    first = re.search(r"```bash\n(.*?)\n```", readme, re.S).group(1)
    assert "jupyter-book build ." in first
    assert "ddpdemo.book build" in first
    assert "python -m ddpdemo.book stale" in readme


def test_labels_are_not_prose_and_come_back_in_the_chinese_cell():
    # A section label (issue 21) leaves the unit, so its translation stays
    # current; the Chinese cell gets it back above the same heading.
    en = "Some text.\n\n(my-label)=\n## A heading\n\nMore."
    assert i18n.cell_prose(en) == "Some text.\n\n## A heading\n\nMore."
    assert i18n.cell_prose("(only-label)=") == ""
    assert i18n.cell_prose("# Title\n\nNo label.") == "# Title\n\nNo label."
    zh = "一些文字。\n\n## 一个标题\n\n更多。"
    assert i18n.with_labels(en, zh) == (
        "一些文字。\n\n(my-label)=\n## 一个标题\n\n更多。")
    assert i18n.with_labels("(only-label)=", "") == "(only-label)="
    two = "(a)=\n# One\n\ntext\n\n(b)=\n## Two"
    assert i18n.with_labels(two, "# 一\n\n文\n\n## 二") == (
        "(a)=\n# 一\n\n文\n\n(b)=\n## 二")


def test_every_label_of_the_english_book_is_in_the_chinese_one(chinese):
    # The Chinese pitfalls and glossary link to sections by these labels.
    def labels(notebook):
        return [re.findall(r"(?m)^\(([^()\s]+)\)=$", "".join(c["source"]))
                for c in json.loads(notebook.read_text())["cells"]
                if c["cell_type"] == "markdown"]

    seen = 0
    for page in i18n.pages():
        if page.endswith(".ipynb"):
            en = labels(ROOT / page)
            assert labels(chinese / page) == en, page
            seen += sum(map(len, en))
    assert seen > 0


TABLE = ["| variable | what it does |\n", "|---|---|\n",
         "| `A` | waits |\n", "| `B` | times out |"]


def test_a_markdown_outputs_rows_are_units_kept_in_step(book):
    """A code cell's Markdown table (the debugging variables') is prose:
    each row a unit keyed by its first column, stale when that row's
    English changes, and the Chinese notebook shows the translated rows
    around the English table's rule."""
    path = book / "book" / "01_barrier.ipynb"
    nb = json.loads(path.read_text())
    nb["cells"][1]["outputs"] = [{
        "output_type": "execute_result", "execution_count": 1,
        "metadata": {}, "data": {"text/markdown": TABLE,
                                 "text/plain": ["<Markdown>"]}}]
    path.write_text(json.dumps(nb, indent=1))
    page = "book/01_barrier.ipynb"
    rows = {k: v for k, v in i18n.units(page, book).items() if ":row-" in k}
    assert rows == {"code1:row-variable": "| variable | what it does |",
                    "code1:row-a": "| `A` | waits |",
                    "code1:row-b": "| `B` | times out |"}
    assert [w for _, _, w in i18n.problems(book)] == ["missing"] * 3
    zh = {"code1:row-variable": "| 变量 | 作用 |",
          "code1:row-a": "| `A` | 等待 |", "code1:row-b": "| `B` | 超时 |"}
    _, entries = i18n.read(i18n.translation_file(page, book))
    entries.update({k: (i18n.en_hash(rows[k]), rows[k], v)
                    for k, v in zh.items()})
    i18n.write(i18n.translation_file(page, book), page, entries)
    assert i18n.problems(book) == []
    out = zh_book.generate(book, book / "_build" / "zh-src")
    cell = json.loads((out / "book" / "01_barrier.ipynb").read_text())[
        "cells"][1]
    assert "".join(cell["outputs"][0]["data"]["text/markdown"]) == (
        "| 变量 | 作用 |\n|---|---|\n| `A` | 等待 |\n| `B` | 超时 |")
    assert cell["outputs"][0]["data"]["text/plain"] == ["<Markdown>"]
    TABLE_B = "| `B` | times out, naming the rank |"
    nb["cells"][1]["outputs"][0]["data"]["text/markdown"][3] = TABLE_B
    path.write_text(json.dumps(nb, indent=1))
    found = [i18n.describe(*p, book) for p in i18n.problems(book)]
    assert found == ["book/01_barrier.ipynb: Markdown output's row 'b' of "
                     "cell 1 (id code1) changed since it was translated"]


def test_the_intros_chapter_list_names_each_chapter_by_its_title():
    """Issue 49: the intro's numbered chapter list reads each chapter's
    own title (a subtitle after a colon may be left out), in both
    editions, so a reader finds the chapter the list names."""
    _, units = i18n.read(i18n.translation_file("book/intro.md"))
    (_, en, zh), = [u for k, u in units.items() if "chapters" in k]
    for lang, text in (("en", en), ("zh", zh)):
        items = re.findall(r"^\d+\. \{doc\}`([^<`]+?)\s*<(\w+)>`", text,
                           re.M)
        assert len(items) >= 14, (lang, items)
        for name, stem in items:
            _, page = i18n.read(i18n.translation_file(f"book/{stem}.md"))
            first = next(iter(page.values()))
            title = re.search(r"^# (?:\d+\. )?(.+)$",
                              first[1] if lang == "en" else first[2],
                              re.M).group(1).strip()
            assert title == name or title.startswith(
                (f"{name}: ", f"{name}：")), (lang, stem, name, title)
