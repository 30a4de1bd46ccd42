"""A link on every page to the same page in the other edition (issue 14).

A Sphinx extension both books load (_config.yml's extensions; the Chinese
_config.yml is derived from it). The English site is the root, the Chinese
one is served under zh/, so the link is relative: from book/barrier.html
it is zh/book/barrier.html and back ../book/barrier.html one level
deeper. It is a plain <a> in the article header (sphinx-book-theme's
article_header_end slot), reachable with Tab, with lang and hreflang set.
In the Chinese book it also fills the gaps of the themes' zh_CN catalogues.
"""
import gettext
from pathlib import Path

TEMPLATE = "lang-switch.html"
SUBDIR = "zh"           # where the Chinese site lives inside the English one
OTHER = {   # this build's language -> the other edition's link
    "en": {"hreflang": "zh-CN", "label": "中文", "title": "简体中文版"},
    "zh": {"hreflang": "en", "label": "English",
           "title": "English edition"},
}
SEARCH_TEXT = {"zh": "搜索本书……"}   # Jupyter Book sets an English one


# Theme strings the themes' own zh_CN catalogues lack; used only where
# those have no translation (strings hard-coded in a template stay).
THEME_ZH = {
    "sphinx": {
        "Color mode": "颜色模式", "System Settings": "跟随系统",
        "Link to this heading": "链接到此标题",
        "Link to this image": "链接到此图片",
        "Link to this definition": "链接到此定义",
        "Link to this term": "链接到此术语",
        "Link to this table": "链接到此表格",
        "Link to this code": "链接到此代码",
    },
    "booktheme": {
        "Launch interactive content": "启动交互式内容",
        "Launch on": "启动于", "Source repositories": "源代码仓库",
        "Repository": "代码仓库", "Open issue": "创建议题",
    },
}


class _Table(gettext.NullTranslations):
    def __init__(self, table):
        super().__init__()
        self.table = table

    def gettext(self, message):
        return self.table.get(message, message)

    def ngettext(self, singular, plural, n):
        return self.gettext(singular if n == 1 else plural)


def _theme_strings(app):
    if _lang(app.config) != "zh":
        return
    from sphinx import locale
    for catalog, table in THEME_ZH.items():
        translator = locale.translators.get(("general", catalog))
        if translator is not None:
            translator.add_fallback(_Table(table))


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
        options["article_header_end"] = [TEMPLATE, *slot]
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
    app.connect("builder-inited", _theme_strings)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
