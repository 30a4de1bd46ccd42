"""A link on every page to the same page in the other edition (issue 14).

A Sphinx extension both books load (_config.yml's extensions; the Chinese
_config.yml is derived from it). The English site is the root, the Chinese
one is served under zh/, so the link is relative: from book/03_barrier.html
it is zh/book/03_barrier.html and back ../book/03_barrier.html one level
deeper. It is a plain <a> in the article header (sphinx-book-theme's
article_header_end slot), reachable with Tab, with lang and hreflang set.
"""
from pathlib import Path

TEMPLATE = "lang-switch.html"
SUBDIR = "zh"           # where the Chinese site lives inside the English one
OTHER = {   # this build's language -> the other edition's link
    "en": {"hreflang": "zh-CN", "label": "中文", "title": "简体中文版"},
    "zh": {"hreflang": "en", "label": "English",
           "title": "English edition"},
}
SEARCH_TEXT = {"zh": "搜索本书……"}   # Jupyter Book sets an English one


def _lang(config):
    return "zh" if (config.language or "en").startswith("zh") else "en"


def _configure(app, config):
    here = Path(__file__).parent
    config.templates_path.append(str(here / "templates"))
    config.html_static_path.append(str(here / "static"))
    options = config.html_theme_options
    slot = options.get("article_header_end", ["article-header-buttons.html"])
    if isinstance(slot, str):
        slot = [s.strip() for s in slot.split(",") if s.strip()]
    if TEMPLATE not in slot:
        options["article_header_end"] = [TEMPLATE] + list(slot)
    lang = _lang(config)
    if lang in SEARCH_TEXT:
        options["search_bar_text"] = SEARCH_TEXT[lang]


def _context(app, pagename, templatename, context, doctree):
    up = "../" * pagename.count("/")
    lang = _lang(app.config)
    if lang == "en":
        href = f"{up}{SUBDIR}/{pagename}.html"
    else:
        href = f"{up}../{pagename}.html"
    context["lang_switch"] = dict(OTHER[lang], href=href)
    # The same in the page's head, for search engines and browsers.
    context["metatags"] = context.get("metatags", "") + (
        f'\n<link rel="alternate" hreflang="{OTHER[lang]["hreflang"]}" '
        f'href="{href}" />')


def setup(app):
    app.connect("config-inited", _configure)
    app.add_css_file("langswitch.css")
    app.connect("html-page-context", _context)
    try:    # Chinese search: jieba's progress lines are not the build's
        import jieba
        import logging
        jieba.setLogLevel(logging.WARNING)
    except ImportError:
        pass
    return {"parallel_read_safe": True, "parallel_write_safe": True}
