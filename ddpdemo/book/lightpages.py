"""What a page of the book loads on a first visit (issue 26).

A Sphinx extension both books load (_config.yml's extensions; the Chinese
_config.yml is derived from it). It keeps every page under 1.5 MB
(tests/test_site.py measures them in Chromium) with Sphinx's own means
(a template, a static folder and a stylesheet, a math renderer), and no
post-processing of the built site:

- The theme's icons without its icon script. pydata-sphinx-theme puts
  Font Awesome's SVG-by-JavaScript build (scripts/fontawesome.js, 1.49 MB)
  on every page, though its stylesheet already carries Font Awesome's
  CSS + woff2 build, which draws the same <i class="fa-..."> icons with
  two fonts the page loads anyway. templates/static/webpack-macros.html
  shadows the theme's asset macros (templates_path) and leaves that one
  script out.
- Only the icons the theme draws. Those two fonts are Font Awesome's
  whole sets (0.27 MB); icon_fonts() cuts them, with fontTools, down to
  the icons the themes' templates and buttons name (a few KB), served
  under the same family names with a unicode-range, so that an icon
  outside it still comes from the full font.
- Formulas as MathML, written at build time. MathJax, even its smallest
  pieces (core, TeX input, CHTML output and fonts: about 0.77 MB; the
  tex-chtml.js bundle was 1.16 MB), cannot fit beside a ~1 MB page;
  browsers draw MathML themselves (Chromium since 109, Firefox, Safari),
  so the "mathml" math renderer converts each formula with latex2mathml
  and the page loads nothing for it. A formula latex2mathml cannot read
  fails the build, naming it.

And the site's root, index.html, is a redirect to the first page with
an empty icon of its own (sphinx-external-toc's has no <head>, so a
browser asks for /favicon.ico: a 404 on every visit through the root).

- Code without markup that draws nothing. Pygments wraps every name,
  punctuation mark and space of a code cell in its own <span>; where the
  site's light and dark styles both draw such a token exactly like the
  code around it (plain_token_classes), the span only weighs: about half
  of a long chapter's HTML. Each page's body is written without them
  (html-page-context), so it looks the same and weighs less.

The pages that teach with formulas are chapters 01 and 06.
"""
import re
from pathlib import Path
from urllib.parse import urlparse
from xml.etree import ElementTree

from docutils import nodes
from latex2mathml.converter import convert
from sphinx.errors import ExtensionError

RENDERER = "mathml"
TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"      # lightpages.css
REDIRECT = "redirect-index.html"      # the site's root page (index.html)
_MATH_TAG = re.compile(r"^<math[^>]*>|</math>$")


# MathML elements whose children are their arguments, and how many.
ARGUMENTS = {"mfrac": 2, "msub": 2, "msup": 2, "msubsup": 3, "mroot": 2,
             "munder": 2, "mover": 2, "munderover": 3}


def _check(out):
    """Raise ValueError where latex2mathml, which is lenient, wrote
    something a reader should not see: a command it did not know (kept
    as text, backslash and all), or a fraction or script short of an
    argument."""
    ns = "{http://www.w3.org/1998/Math/MathML}"
    for element in ElementTree.fromstring(out).iter():
        tag = element.tag.removeprefix(ns)
        if re.match(r"\\[A-Za-z]", element.text or ""):
            raise ValueError(f"unknown command {element.text}")
        if tag in ARGUMENTS and len(element) != ARGUMENTS[tag]:
            raise ValueError(f"<{tag}> with {len(element)} of its "
                             f"{ARGUMENTS[tag]} arguments")


def mathml(latex, display="inline"):
    """One formula as a <math> element. Lines split by \\\\ and columns by
    & (as in an aligned block) become a table, right then left aligned."""
    latex = latex.strip()
    try:
        if ("\\begin" in latex or ("\\\\" not in latex
                and "&" not in latex.replace("\\&", ""))):
            out = convert(latex, display=display)
        else:
            rows = "".join(
                "<mtr>" + "".join(
                    f"<mtd>{_MATH_TAG.sub('', convert(cell.strip()))}</mtd>"
                    for cell in re.split(r"(?<!\\)&", row)) + "</mtr>"
                for row in re.split(r"\\\\", latex) if row.strip())
            out = (f'<math xmlns="http://www.w3.org/1998/Math/MathML" '
                   f'display="{display}"><mtable columnalign="right left">'
                   f"{rows}</mtable></math>")
        _check(out)                 # well-formed and complete, or no page
    except Exception as err:
        raise ExtensionError(f"{__name__}: cannot write {latex!r} as "
                             f"MathML: {type(err).__name__}: {err}") from err
    return out


def visit_math(self, node):
    self.body.append(self.starttag(node, "span", "",
                                   CLASS="math notranslate nohighlight"))
    self.body.append(mathml(node.astext()) + "</span>")
    raise nodes.SkipNode


def visit_displaymath(self, node):
    self.body.append(self.starttag(node, "div",
                                   CLASS="math notranslate nohighlight"))
    if node["number"]:
        from sphinx.util.math import get_node_equation_number
        from sphinx.locale import _
        number = get_node_equation_number(self, node)
        self.body.append(f'<span class="eqno">({number})')
        self.add_permalink_ref(node, _("Link to this equation"))
        self.body.append("</span>")
    # Equations a blank line apart are separate, as with MathJax.
    for part in node.astext().split("\n\n"):
        if part.strip():
            self.body.append(mathml(part, display="block"))
    self.body.append("</div>\n")
    raise nodes.SkipNode


# -- icons ----------------------------------------------------------------
ICON_CSS = "lightpages-icons.css"
FONT_FACE = re.compile(r"@font-face\{([^}]*)\}")
GLYPH = re.compile(r'((?:\.fa-[a-z0-9-]+:before,?)+)'
                   r'\{content:"\\([0-9a-f]+)"\}')


def _themes():
    import pydata_sphinx_theme
    import sphinx_book_theme
    return [Path(m.__file__).parent
            for m in (pydata_sphinx_theme, sphinx_book_theme)]


def icon_names(config):
    """Font Awesome icons the pages can show: every fa-NAME the themes'
    templates, scripts and Python name, and the repository button's
    (sphinx-book-theme names it after the host: fa-github)."""
    names = set()
    for folder in _themes():
        for path in folder.rglob("*"):
            if (path.suffix in (".html", ".py", ".js")
                    and not path.name.startswith("fontawesome")):
                names |= set(re.findall(r"\bfa-([a-z0-9-]+)",
                                        path.read_text(errors="ignore")))
    host = urlparse(config.html_theme_options.get("repository_url") or "")
    if host.hostname:
        names.add(host.hostname.split(".")[-2])
    return names


def icon_fonts(names, out):
    """Write into out the theme's Font Awesome fonts cut down to the
    icons named, as WOFF, and ICON_CSS declaring them over the full ones
    (same family, weight and style; the later rule is asked first, and
    its unicode-range sends any other icon to the full font). Returns the
    files written."""
    from fontTools import subset
    from fontTools.ttLib import TTFont
    static = Path(_themes()[0]) / "theme" / "pydata_sphinx_theme" / "static"
    css = (static / "styles" / "pydata-sphinx-theme.css").read_text()
    codes = {name: int(code, 16) for names_, code in GLYPH.findall(css)
             for name in re.findall(r"\.fa-([a-z0-9-]+):before", names_)}
    wanted = {codes[n] for n in names if n in codes}
    out.mkdir(parents=True, exist_ok=True)
    rules, written = [], []
    for face in FONT_FACE.findall(css):
        ttf = re.search(r"url\(\.\./([^)]+\.ttf)\)", face)
        if not ttf or "font-family:Font Awesome" not in face:
            continue
        font = TTFont(static / ttf.group(1))
        mine = sorted(wanted & set(font.getBestCmap()))
        if not mine:
            continue                # a set no icon here uses: never loaded
        options = subset.Options()
        options.flavor, options.layout_features = "woff", []
        cut = subset.Subsetter(options)
        cut.populate(unicodes=mine)
        cut.subset(font)
        name = Path(ttf.group(1)).stem + ".subset.woff"
        font.flavor = "woff"
        font.save(out / name)
        written.append(out / name)
        keep = ";".join(d for d in face.split(";")
                        if not d.startswith("src:"))
        ranges = ",".join(f"U+{c:X}" for c in mine)
        rules.append(f"@font-face{{{keep};src:url({name}) format(\"woff\")"
                     f";unicode-range:{ranges}}}")
    (out / ICON_CSS).write_text(
        "/* ddpdemo.book.lightpages: the theme's icon fonts, cut down to the "
        "icons its pages name. */\n" + "\n".join(rules) + "\n")
    return [*written, out / ICON_CSS]


def _icons(app):
    if app.builder.format != "html":
        return
    out = Path(app.doctreedir) / "lightpages"
    icon_fonts(icon_names(app.config), out)
    app.config.html_static_path.append(str(out))


def _configure(app, config):
    if str(TEMPLATES) not in config.templates_path:
        config.templates_path.append(str(TEMPLATES))
    if str(STATIC) not in config.html_static_path:
        config.html_static_path.append(str(STATIC))


def _root_page(app):
    # After config-inited: sphinx-external-toc sets the root document then.
    if app.config.root_doc != "index":
        app.config.html_additional_pages.setdefault("index", REDIRECT)


def plain_token_classes(*stylesheets):
    """Pygments classes that every stylesheet given (Pygments' own CSS,
    one per colour mode) draws only in the colour of the code around
    them: `.highlight .n { color: C }` where `.highlight` has colour C."""
    classes = None
    for css in stylesheets:
        base = re.search(r"^\.highlight \{[^}]*\bcolor: (#\w+)", css, re.M)
        same = set() if base is None else {
            m.group(1) for m in re.finditer(
                r"^\.highlight \.(\w+) \{ color: (#\w+) \}", css, re.M)
            if m.group(2).lower() == base.group(1).lower()}
        classes = same if classes is None else classes & same
    return classes or set()


def strip_plain(html, classes):
    """html without the <span class="X"> wrappers of the given classes
    (their text stays; Pygments' token text is escaped, span-free)."""
    if not classes:
        return html
    pattern = "|".join(sorted(map(re.escape, classes)))
    return re.sub(rf'<span class="(?:{pattern})">([^<]*)</span>', r"\1", html)


def _plain_classes(app):
    # The styles pydata-sphinx-theme writes into pygments.css for its two
    # colour modes (its pygments_light_style and pygments_dark_style),
    # which are not Sphinx's own pygments_style.
    from pydata_sphinx_theme.utils import get_theme_options_dict
    from sphinx.highlighting import PygmentsBridge
    options = get_theme_options_dict(app)
    theme = app.builder.theme.get_options() \
        if getattr(app.builder, "theme", None) else {}
    names = [options.get(key) or theme.get(key) for key in
             ("pygments_light_style", "pygments_dark_style")]
    app.lightpages_plain = plain_token_classes(*(
        PygmentsBridge("html", name).get_stylesheet()
        for name in names)) if all(names) else set()


def _lighter_body(app, pagename, templatename, context, doctree):
    if "body" in context:
        context["body"] = strip_plain(context["body"],
                                      getattr(app, "lightpages_plain", ()))


def setup(app):
    app.add_html_math_renderer(RENDERER, (visit_math, None),
                               (visit_displaymath, None))
    app.connect("config-inited", _configure)
    app.connect("builder-inited", _root_page)
    app.connect("builder-inited", _icons)
    app.connect("builder-inited", _plain_classes)
    app.connect("html-page-context", _lighter_body)
    app.add_css_file(ICON_CSS)
    app.add_css_file("lightpages.css")        # display formulas centred
    return {"parallel_read_safe": True, "parallel_write_safe": True}
