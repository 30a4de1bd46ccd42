"""The interactive figures in Chinese on the Chinese site (issue 27).

ddpdemo.interactive's figures are notebook outputs: the same in both
editions (the Chinese book takes the English notebooks' outputs), in
English, and compared by strict nbval. static/zhfigures.js translates
what they show on a page whose <html lang> is Chinese: titles, legends,
Play/Pause, step names, the live description and the aria labels, as
the reader moves through them. This extension adds that script to the
Chinese pages that carry a figure, and no other.

A Sphinx extension the Chinese book loads (ddpdemo.book.zh_book adds it
to the derived _config.yml).
"""
from pathlib import Path

SCRIPT = "zhfigures.js"
STATIC = Path(__file__).with_name("static")
FIGURE = 'class="ddp-fig"'      # the root of every ddpdemo.interactive figure


def _static(app, config):
    if str(STATIC) not in config.html_static_path:
        config.html_static_path.append(str(STATIC))


def _page(app, pagename, templatename, context, doctree):
    # Sphinx takes a script added here for this page alone.
    if FIGURE in context.get("body", ""):
        app.add_js_file(SCRIPT, loading_method="defer")


def setup(app):
    app.connect("config-inited", _static)
    app.connect("html-page-context", _page)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
