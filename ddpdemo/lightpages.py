"""What a page of the book loads on a first visit (issue 26).

A Sphinx extension both books load (_config.yml's extensions; the Chinese
_config.yml is derived from it). It keeps every page under 1.5 MB
(tests/test_site.py measures them in Chromium) with two of Sphinx's own
means, and no post-processing of the built site:

- The theme's icons without its icon script. pydata-sphinx-theme puts
  Font Awesome's SVG-by-JavaScript build (scripts/fontawesome.js, 1.49 MB)
  on every page, though its stylesheet already carries Font Awesome's
  CSS + woff2 build, which draws the same <i class="fa-..."> icons with
  two fonts the page loads anyway. templates/static/webpack-macros.html
  shadows the theme's asset macros (templates_path) and leaves that one
  script out.
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

The pages that teach with formulas are chapters 06 and 07.
"""
import re
from pathlib import Path
from xml.etree import ElementTree

from docutils import nodes
from latex2mathml.converter import convert
from sphinx.errors import ExtensionError

RENDERER = "mathml"
TEMPLATES = Path(__file__).parent / "templates"
REDIRECT = "redirect-index.html"      # the site's root page (index.html)
_MATH_TAG = re.compile(r"^<math[^>]*>|</math>$")


def mathml(latex, display="inline"):
    """One formula as a <math> element. Lines split by \\\\ and columns by
    & (as in an aligned block) become a table, right then left aligned."""
    latex = latex.strip()
    try:
        if "\\\\" not in latex and "&" not in latex.replace("\\&", ""):
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
        ElementTree.fromstring(out)         # well-formed, or no page
    except Exception as err:
        raise ExtensionError(f"{__name__}: cannot write {latex!r} as "
                             f"MathML: {err}") from err
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
        self.body.append('<span class="eqno">(%s)'
                         % get_node_equation_number(self, node))
        self.add_permalink_ref(node, _("Link to this equation"))
        self.body.append("</span>")
    # Equations a blank line apart are separate, as with MathJax.
    for part in node.astext().split("\n\n"):
        if part.strip():
            self.body.append(mathml(part, display="block"))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def _configure(app, config):
    if str(TEMPLATES) not in config.templates_path:
        config.templates_path.append(str(TEMPLATES))


def _root_page(app):
    # After config-inited: sphinx-external-toc sets the root document then.
    if app.config.root_doc != "index":
        app.config.html_additional_pages.setdefault("index", REDIRECT)


def setup(app):
    app.add_html_math_renderer(RENDERER, (visit_math, None),
                               (visit_displaymath, None))
    app.connect("config-inited", _configure)
    app.connect("builder-inited", _root_page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
