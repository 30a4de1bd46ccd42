"""Search in the Chinese site: what a reader types finds the pages that
contain it (issue 27).

Sphinx's Chinese search cut the index with jieba (cut_for_search) and
the query only at spaces and punctuation (searchtools.js's splitQuery):
a compound that jieba had cut into parts (数据增强 -> 数据, 增强) stayed
one query term that no index term matched, and found nothing. A word
list cannot fix that: a reader's compound is any run of characters, and
jieba cuts one run differently in different sentences (死锁 missed two
of the nine pages that hold it).

So both sides cut Chinese by one rule, kept here: a run of Han
characters becomes its overlapping pairs (数据增强 -> 数据, 据增, 增强),
or its one character; the index in Python (split) and the query in the
browser (QUERY_JS, written from the same character class). The index
holds every character too, so a one-character word (桶) is found. A
page that contains a run holds all its pairs, so it is always found; a
page that holds the pairs apart is found too (rare: 19 of the 1,762
words jieba finds in the edition, all like 第一次). Latin words are cut
as sphinx.search.zh cuts them ([a-zA-Z0-9_]+, stemmed as English).

Two more fixes keep that true and the page light: searchtools.js lets a
term of one or two letters go missing when a longer one is found (fair
for Latin words, but every Chinese term is that short, so "Mosaic
数据增强" found every page with "mosaic"): QUERY_JS requires the Chinese
ones. And the index is written in UTF-8 without spaces (Sphinx escapes
each Chinese character to six bytes): 290 KB would be 190 KB.

One more for the index: Sphinx hands the splitter one text node at a
time, so a run that a link or a code span interrupts on the page, such as
的{term}`屏障`, lost its pair across the boundary (的屏: "的屏障" missed the
glossary). The index also gets the pairs of each block's whole text
(block_terms), through the one Sphinx private this module touches,
IndexBuilder._word_collector (tests/test_zhsearch.py fails if it goes).

A Sphinx extension the Chinese book loads (ddpdemo.book.zh_book adds it
to the derived _config.yml): it registers this language for "zh".
"""
import json
import re
import string

from docutils import nodes
from sphinx.search import IndexBuilder, js_index
from sphinx.search.zh import SearchChinese

# CJK Unified Ideographs, Extension A and the Compatibility Ideographs:
# one character class for Python's re and JavaScript's RegExp alike.
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
LATIN = "a-zA-Z0-9_"                 # sphinx.search.zh's latin1_letters
RUNS = re.compile(f"([{HAN}]+)|([{LATIN}]+)")
ONE_HAN = re.compile(f"[{HAN}]")

# string.Template: the JavaScript's braces and % are its own.
QUERY_JS = string.Template("""
// ddpdemo.book.zhsearch: the query cut as the index was. search.html
// loads this after searchtools.js: it replaces the default splitter.
var splitQuery = (query) => {
  const terms = [];
  for (const run of query.match(/[${han}]+|[${latin}]+/g) || []) {
    if (!/^[${han}]/.test(run)) terms.push(run);
    else if (run.length === 1) terms.push(run);
    else for (let i = 0; i + 1 < run.length; i++)
      terms.push(run.slice(i, i + 2));
  }
  return terms;
};
// searchtools.js drops a page's missing terms of one or two letters when
// a longer term is found; every Chinese term is that short: require it.
if (typeof Search !== "undefined" && Search.performTermsSearch) {
  const performTermsSearch = Search.performTermsSearch;
  Search.performTermsSearch = (searchTerms, excludedTerms) => {
    const index = Search._index;
    const han = [...searchTerms].filter((t) => /^[${han}]/.test(t));
    const holds = (files, file) =>
      files !== undefined && [].concat(files).includes(file);
    return performTermsSearch(searchTerms, excludedTerms).filter((r) => {
      const file = index.docnames.indexOf(r[0]);
      return han.every((t) => holds(index.terms[t], file) ||
                              holds(index.titleterms[t], file));
    });
  };
}
""").substitute(han=HAN.encode("unicode_escape").decode(),
                    latin=LATIN)


def cut(run):
    """The terms of one run of Han characters as the query looks them up:
    its overlapping pairs, or the character alone."""
    if len(run) == 1:
        return [run]
    return [run[i:i + 2] for i in range(len(run) - 1)]


class SearchChineseRuns(SearchChinese):
    """sphinx.search.zh's language with Chinese cut into pairs on both
    sides, where Sphinx cut the index alone, into jieba's words."""

    js_splitter_code = QUERY_JS

    def init(self, options):
        super().init({})            # jieba's dictionary: jieba is not used
        self.latin_terms = set()    # stem() asks it; Sphinx's is a list

    def split(self, input):
        terms = []
        for han, latin in RUNS.findall(input):
            if latin:
                self.latin_terms.add(latin)
                terms.append(latin)
            else:
                terms += list(han) + (cut(han) if len(han) > 1 else [])
        return terms

    def word_filter(self, word):
        # one Han character is a term, one Latin letter is not (as before)
        return len(word) > 1 or bool(ONE_HAN.fullmatch(word))


def block_terms(doctree):
    """The pairs of the Han runs of each outermost text block (paragraph,
    title, term, caption) as the page shows it, inline markup joined:
    the pairs that straddle a link's or a code span's edge included."""
    terms = []
    for block in doctree.findall(nodes.TextElement):
        if (isinstance(block, (nodes.literal_block, nodes.raw,
                               nodes.comment))
                or isinstance(block.parent, nodes.TextElement)):
            continue
        for han, _ in RUNS.findall(block.astext()):
            if len(han) > 1:
                terms += cut(han)
    return terms


_word_collector = IndexBuilder._word_collector


def _with_block_terms(self, doctree):
    store = _word_collector(self, doctree)
    if isinstance(self.lang, SearchChineseRuns):
        store.words.extend(block_terms(doctree))
    return store


class Utf8Index(type(js_index)):
    """searchindex.js as Sphinx writes it, in UTF-8 and without spaces."""

    def dumps(self, data):
        return self.PREFIX + json.dumps(
            data, sort_keys=True, ensure_ascii=False,
            separators=(",", ":")) + self.SUFFIX


def _index_format(app):
    if getattr(app.builder, "indexer_format", None) is js_index:
        app.builder.indexer_format = Utf8Index()


def setup(app):
    app.add_search_language(SearchChineseRuns)
    IndexBuilder._word_collector = _with_block_terms
    app.connect("builder-inited", _index_format)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
