"""ddpdemo.book.zhsearch on its own (the browser test in test_site.py
types words into the built site): Chinese cut into pairs, and a run that
inline markup interrupts still indexed whole."""
from types import SimpleNamespace

from docutils import nodes
from sphinx.search import IndexBuilder

from ddpdemo.book import zhsearch

import pytest

pytestmark = pytest.mark.fast


def test_cut_makes_overlapping_pairs():
    assert zhsearch.cut("数据增强") == ["数据", "据增", "增强"]
    assert zhsearch.cut("桶") == ["桶"]


def test_block_terms_join_inline_markup():
    # 例如只有 rank 0 进入的{term}`屏障 <barrier>`：the link splits 的|屏障
    para = nodes.paragraph("", "", nodes.Text("例如只有 rank 0 进入的"),
                           nodes.reference("", "屏障"), nodes.Text("。"))
    code = nodes.literal_block("", "不索引的代码")
    doc = nodes.document(None, None)
    doc += [para, code]
    terms = zhsearch.block_terms(doc)
    assert "的屏" in terms and "屏障" in terms and "进入" in terms
    assert "代码" not in terms                     # code blocks stay out
    assert terms.count("的屏") == 1                # the paragraph once


def test_the_wrapped_collector_adds_the_pairs_sphinx_misses():
    # zhsearch wraps Sphinx's private IndexBuilder._word_collector; a
    # Sphinx without it, or one whose collector works differently, would
    # silently lose the pairs across inline markup.
    assert hasattr(IndexBuilder, "_word_collector")
    para = nodes.paragraph("", "", nodes.Text("只有进入的"),
                           nodes.reference("", "屏障"))
    doc = nodes.document(None, None)
    doc += para
    indexer = SimpleNamespace(lang=zhsearch.SearchChineseRuns({}))
    sphinxs = zhsearch._word_collector(indexer, doc).words
    ours = zhsearch._with_block_terms(indexer, doc).words
    assert "屏障" in sphinxs and "的屏" not in sphinxs   # cut at the link
    assert ours[:len(sphinxs)] == sphinxs and "的屏" in ours
