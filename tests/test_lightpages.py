"""ddpdemo.book.lightpages (issue 26): formulas written as MathML at build
time.

The built site's side (no icon script, no MathJax, every formula drawn,
every page within its weight) is tests/test_site.py's; these check the
conversion itself, without a build.
"""
import re
import typing
from xml.etree import ElementTree

import pytest
from sphinx.errors import ExtensionError

from ddpdemo.book.lightpages import mathml

pytestmark = [pytest.mark.timeout(60), pytest.mark.fast]
NS = "{http://www.w3.org/1998/Math/MathML}"


def tree(latex, display="inline"):
    return ElementTree.fromstring(mathml(latex, display))


def tags(element):
    return [e.tag.removeprefix(NS) for e in element.iter()]


def test_chapter_7s_ring_cost_becomes_mathml():
    math = tree(r"T_\text{ring}(n) = 2(N-1)\,\alpha"
                r" + \frac{2(N-1)}{N}\, n \beta .", display="block")
    assert math.get("display") == "block"
    fraction = math.find(f".//{NS}mfrac")
    numerator, denominator = list(fraction)
    assert "".join(numerator.itertext()) == "2(N\u22121)"
    assert "".join(denominator.itertext()) == "N"
    subscript = math.find(f".//{NS}msub")
    assert [e.text for e in subscript] == ["T", "ring"]
    assert "\u03b1" in "".join(math.itertext())       # \alpha
    assert "\u03b2" in "".join(math.itertext())       # \beta


def test_chapter_6s_power_keeps_its_exponent():
    math = tree(r"1 - (1 - 1/n)^{W-1} = 1/64")
    power = math.find(f".//{NS}msup")
    assert "".join(power[1].itertext()) == "W\u22121"
    assert math.get("display") == "inline"


def test_aligned_lines_become_a_table():
    math = tree(r"a &= b + c \\ d &= e", display="block")
    rows = math.findall(f".//{NS}mtr")
    assert [len(r) for r in rows] == [2, 2]
    assert ["".join(r.itertext()) for r in rows] == ["a=b+c", "d=e"]


@pytest.mark.parametrize("latex, why", [
    (r"\frac{1}", "mfrac"),                 # an argument short
    (r"\notacommand x", "notacommand"),     # kept as text by latex2mathml
    (r"a^{", "a\\^\\{"),                    # does not parse
])
def test_a_formula_it_cannot_write_fails_the_build(latex, why):
    with pytest.raises(ExtensionError, match=why):
        mathml(latex)


def test_escaped_ampersand_and_backslash_are_symbols():
    assert "&" in "".join(tree(r"a \& b").itertext())
    assert "mtable" not in tags(tree(r"a \& b"))
    assert "\\" in "".join(tree(r"a \backslash b").itertext())


# -- the icon fonts ---------------------------------------------------------
class _Config:
    html_theme_options: typing.ClassVar[dict] = {
        "repository_url": "https://github.com/o/r"}


HEADER = {"rocket", "github", "download", "expand", "sun", "moon",
          "circle-half-stroke", "magnifying-glass"}     # the header's icons


def test_icon_names_cover_the_header_buttons():
    from ddpdemo.book.lightpages import icon_names
    assert icon_names(_Config) >= HEADER


def test_icon_fonts_keep_the_named_icons_only(tmp_path):
    from fontTools.ttLib import TTFont
    from ddpdemo.book.lightpages import ICON_CSS, icon_fonts, icon_names
    written = icon_fonts(icon_names(_Config), tmp_path)
    css = (tmp_path / ICON_CSS).read_text()
    fonts = {p.name: TTFont(p) for p in written if p.suffix == ".woff"}
    solid, brands = fonts["fa-solid-900.subset.woff"], \
        fonts["fa-brands-400.subset.woff"]
    assert 0xF135 in solid.getBestCmap()               # rocket
    assert 0xF09B in brands.getBestCmap()              # github
    assert 0xF09B not in solid.getBestCmap()
    # A few KB in all, where the full sets are 0.27 MB as woff2.
    assert sum(p.stat().st_size for p in written) < 20_000
    for name, font in fonts.items():
        rule = next(r for r in css.splitlines() if name in r)
        assert "font-family:Font Awesome" in rule
        ranges = set(re.findall(r"U\+([0-9A-F]+)", rule))
        assert ranges == {f"{c:X}" for c in font.getBestCmap()}, name


def test_plain_token_spans_go_only_where_both_modes_draw_them_plain():
    # The site's two Pygments styles (pydata-sphinx-theme's light and dark
    # ones) draw names, punctuation and spaces in the code's own colour;
    # tango draws punctuation bold, so there it must stay.
    from sphinx.highlighting import PygmentsBridge

    from ddpdemo.book.lightpages import plain_token_classes, strip_plain

    def css(style):
        return PygmentsBridge("html", style).get_stylesheet()

    light, dark = (css(f"a11y-high-contrast-{m}") for m in ("light", "dark"))
    plain = plain_token_classes(light, dark)
    assert {"n", "p", "w"} <= plain
    assert not {"k", "o", "s2", "mi", "c1"} & plain   # coloured tokens
    assert "p" not in plain_token_classes(light, css("tango"))
    code = ('<span class="n">x</span><span class="w"> </span>'
            '<span class="o">=</span><span class="p">(</span>'
            '<span class="mi">1</span><span class="p">)</span>')
    assert strip_plain(code, plain) == (
        'x <span class="o">=</span>(<span class="mi">1</span>)')
    assert strip_plain(code, set()) == code
