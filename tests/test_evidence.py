"""Evidence out of the reading path (ddpdemo.book.evidence, issue 32 item
4): every cell that only quotes torch's source is folded behind the line
of what it backs, nothing else is, and folding touches metadata only."""
import json

import pytest

from ddpdemo.book import evidence, i18n, zh_book


def cell(source, **metadata):
    return {"cell_type": "code", "id": "x", "metadata": metadata,
            "source": source, "outputs": [], "execution_count": 1}


@pytest.mark.fast
@pytest.mark.parametrize("source, folds", [
    ('C = "torch/x.py"\n_ = ddpdemo.cite(C, "a", claim="A holds")', True),
    ('import ddpdemo\ncited = cite("torch/x.py", "a")', True),
    ("_ = ddpdemo.show_source(dist.all_reduce, start='work')", True),
    ('assert "AVG" in ReduceOp.__doc__\ncite("t.py", "x", claim="c")', True),
    # ddpdemo's own code is the lesson, not evidence
    ("_ = ddpdemo.show_source(reduce_mean, start='out = ')", False),
    # a cell that computes or prints beside its citation teaches
    ('cite("t.py", "x", claim="c")\nprint(cluster.run(f))', False),
    ('out = cluster.run(f)\ncite("t.py", "x")', False),
    ("%%ranks\ncite('t.py', 'x')", False),
    ("x = 1", False),
])
def test_what_counts_as_evidence(source, folds):
    assert bool(evidence.quotes_only(source)) is folds


@pytest.mark.fast
def test_the_line_is_the_claims_and_a_fold_hides_the_whole_cell():
    folded = evidence.folded(cell(
        'cite("t.py", "a", claim="A holds")\n'
        'cite("t.py", "b", claim="B too")\n'
        "show_source(dist.barrier)", tags=["hide-output", "x"]))
    meta = folded["metadata"]
    assert meta["tags"] == ["x", "hide-cell"]
    assert meta["mystnb"]["code_prompt_show"] == (
        "Evidence from torch's source: A holds; B too; dist.barrier's code")
    # a cell that stops being evidence is unfolded
    edited = dict(folded, source="print(1)")
    assert evidence.folded(edited)["metadata"] == {"tags": ["x"]}
    # an exercise's folded solution is not evidence, and stays folded
    solution = cell("print(1)", tags=["hide-cell"],
                    mystnb={"code_prompt_show": "Solution"})
    assert evidence.folded(solution) == solution


def test_every_chapter_is_folded_as_written():
    """`python -m ddpdemo.book.evidence --write` has been run: no quoting
    cell left open in the reading path, no lesson folded."""
    pending = {p.name: evidence.changes(p) for p in evidence.notebooks()}
    assert {k: v for k, v in pending.items() if v} == {}
    folds = sum(1 for p in evidence.notebooks()
                for c in json.loads(p.read_text())["cells"]
                if "hide-cell" in c["metadata"].get("tags", []))
    assert folds >= 20


def test_writing_touches_metadata_only(tmp_path):
    source = i18n.ROOT / "book" / "inside_ddp.ipynb"
    copy = tmp_path / source.name
    nb = json.loads(source.read_text())
    for c in nb["cells"]:      # every fold opened again
        c["metadata"].pop("mystnb", None)
        c["metadata"]["tags"] = [t for t in c["metadata"].get("tags", [])
                                 if t != "hide-cell"]
    copy.write_text(json.dumps(nb))
    assert evidence.changes(copy)
    evidence.write(copy)
    assert evidence.changes(copy) == []

    def body(path):
        return [("".join(c["source"]), c.get("outputs"))
                for c in json.loads(path.read_text())["cells"]]
    assert body(copy) == body(source)


def test_the_chinese_edition_shows_the_line_in_chinese():
    page = "book/inside_ddp.ipynb"
    text = (i18n.ROOT / page).read_text()
    folds = [c["id"] + i18n.FOLD for c in json.loads(text)["cells"]
             if i18n.fold_line(c)]
    english = i18n.units(page)
    zh = i18n.translated(page)
    assert folds and all(k in english for k in folds)
    out = {c["id"]: c for c in json.loads(zh_book.notebook(text, zh))["cells"]}
    for key in folds:
        mystnb = out[key.removesuffix(i18n.FOLD)]["metadata"]["mystnb"]
        assert mystnb["code_prompt_show"] == zh[key] != english[key]
        assert mystnb["code_prompt_hide"] == zh_book.HIDE["Hide the evidence"]


@pytest.mark.fast
def test_checks_move_out_of_the_visible_code_with_their_comments():
    kept, checks = evidence.split_checks(
        "out = cluster.run(f)\n"
        "# both ranks: 1 + 3\n"
        "assert out == [4, 4]\n"
        "cite('t.py', 'x', claim='c')\n"
        "for o in out:\n"
        "    assert o > 0\n"
        "print(out)")
    # the citation prints what it quotes: it stays with its output
    assert kept == ("out = cluster.run(f)\ncite('t.py', 'x', claim='c')\n"
                    "print(out)")
    assert checks == ("# both ranks: 1 + 3\nassert out == [4, 4]\n"
                      "for o in out:\n    assert o > 0")


@pytest.mark.fast
@pytest.mark.parametrize("source", [
    "out = f()\nout\nassert out",         # `out` would become displayed
    "%%ranks\nx = 1\nassert x",            # runs on the ranks: stays
    'cite("t.py", "x", claim="c")\nassert 1',   # evidence: folded whole
    "for x in y:\n    print(x)\n    assert x",  # a loop that also prints
    "x = f()\nassert x\nx = g()",          # it would check another x
    "x = f()\nassert cluster.run(g) == [1]\nx",  # the run prints
])
def test_cells_whose_checks_stay(source):
    assert evidence.split_checks(source) is None


@pytest.mark.fast
def test_a_cell_of_checks_alone_leaves_the_page_whole():
    assert evidence.split_checks("assert x\nassert y") == (
        "", "assert x\nassert y")


def test_no_chapter_shows_a_check_that_could_move():
    """`python -m ddpdemo.book.evidence --split` has been run: no visible
    code cell keeps a top-level assert that could move (issue 44, item
    5), and every cell of checks is removed from the page or folded."""
    open_checks = [(p.name, c.get("id"))
                   for p in evidence.notebooks()
                   for c in json.loads(p.read_text())["cells"]
                   if c["cell_type"] == "code"
                   and "remove-cell" not in c["metadata"].get("tags", [])
                   and evidence.split_checks("".join(c["source"]))]
    assert open_checks == []
    moved = [c for p in evidence.notebooks()
             for c in json.loads(p.read_text())["cells"]
             if c.get("id", "").endswith(evidence.CHECK_SUFFIX)]
    assert len(moved) >= 100
    assert all({"remove-cell", "hide-cell"} & set(c["metadata"]["tags"])
               for c in moved)
