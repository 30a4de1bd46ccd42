"""The hosted book (issue 6): it builds clean and works in a real browser.

The book is built the way the README and the Pages workflow build it,
`jupyter-book build . -W -n --keep-going`, into a temporary directory, then
served on 127.0.0.1 and driven in Debian's Chromium through Playwright's
Python package (the system's browser: nothing is downloaded). Every page
must load with no console error, no failed request and no request to
another host; every image and figure must show; search must find
"barrier"; next/previous links must walk the table of contents in order.

The build is checked everywhere. The browser checks are skipped, with the
reason, where Chromium (`apt-get install chromium`) or Playwright is
missing. Pages come from `_toc.yml`, so new chapters are checked as soon
as they are listed there.
"""
import contextlib
import functools
import http.server
import itertools
import pathlib
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse

import needs
import pytest
import yaml

from ddpdemo.book.i18n import toc_names

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Building takes seconds (notebooks are not executed), but CI is a busy
# 2-core machine; every browser step has its own Playwright timeout too.
pytestmark = pytest.mark.timeout(600)
STEP_MS = 20_000
CHROMIUM_NAMES = ("chromium", "chromium-browser")
CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
# No sandbox: CI runs as root. The rest keeps Chromium from phoning home,
# so the only requests made are the pages' own, and resolves no host but
# the local one (a page that asks another host fails, and Visit says so).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking",
                 "--disable-component-update", "--no-first-run",
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
WARNING = re.compile(r"WARNING:|\[Warning\]")
FAVICON = "/" + pathlib.PurePosixPath(
    yaml.safe_load((ROOT / "_config.yml").read_text())["html"]["favicon"]).name


def toc_order():
    """Document names in reading order: the root, then every entry."""
    return [str(pathlib.PurePosixPath(n).with_suffix(""))
            for n in toc_names(ROOT)]


def find_chromium():
    for name in CHROMIUM_NAMES:
        if shutil.which(name):
            return shutil.which(name)
    for path in CHROMIUM_PATHS:
        if pathlib.Path(path).is_file():
            return path
    return None


def jupyter_book():
    """The jupyter-book of this interpreter's environment."""
    beside = pathlib.Path(sys.executable).with_name("jupyter-book")
    return str(beside) if beside.exists() else shutil.which("jupyter-book")


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [jupyter_book(), "build", str(ROOT), "--path-output", str(out),
         "-W", "-n", "--keep-going"],
        capture_output=True, text=True, timeout=540)
    return proc, out / "_build" / "html"


def test_build_is_clean(build):
    proc, html = build
    log = proc.stdout + proc.stderr
    warnings = [line for line in log.splitlines() if WARNING.search(line)]
    assert warnings == []
    assert proc.returncode == 0, proc.stderr[-4000:] or proc.stdout[-4000:]
    for name in toc_order():
        assert (html / f"{name}.html").is_file(), f"{name} was not built"


def test_colab_install_line_uses_the_configured_repository(build):
    """intro.md's Colab line installs from _config.yml's repository.url
    (through a MyST substitution): the address is set in one place."""
    _, html = build
    config = (ROOT / "_config.yml").read_text()
    url = yaml.safe_load(config)["repository"]["url"]
    assert config.count(url) == 1
    assert url not in (ROOT / "book" / "intro.md").read_text()
    page = (html / "book" / "intro.html").read_text()
    assert f"pip install git+{url}</code>" in page.replace(
        '<span class="pre">', "").replace("</span>", "")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def site(build):
    """Base URL of the built site, served from a thread on a free port."""
    proc, html = build
    if proc.returncode != 0:
        pytest.fail("the book did not build; see test_build_is_clean")
    handler = functools.partial(_QuietHandler, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", html
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser():
    executable = find_chromium()
    if executable is None:
        needs.missing("Chromium is not installed (looked for "
                    f"{', '.join(CHROMIUM_NAMES + CHROMIUM_PATHS)}); "
                    "`apt-get install chromium` to run the browser checks")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        needs.missing("the playwright package is not importable; "
                    "`pip install -r requirements.txt` to run the browser "
                    "checks")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable,
                                     headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Visit:
    """One browser page on the local site that records what goes wrong:
    console errors, script errors, failed or 4xx/5xx local requests, and
    any request for another host (blocked, so CI never needs a network).
    Playwright's routing, which blocks it, turns the browser's cache off;
    cached=True keeps the cache, and such a request is still recorded
    (and fails: CHROMIUM_ARGS resolve no other host).
    """

    def __init__(self, browser, base, cached=False):
        self.base = base
        self.problems = []
        self.context = browser.new_context()
        if cached:
            self.context.on("request", self._outside)
        else:
            self.context.route(lambda url: not url.startswith(base),
                               self._block)
        self.page = self.context.new_page()
        self.page.set_default_timeout(STEP_MS)
        self.page.on("console", self._console)
        self.page.on("pageerror",
                     lambda err: self.problems.append(f"script error: {err}"))
        self.page.on("requestfailed", self._failed)
        self.page.on("response", self._response)

    def _outside(self, request):
        if not request.url.startswith(self.base):
            self.problems.append(f"request to another host: {request.url}")

    def _block(self, route):
        self.problems.append(f"request to another host: {route.request.url}")
        route.abort()

    def _console(self, msg):
        if msg.type == "error":
            self.problems.append(f"console error: {msg.text}")

    def _failed(self, request):
        # Chromium asks for a page's icon after the page has loaded, and
        # drops the request when the page is left (ERR_ABORTED): not a
        # missing file (that would be an HTTP 404, below).
        if (request.url.startswith(self.base)
                and not (request.url.endswith(FAVICON)
                         and "ERR_ABORTED" in (request.failure or ""))):
            self.problems.append(
                f"failed request: {request.url} ({request.failure})")

    def _response(self, response):
        if response.status >= 400:
            self.problems.append(f"HTTP {response.status}: {response.url}")

    def open(self, path):
        self.page.goto(self.base + path, wait_until="load")
        # Scripts that load more (MathJax fonts, the search index) finish.
        self.page.wait_for_load_state("networkidle")
        return self.page

    def path(self):
        return urllib.parse.urlparse(self.page.url).path.lstrip("/")

    def close(self):
        self.context.close()


@pytest.fixture
def visit(browser, site):
    """A Visit with the browser's cache on, as a reader's browser has it:
    a page's shared assets are not fetched again for every page a test
    walks through (a first visit with nothing cached is the page-weight
    pass's: `weighed`)."""
    base, _ = site
    v = Visit(browser, base, cached=True)
    yield v
    v.close()


def built_pages(html):
    """Every HTML page of the built site, the theme's own files aside."""
    skip = ("_static", "_sources", "_images")
    return sorted(str(p.relative_to(html)) for p in html.rglob("*.html")
                  if not set(p.relative_to(html).parts) & set(skip))


def test_every_page_loads_cleanly(weighed, site):
    """Every page opened with nothing cached, scrolled to its end, its
    formulas drawn: no console error, missing asset or outside request
    on the way (read from the one pass that weighs every page)."""
    _, html = site
    pages = [p for p in built_pages(html) if not p.startswith("zh/")]
    assert {f"{n}.html" for n in toc_order()} <= set(pages)
    _, problems, _ = weighed
    found = [p for path in pages for p in problems[path]]
    assert found == [], "\n".join(found)


def _reveal(page, element):
    """Open what hides an element by design: a collapsed cell, a menu."""
    page.evaluate("document.querySelectorAll('details')"
                  ".forEach(d => d.open = true)")
    if element.is_visible():
        return
    menu = ("xpath=ancestor::*[contains(concat(' ', @class, ' '), "
            "' dropdown ')][1]//button[contains(@class, 'dropdown-toggle')]")
    toggle = element.locator(menu)
    if toggle.count():
        toggle.first.click()
        element.wait_for(state="visible", timeout=5_000)


def images_shown(page, path):
    """(how many img and figure elements page holds, what is wrong with
    them): each must be visible (opened if a collapsed cell or a menu
    hides it), have a size, and an image must be loaded and drawable."""
    from playwright.sync_api import TimeoutError
    seen, wrong = 0, []
    for element in page.locator("img, figure").all():
        what = f"{path}: {element.evaluate('e => e.outerHTML')[:120]}"
        with contextlib.suppress(TimeoutError):   # hidden: said just below
            _reveal(page, element)
        if not element.is_visible():
            wrong.append(f"hidden: {what}")
            continue
        element.scroll_into_view_if_needed()
        box = element.bounding_box()
        if not (box and box["width"] > 0 and box["height"] > 0):
            wrong.append(f"no size: {what}")
        if element.evaluate("e => e.tagName") == "IMG" and not \
                element.evaluate("i => i.decode().then(() => "
                                 "i.naturalWidth > 0, () => false)"):
            # decode() settles once the file is loaded and drawable.
            wrong.append(f"broken: {what}")
        seen += 1
        page.keyboard.press("Escape")      # close a menu opened above
    return seen, wrong


def test_every_image_and_figure_is_visible(weighed, visit, site):
    """Every img and figure of every page of both editions shows
    (images_shown, run on each page in the pass that weighs them all,
    after its weight is taken)."""
    _, html = site
    _, _, images = weighed
    assert set(images) == set(built_pages(html))
    wrong = [w for _, ws in images.values() for w in ws]
    assert wrong == [], "\n".join(wrong)
    assert sum(n for n, _ in images.values()) > 0
    # The introduction's picture of the cluster is among them.
    page = visit.open(f"{toc_order()[0]}.html")
    assert page.locator("#fig-cluster-path img").is_visible()
    assert visit.problems == [], "\n".join(visit.problems)


def test_search_finds_barrier(visit):
    page = visit.open(f"{toc_order()[0]}.html")
    page.keyboard.press("Control+k")     # the theme's search shortcut
    field = page.locator("input[name='q']:visible").first
    field.fill("barrier")
    with page.expect_navigation():
        field.press("Enter")
    assert visit.path() == "search.html"
    results = page.locator("#search-results ul.search li a")
    results.first.wait_for()
    hrefs = [a.get_attribute("href") for a in results.all()]
    assert any("barrier" in h for h in hrefs), hrefs
    assert any("glossary" in h for h in hrefs), hrefs
    assert visit.problems == [], "\n".join(visit.problems)


def test_next_and_previous_walk_the_table_of_contents(visit):
    order = [f"{name}.html" for name in toc_order()]
    visit.open(order[0])
    walked = [visit.path()]
    while visit.page.locator("a.right-next").count():
        with visit.page.expect_navigation():
            visit.page.locator("a.right-next").first.click()
        walked.append(visit.path())
        assert len(walked) <= len(order), walked
    assert walked == order
    while visit.page.locator("a.left-prev").count():
        with visit.page.expect_navigation():
            visit.page.locator("a.left-prev").first.click()
        walked.append(visit.path())
        assert len(walked) <= 2 * len(order), walked
    assert walked[len(order) - 1:] == order[::-1]
    assert visit.problems == [], "\n".join(visit.problems)


def test_notebook_pages_offer_download_launch_and_copy(visit, site):
    notebooks = [n for n in toc_order() if (ROOT / f"{n}.ipynb").is_file()]
    assert notebooks
    for name in notebooks:
        page = visit.open(f"{name}.html")
        links = [a.get_attribute("href")
                 for a in page.locator("a[href]").all()]
        download = [h for h in links if h.endswith(".ipynb")
                    and "_sources" in h]
        assert download, f"{name}: no notebook download"
        response = page.request.get(urllib.parse.urljoin(page.url,
                                                         download[0]))
        assert response.status == 200 and response.json()["cells"], name
        stem = pathlib.PurePosixPath(name).name
        assert any(h.startswith("https://mybinder.org/")
                   and h.endswith(f"{stem}.ipynb") for h in links), name
        assert any(h.startswith("https://colab.research.google.com/")
                   and h.endswith(f"{stem}.ipynb") for h in links), name
        # sphinx-copybutton puts a button on every code block.
        blocks = page.locator("div.highlight").count()
        assert blocks and page.locator("button.copybtn").count() == blocks
    assert visit.problems == [], "\n".join(visit.problems)


# -- interactive figures (issue 17) ----------------------------------------
# ddpdemo.interactive draws them with a few KB of inline JavaScript: no
# library, nothing fetched. These tests drive them; the page-weight test
# below holds them to their budget.
FIGURE = ".ddp-fig"
BUDGET = 1_000_000            # bytes the interactive figures may add a page


# -- page weight (issues 17 and 26) ------------------------------------------
# What a reader's browser receives, page by page, in both editions: a first
# visit (nothing cached) at most FIRST_VISIT, a second page of the same
# edition at most SECOND_PAGE more (the shared assets cached). Formulas,
# icon fonts and figures included: every page is typeset and scrolled to
# its end before it is counted.
FIRST_VISIT = 1_500_000
SECOND_PAGE = 300_000
LARGEST = 3                   # files named beside each page's figure
RESPONSES = """() => performance.getEntries()
    .filter(e => e.entryType === "navigation" || e.entryType === "resource")
    .map(e => [e.transferSize, e.name])"""


def _settle(visit, path):
    """Open a page and let everything it loads arrive: lazy content at
    the bottom, formulas drawn (assert_formulas_drawn; a formula that is
    not is one of visit.problems)."""
    page = visit.open(path)
    page.mouse.wheel(0, 100_000)
    page.wait_for_load_state("networkidle")
    try:
        assert_formulas_drawn(page, path)
    except AssertionError as exc:
        visit.problems.append(f"formulas not drawn: {exc}")
    return page


# Every formula (ddpdemo.book.lightpages writes them as MathML) laid out by the
# browser as mathematics: a <math> box of its own, displayed as math,
# every fraction's numerator above its denominator, and a display formula
# centred in its line (unless numbered).
FORMULAS = """() => [...document.querySelectorAll(".math")].map(e => {
    const m = e.querySelector("math");
    if (!m) return [e.outerHTML.slice(0, 80), "no <math>"];
    const box = m.getBoundingClientRect();
    const display = getComputedStyle(m).display;
    const stacked = [...m.querySelectorAll("mfrac")].every(f =>
        f.children[0].getBoundingClientRect().bottom <=
        f.children[1].getBoundingClientRect().top + 1);
    const line = e.getBoundingClientRect();
    const ink = m.firstElementChild.getBoundingClientRect();
    const centred = display !== "block math" || e.querySelector(".eqno")
        || Math.abs(ink.left + ink.right - line.left - line.right) < 8;
    return [e.textContent.slice(0, 40),
            box.width > 0 && box.height > 0 && display.includes("math")
            && stacked && centred ? "" :
            `${display} ${box.width}x${box.height} at ${ink.left}`];
})"""


def assert_formulas_drawn(page, path):
    """Every formula on the page drawn as mathematics (see FORMULAS);
    returns how many there are."""
    found = page.evaluate(FORMULAS)
    bad = [(f, why) for f, why in found if why]
    assert bad == [], (path, bad)
    return len(found)


def _received(page):
    """[(bytes, url)] of every response this page's load received, largest
    first: Resource Timing's transferSize, the raw bytes over the wire,
    headers and body (0 for a file the browser's cache answered)."""
    return sorted(((n, url) for n, url in page.evaluate(RESPONSES)),
                  reverse=True)


def page_weight(browser, base, path, then=None, problems=None,
                inspect=None):
    """(bytes a first visit to path receives, bytes its interactive
    figures take of them, the LARGEST largest responses as (bytes, url)),
    in a fresh browser context so nothing is cached; the figures' share
    is their inline HTML, scripts and data included. With then, a second
    page opened after path in the same context: also the bytes it adds,
    its shared assets cached: (first, figures, largest, then's bytes).
    What went wrong on either page (Visit's problems, formulas not
    drawn) is asserted absent, or, given a dict `problems`, added to its
    list for that page, each line starting with the page. With inspect,
    inspect(page, then) runs on the second page once it is weighed."""
    visit = Visit(browser, base, cached=True)
    found = {}

    def note(where):
        found.setdefault(where, []).extend(f"{where}: {p}"
                                           for p in visit.problems)
        visit.problems = []

    try:
        page = _settle(visit, path)
        note(path)
        received = _received(page)
        figures = page.evaluate(
            f"() => [...document.querySelectorAll('{FIGURE}')]"
            ".reduce((n, e) => n + new Blob([e.outerHTML]).size, 0)")
        weight = (sum(n for n, _ in received), figures, received[:LARGEST])
        if then is not None:
            page = _settle(visit, then)
            weight += (sum(n for n, _ in _received(page)),)
            if inspect is not None:
                inspect(page, then)
            note(then)
    finally:
        visit.close()
    if problems is None:
        lines = [p for ps in found.values() for p in ps]
        assert lines == [], "\n".join(lines)
    else:
        for where, ps in found.items():
            problems.setdefault(where, []).extend(ps)
    return weight


def _weight_line(path, first, figures, largest, second=None):
    files = ", ".join(f"{n / 1e6:.2f} MB {urllib.parse.urlparse(u).path}"
                      for n, u in largest)
    then = "" if second is None else f" {second:>8}"
    return f"{first:>9}{then} {figures:>7}  {path}  ({files})"


def test_pages_load_no_icon_script_and_no_mathjax(zh_build):
    """What ddpdemo.book.lightpages leaves out, in both editions' HTML: the
    theme's icon script and MathJax; the formulas are MathML instead, and
    the root redirects with an icon of its own (no /favicon.ico)."""
    _, html = zh_build
    pages = built_pages(html)
    assert any(p.startswith("zh/") for p in pages)
    formulas = 0
    for path in pages:
        text = (html / path).read_text()
        assert "fontawesome.js" not in text, path
        assert "mathjax" not in text.lower().replace("mathjax_ignore", ""), \
            path
        formulas += text.count('<math xmlns="http://www.w3.org/1998/Math/')
    assert formulas >= 2 * 12   # chapters 1 and 6 hold 14, in both editions
    for root, lang in (html, "en"), (html / "zh", "zh-CN"):
        index = (root / "index.html").read_text()
        first = f"{toc_order()[0]}.html"
        assert f'content="0; url={first}"' in index
        assert '<link rel="icon" href="data:," />' in index
        assert f'<html lang="{lang}">' in index


def weigh_site(browser, base, html):
    """({page: (first, figures, largest, second)}, {page: what went
    wrong on it}, {page: images_shown}) for every built page
    (page_weight), second being what it adds when it is opened after the
    page before it in its own edition (the Chinese site has its own copy
    of the assets under zh/). Every page is opened twice: first, and
    second; its images are checked on the second visit, once weighed."""
    pages = built_pages(html)
    first, second, images = {}, {}, {}
    problems = {path: [] for path in pages}

    def inspect(page, path):
        images[path] = images_shown(page, path)

    for zh in (False, True):
        same = [p for p in pages if (p.split("/")[0] == "zh") == zh]
        for path, then in zip(same, same[1:] + same[:1], strict=True):
            *first[path], second[then] = page_weight(browser, base, path,
                                                     then, problems, inspect)
    return ({path: (*first[path], second[path]) for path in pages},
            problems, images)


@pytest.fixture(scope="module")
def weighed(browser, site, zh_build):
    """weigh_site over both editions, once: the page-weight test and
    both editions' load tests read this one pass (each page's first
    visit, with nothing cached, is what a load test would open)."""
    base, html = site
    return weigh_site(browser, base, html)


def test_page_weight_budget(weighed, site):
    """Every page of both editions: a first visit at most FIRST_VISIT
    bytes, the same page opened second (after another page of its
    edition) at most SECOND_PAGE more, its figures within BUDGET, and
    nothing went wrong on either visit. Prints first, second, figures,
    page and its largest files."""
    _, html = site
    assert {f"zh/{p}" for p in _zh_pages()} <= set(built_pages(html))
    table, problems, _ = weighed
    print("\n" + "\n".join(_weight_line(p, *w) for p, w in table.items()))
    found = [p for ps in problems.values() for p in ps]
    assert found == [], "\n".join(found)
    with_figures = {p for p, (_, f, _, _) in table.items() if f}
    assert {"book/all_reduce.html", "book/barrier.html",
            "zh/book/all_reduce.html"} <= with_figures
    for path, (first, figures, largest, second) in table.items():
        assert figures <= BUDGET, (path, figures)
        assert first <= FIRST_VISIT, _weight_line(path, first, figures,
                                                  largest)
        assert second <= SECOND_PAGE, (path, second)


# The header's buttons and the element each draws its icon in: since issue
# 26 Font Awesome's CSS and woff2 fonts draw them (no icon script).
HEADER_ICONS = {
    "launch": ".dropdown-launch-buttons > button",
    "repository": ".dropdown-source-buttons > button",
    "download": ".dropdown-download-buttons > button",
    "full screen": ".btn-fullscreen-button",
    "colour mode": ".theme-switch-button",       # one icon per mode shown
    "search": ".search-button__button:visible",     # the header's field
}
ICON_FONT = """async e => {
    await document.fonts.ready;
    const glyph = getComputedStyle(e, "::before");
    const family = glyph.fontFamily.split(",")[0].replace(/["']/g, "");
    return [glyph.content, family,
            [...document.fonts].some(f => f.family.replace(/["']/g, "")
                                     === family && f.status === "loaded")];
}"""


def _ink(png):
    """Pixels of a screenshot that differ clearly from its corner's."""
    import io
    from PIL import Image
    image = Image.open(io.BytesIO(png)).convert("L")
    background = image.getpixel((0, 0))
    return sum(abs(v - background) > 64 for v in image.tobytes())


def test_header_icons_are_drawn(zh_build, visit):
    """Every header button's icon, in both editions: a glyph of a font
    the page has loaded, at least 10 px wide, with ink in a screenshot
    of its column of the button (an icon's own box can be a line high:
    Font Awesome's fa-lg sets line-height .05em)."""
    name = next(n for n in toc_order() if (ROOT / f"{n}.ipynb").is_file())
    for path in (f"{name}.html", f"zh/{name}.html"):
        page = visit.open(path)
        for what, selector in HEADER_ICONS.items():
            button = page.locator(selector).first
            icon = button.locator("i:visible").first
            where = f"{path}: the {what} button's icon"
            content, family, loaded = icon.evaluate(ICON_FONT)
            assert content not in ("none", "normal", '""'), where
            assert "Font Awesome" in family and loaded, (where, family)
            box, around = icon.bounding_box(), button.bounding_box()
            assert box["width"] >= 10, (where, box)
            clip = dict(x=box["x"], width=box["width"], y=around["y"],
                        height=around["height"])
            assert _ink(page.screenshot(clip=clip)) >= 15, where
    assert visit.problems == [], "\n".join(visit.problems)


def test_an_icon_outside_the_cut_fonts_comes_from_the_full_one(visit):
    """The cut-down icon fonts (ddpdemo.book.lightpages) cover what the pages
    name; any other Font Awesome icon (a car, here) still draws, from
    the theme's full font, fetched only then."""
    page = visit.open(f"{toc_order()[0]}.html")
    fonts = "() => performance.getEntriesByType('resource')" \
        ".map(e => e.name).filter(n => /woff2?$/.test(n))"
    assert not any("subset" not in u for u in page.evaluate(fonts))
    page.evaluate("""() => { const i = document.createElement("i");
        i.className = "fa-solid fa-car"; i.id = "car";
        i.style.fontSize = "40px"; document.body.prepend(i); }""")
    car = page.locator("#car")
    car.evaluate(ICON_FONT)                   # waits for the fonts
    page.wait_for_load_state("networkidle")
    assert any(u.endswith("fa-solid-900.woff2")
               for u in page.evaluate(fonts))
    assert _ink(car.screenshot()) >= 50
    assert visit.problems == [], "\n".join(visit.problems)


def _stored_ring_steps():
    """What chapter 1's ring cell printed: {step label: values by rank}."""
    import json
    nb = json.loads((ROOT / "book" / "all_reduce.ipynb").read_text())
    cell = next(c for c in nb["cells"] if c.get("id") == "dc8f98c7")
    text = "".join("".join(o.get("text", "")) for o in cell["outputs"])
    steps = {}
    for line in text.splitlines():
        label, _, rest = line.partition("[")
        steps[label.strip()] = [[int(v) for v in chunk.split(",")]
                                for chunk in re.findall(r"\[([^\]]*)\]",
                                                        "[" + rest)]
    return steps


def test_ring_figure_steps_with_slider_and_play(visit):
    page = visit.open("book/all_reduce.html")
    fig = page.locator(FIGURE).filter(has=page.locator("input[type=range]"))
    assert fig.count() == 1
    slider, live = fig.locator("input[type=range]"), fig.locator("[aria-live]")
    slider.scroll_into_view_if_needed()
    boxes = fig.locator("svg g text")
    stored = _stored_ring_steps()
    n = len(stored["start"])
    assert boxes.count() == n * n
    shown = []
    for step in range(int(slider.get_attribute("max")) + 1):
        slider.fill(str(step))
        label = fig.locator(".ddp-step").inner_text()
        values = [int(v) for v in boxes.all_text_contents()]
        # The boxes show what the ranks recorded, step by step.
        assert [values[r * n:(r + 1) * n] for r in range(n)] == \
            stored[label], label
        assert live.inner_text().startswith(label)
        shown.append(live.inner_text())
    assert len(set(shown)) == len(shown) == 2 * (n - 1) + 1
    # The keyboard moves the native slider; Play walks the steps itself.
    slider.fill("0")
    slider.focus()
    page.keyboard.press("ArrowRight")
    assert slider.input_value() == "1" and "reduce-scatter 1" in \
        live.inner_text()
    play = fig.locator("button")
    play.click()
    assert play.get_attribute("aria-pressed") == "true"
    page.wait_for_function("s => +s.value >= 3", arg=slider.element_handle())
    play.press("Enter")                                    # pause
    assert play.get_attribute("aria-pressed") == "false"
    assert fig.locator("svg").get_attribute("role") == "img"
    assert visit.problems == [], "\n".join(visit.problems)


TOPMOST = """e => { const r = e.getBoundingClientRect();
    return document.elementFromPoint(r.x + r.width / 2,
                                     r.y + r.height / 2) === e; }"""


def _read_marks(page, fig, expected):
    """Focus every mark of a figure, and hover every one the mouse can
    reach (not under another: gradients ready in the same microsecond
    are): each must say its line, and a focused mark must look focused.
    Returns the lines read."""
    live = fig.locator("[aria-live]")
    marks = fig.locator("[tabindex]")
    assert marks.count() >= expected
    read, hovered = [], 0
    for i in range(marks.count()):
        mark = marks.nth(i)
        mark.scroll_into_view_if_needed()
        mark.focus()
        read.append(live.inner_text())
        assert read[-1] == mark.get_attribute("data-say")
        style = mark.evaluate("e => getComputedStyle(e).outlineStyle")
        assert style != "none", read[-1]
        if mark.evaluate(TOPMOST):
            page.mouse.move(0, 0)
            mark.hover()
            assert live.inner_text() == read[-1]
            hovered += 1
    assert hovered >= 0.9 * marks.count(), (hovered, marks.count())
    return read


def test_barrier_timeline_says_each_ranks_event(visit):
    page = visit.open("book/barrier.html")
    fig = page.locator(FIGURE).filter(has=page.locator("script[data-timings]"))
    assert fig.count() == 1
    read = _read_marks(page, fig, 6)
    for rank in (0, 1):
        assert any(re.fullmatch(
            rf"rank {rank}, in dist\.barrier\(\): from \d+\.\d+ to "
            rf"\d+\.\d+ s \(took \d+\.\d+ s\)", line) for line in read), read
        assert any(re.fullmatch(rf"rank {rank}, left at \d+\.\d+ s", line)
                   for line in read), read
    assert visit.problems == [], "\n".join(visit.problems)


def test_ddp_buckets_and_hang_ledger_read_out(visit):
    page = visit.open("book/inside_ddp.html")
    fig = page.locator(FIGURE).filter(has=page.locator("script[data-timings]"))
    read = _read_marks(page, fig, 4)
    assert any(re.fullmatch(r"rank 1, bucket \d+'s all_reduce: from .* ms "
                            r"\(took .* ms\)", line) for line in read), read
    assert any("gradient of" in line for line in read), read
    page = visit.open("book/evaluation.html")
    fig = page.locator(FIGURE).filter(has=page.locator("table"))
    read = _read_marks(page, fig, 4)
    assert "rank 1, collective #2: never called; it stopped at #1." in read
    assert fig.locator("td.ddp-bad").count() == 2
    assert visit.problems == [], "\n".join(visit.problems)


# The same figures on the Chinese pages (issue 27): the outputs are the
# English book's, and ddpdemo.book.zhfigures's script shows them in
# Chinese there, and only there. Every string a figure shows or says.
FIGURE_STRINGS = """f => [...f.querySelectorAll("*")]
    .filter(e => e.tagName !== "STYLE" && e.tagName !== "SCRIPT")
    .flatMap(e => [e.children.length ? "" : e.textContent,
                   ...["aria-label", "aria-valuetext", "data-say"]
                   .map(a => e.getAttribute(a) || "")])
    .filter(s => s)"""
CHINESE = re.compile("[\u4e00-\u9fff]")


def _figure_pages(html):
    """The chapters whose page carries an interactive figure."""
    return [n for n in toc_order()
            if 'class="ddp-fig"' in (html / f"{n}.html").read_text()]


def _walk_figure(page, fig):
    """What a figure's live region says as a reader goes through it: every
    step of a ring, every mark or cell focused."""
    live = fig.locator("[aria-live]")
    said = [live.inner_text()]
    slider = fig.locator("input[type=range]")
    if slider.count():
        slider.scroll_into_view_if_needed()
        for step in range(int(slider.get_attribute("max")) + 1):
            slider.fill(str(step))
            said.append(live.inner_text())
    else:
        said += _read_marks(page, fig, 1)
    return said


def test_figures_speak_the_pages_language(zh_build, visit):
    _, html = zh_build
    names = _figure_pages(html)
    assert len(names) >= 4 and names == _figure_pages(html / "zh")
    for name in names:
        for path, chinese in ((f"zh/{name}.html", True),
                              (f"{name}.html", False)):
            page = visit.open(path)
            for fig in page.locator(FIGURE).all():
                said = _walk_figure(page, fig)
                strings = fig.evaluate(FIGURE_STRINGS)
                if not chinese:
                    assert not any(map(CHINESE.search, said + strings)), path
                    continue
                # Chinese, but for a rank's name and a collective's
                # (i18n/zh/terms.md keeps those as they are).
                assert all(CHINESE.search(s) for s in said), (path, said)
                english = [s for s in strings
                           if re.search("[A-Za-z]{2}", s)
                           and not CHINESE.search(s)
                           and not re.fullmatch(r"rank \d+( all_reduce)?|"
                                                r"[a-z_]+", s)]
                assert english == [], (path, english)
                assert fig.get_attribute("data-untranslated") is None
    assert visit.problems == [], "\n".join(visit.problems)


def test_chinese_ring_controls(zh_build, visit):
    """Play and Pause, the slider's name and value, the step shown and
    said: in Chinese on the Chinese page, aria-pressed as in English."""
    page = visit.open("zh/book/all_reduce.html")
    fig = page.locator(FIGURE).filter(has=page.locator("input[type=range]"))
    play, slider = fig.locator("button"), fig.locator("input[type=range]")
    slider.scroll_into_view_if_needed()
    assert play.inner_text() == "播放"
    assert CHINESE.search(slider.get_attribute("aria-label"))
    assert fig.locator(".ddp-step").inner_text() == "开始"
    slider.fill("1")
    step = fig.locator(".ddp-step").inner_text()
    assert step == slider.get_attribute("aria-valuetext") == \
        "reduce-scatter 第 1 步"
    assert fig.locator("[aria-live]").inner_text().startswith(step + "（")
    play.click()
    assert play.inner_text() == "暂停"
    assert play.get_attribute("aria-pressed") == "true"
    play.press("Enter")
    assert play.inner_text() == "播放"
    assert play.get_attribute("aria-pressed") == "false"
    english = visit.open("book/all_reduce.html")
    assert english.locator(f"{FIGURE} button").inner_text() == "Play"
    assert visit.problems == [], "\n".join(visit.problems)


if __name__ == "__main__":
    # Page weights of a built site: python tests/test_site.py _build/html
    from playwright.sync_api import sync_playwright
    html = pathlib.Path(sys.argv[1]).resolve()
    handler = functools.partial(_QuietHandler, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=find_chromium(),
                                     headless=True, args=CHROMIUM_ARGS)
        table, problems, _ = weigh_site(chromium, base, html)
        for path, weight in table.items():
            print(_weight_line(path, *weight))
        for line in (p for ps in problems.values() for p in ps):
            print(line)
        chromium.close()
    server.shutdown()


# --- The Chinese edition (issue 14): built from the English book and
# i18n/zh/ by ddpdemo.book.zh_book into the same site's zh/ folder, as the
# README's first command does.

def _zh_pages():
    return [f"{name}.html" for name in toc_order()] + ["search.html",
                                                        "genindex.html"]


@pytest.fixture(scope="module")
def zh_build(build, tmp_path_factory):
    from ddpdemo.book import zh_book
    proc, html = build
    if proc.returncode != 0:
        pytest.fail("the English book did not build; see "
                    "test_build_is_clean")
    src = tmp_path_factory.mktemp("zh") / "zh-src"
    zh = zh_book.build(ROOT, html=html / "zh", src=src,
                       capture_output=True, text=True, timeout=540)
    return zh, html


def test_chinese_build_is_clean(zh_build):
    proc, html = zh_build
    log = proc.stdout + proc.stderr
    assert [line for line in log.splitlines() if WARNING.search(line)] == []
    assert proc.returncode == 0, log[-4000:]
    for page in _zh_pages():
        assert (html / "zh" / page).is_file(), f"zh/{page} was not built"


def test_chinese_pages_have_chinese_theme_strings(zh_build):
    _, html = zh_build
    for page in _zh_pages():
        text = (html / "zh" / page).read_text()
        assert '<html lang="zh-CN"' in text, page
        assert 'placeholder="搜索本书……"' in text, page
    # The theme's own labels, from its zh_CN catalogue, and the ones
    # ddpdemo/book/langswitch.py adds where that catalogue has none.
    second = (html / "zh" / f"{toc_order()[1]}.html").read_text()
    assert 'title="上一页"' in second and 'title="下一页"' in second
    assert 'aria-label="颜色模式"' in second
    assert 'title="链接到此标题"' in second
    english = (html / f"{toc_order()[1]}.html").read_text()
    assert 'aria-label="Color mode"' in english


def _switch(text):
    found = re.findall(r'<a class="[^"]*ddpdemo-lang-switch[^"]*" '
                       r'href="([^"]+)" hreflang="([^"]+)" lang="([^"]+)"',
                       text)
    assert len(found) == 1, found
    return found[0]


def test_every_page_links_to_its_other_edition(zh_build):
    _, html = zh_build
    for page in _zh_pages():
        for here, there, lang in [(html / page, html / "zh" / page, "zh-CN"),
                                  (html / "zh" / page, html / page, "en")]:
            text = here.read_text()
            href, hreflang, attr = _switch(text)
            assert hreflang == attr == lang, (here, href)
            assert (f'<link rel="alternate" hreflang="{lang}" '
                    f'href="{href}" />') in text, here
            target = (here.parent / href).resolve()
            assert target == there.resolve(), (here, href)


def test_chinese_search_index_has_chinese_pairs(zh_build):
    import json
    _, html = zh_build
    text = (html / "zh" / "searchindex.js").read_text()
    index = json.loads(text[text.index("(") + 1:text.rindex(")")])
    # ddpdemo.book.zhsearch: every character and every pair of neighbours
    # of the Chinese text, nothing longer (without it Sphinx would index
    # whole runs of Chinese text, clauses, as single terms).
    assert "死锁" in index["terms"]
    chinese = [t for t in index["terms"] if re.search("[\u4e00-\u9fff]", t)]
    assert len(chinese) > 500
    assert {len(t) for t in chinese} == {1, 2}, max(chinese, key=len)
    assert '"死锁"' in text       # in UTF-8, not escaped to six bytes each


def test_chinese_pages_load_cleanly(weighed):
    """As test_every_page_loads_cleanly, for the Chinese edition."""
    _, problems, _ = weighed
    pages = [f"zh/{page}" for page in _zh_pages()]
    assert set(pages) <= set(problems)
    found = [p for path in pages for p in problems[path]]
    assert found == [], "\n".join(found)


def test_language_switch_works_both_ways(zh_build, visit):
    for name in toc_order():
        page = visit.open(f"{name}.html")
        link = page.locator("a.ddpdemo-lang-switch")
        assert link.is_visible(), name
        # A real link: reachable from the keyboard, followed with Enter.
        link.focus()
        with page.expect_navigation():
            page.keyboard.press("Enter")
        page.wait_for_load_state("networkidle")    # before leaving again
        assert visit.path() == f"zh/{name}.html"
        assert page.locator("html").get_attribute("lang") == "zh-CN"
        with page.expect_navigation():
            page.locator("a.ddpdemo-lang-switch").click()
        page.wait_for_load_state("networkidle")
        assert visit.path() == f"{name}.html"
    assert visit.problems == [], "\n".join(visit.problems)


def test_chinese_search_finds_deadlock(zh_build, visit):
    page = visit.open(f"zh/{toc_order()[0]}.html")
    page.keyboard.press("Control+k")
    field = page.locator("input[name='q']:visible").first
    field.fill("死锁")
    with page.expect_navigation():
        field.press("Enter")
    assert visit.path() == "zh/search.html"
    results = page.locator("#search-results ul.search li a")
    results.first.wait_for()
    hrefs = [a.get_attribute("href") for a in results.all()]
    assert any("evaluation" in h for h in hrefs), hrefs
    assert visit.problems == [], "\n".join(visit.problems)


# -- Chinese search (issue 27): what a reader types finds the pages that
# contain it. The words come from the edition's own text at test time:
# jieba (the segmenter Sphinx used to cut the index with) cuts each page
# into words; a page's longest word, its longest pair of neighbouring
# words and its most frequent ones (compounds jieba does not make one
# word: 随机种子, 集合通信) must find that page and every other page that
# contains them. The readers' own words (issue 27) are held to the same
# rule where the edition has them.
READERS_WORDS = ("rank 0", "主进程", "0 号进程", "卡住", "卡死", "单机多卡",
                 "多机多卡", "SyncBN", "Mosaic 数据增强")
HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# A page's own text, as the index holds it: its article, without the
# scripts and styles (Sphinx strips those from raw HTML), the
# previous/next links (the titles of other pages) or the labels of the
# buttons that open a folded cell ("Solution", "收起答案": MyST-NB writes
# them into the HTML only, so the index never holds them).
ARTICLE_TEXT = """async urls => Promise.all(urls.map(async url => {
    const html = await (await fetch(url)).text();
    const doc = new DOMParser().parseFromString(html, "text/html");
    doc.querySelectorAll("script, style, .headerlink, details > summary")
        .forEach(e => e.remove());
    return doc.querySelector("article.bd-article").textContent;
}))"""


def _zh_texts(visit):
    """{document name: its article's text, lower case} of the Chinese
    site, read in the browser."""
    names = toc_order()
    page = visit.open(f"zh/{names[0]}.html")
    texts = page.evaluate(ARTICLE_TEXT,
                          [f"{visit.base}zh/{n}.html" for n in names])
    return {n: t.lower() for n, t in zip(names, texts, strict=True)}


def _edition_words(texts):
    """{word: the page it was taken from}: per page, jieba's longest
    Chinese word, its longest compound of two neighbouring words and its
    two most frequent compounds of three characters or more."""
    import collections
    import jieba
    import logging
    jieba.setLogLevel(logging.WARNING)
    words = {}
    for name, text in texts.items():
        cut = list(jieba.cut(text))
        single = {w for w in cut if HAN.fullmatch(w)}
        double = collections.Counter(
            a + b for a, b in itertools.pairwise(cut)
            if HAN.fullmatch(a) and HAN.fullmatch(b) and a + b not in single)
        longest = sorted(single, key=lambda w: (-len(w), w))[:1] + sorted(
            double, key=lambda w: (-len(w), w))[:1]
        frequent = sorted((w for w in double if len(w) >= 3),
                          key=lambda w: (-double[w], w))[:2]
        for w in longest + frequent:
            words.setdefault(w, name)
    return words


def _parts(query):
    """What a page must hold for query: its Chinese runs, its Latin words
    (Sphinx's search skips numbers)."""
    return [p for p in re.findall(HAN.pattern + "|[a-z0-9_]+", query.lower())
            if not p.isdigit()]


def _holds(text, part):
    if HAN.fullmatch(part):
        return part in text
    return re.search(rf"(?<![a-z0-9_]){re.escape(part)}(?![a-z0-9_])",
                     text) is not None


# What search.html does with its ?q= (searchtools.js's Search.init):
# Search.performSearch(q), which lists the pages and ends by writing the
# summary ("found N page(s)").
SEARCH = """q => {
    document.getElementById("search-results").replaceChildren();
    Search.performSearch(q);
}"""


def _zh_search(page, query):
    """The pages the Chinese site's search lists for query, all of them,
    as a reader gets them: page is zh/search.html, and the query runs as
    its ?q= runs (SEARCH), one query after another in the one page
    rather than a page load each."""
    page.evaluate(SEARCH, query)
    return _listed(page)


def _listed(page):
    """The pages a search page lists once its search has finished."""
    page.wait_for_function("() => document.querySelector("
                           "'#search-results .search-summary').innerText")
    hrefs = page.locator("#search-results ul.search li a").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))")
    return {h.split("#")[0].removesuffix(".html") for h in hrefs}


def test_chinese_search_finds_every_page_with_the_words_typed(zh_build,
                                                               visit):
    texts = _zh_texts(visit)
    words = _edition_words(texts)
    assert len(words) >= 3 * len(texts)
    # The same search, the page loaded with ?q=, as a reader's first
    # query runs: the in-page queries below, in that page, must list
    # what it lists.
    first = READERS_WORDS[1]
    page = visit.open("zh/search.html?q=" + urllib.parse.quote(first))
    by_url = _listed(page)
    assert _zh_search(page, first) == by_url and by_url, (first, by_url)
    rows, missed, stray = [], [], []
    for query in list(words) + list(READERS_WORDS):
        parts = _parts(query)
        contain = {n for n, t in texts.items()
                   if all(_holds(t, p) for p in parts)}
        found = _zh_search(page, query)
        rows.append(f"{len(found):3} found {len(contain):3} contain  {query}")
        if query in words:
            assert words[query] in contain, (query, words[query])
        if not contain <= found:
            missed.append((query, sorted(contain - found)))
        # Every page found holds each pair of neighbouring characters (the
        # run itself, rarely, only apart) and each Latin word.
        pairs = [q for p in parts for q in (
            [p[i:i + 2] for i in range(len(p) - 1)] or [p]
            if HAN.fullmatch(p) else [p])]
        if not all(all(_holds(texts[n], p) for p in pairs) for n in found):
            stray.append((query, sorted(found - contain)))
    print("\n" + "\n".join(rows))
    assert missed == [], missed
    assert stray == [], stray
    assert visit.problems == [], "\n".join(visit.problems)


def test_symptoms_page_links_readme_past_one_machine(build):
    """The symptom page sends readers with GPUs on Slurm or MPI to the
    README's "Past one machine" on the configured repository."""
    _, html = build
    url = yaml.safe_load((ROOT / "_config.yml").read_text())[
        "repository"]["url"]
    assert url not in (ROOT / "book" / "triage.md").read_text()
    page = (html / "book" / "triage.html").read_text()
    assert f'href="{url}#past-one-machine"' in page


@pytest.mark.parametrize("fragment", [
    "Watchdog caught collective operation timeout",
    "Expected to have finished reduction",
    "failed finding central directory"])
def test_search_finds_the_symptom_page_by_error_text(visit, fragment):
    page = visit.open(f"{toc_order()[0]}.html")
    page.keyboard.press("Control+k")
    field = page.locator("input[name='q']:visible").first
    field.fill(fragment)
    with page.expect_navigation():
        field.press("Enter")
    results = page.locator("#search-results ul.search li a")
    results.first.wait_for()
    hrefs = [a.get_attribute("href") for a in results.all()]
    assert any("triage" in h for h in hrefs), hrefs
    assert visit.problems == [], "\n".join(visit.problems)


def test_solutions_are_hidden_until_clicked(visit):
    """Every chapter's exercise solutions (tagged hide-cell) show neither
    their code nor their output until the reader opens them."""
    chapters = [n for n in toc_order() if re.search(r"/\d\d_", n)]
    notebooks = list((ROOT / "book").glob("[0-9][0-9]_*.ipynb"))
    assert len(chapters) == len(notebooks)
    for name in chapters:
        page = visit.open(f"{name}.html")
        hidden = page.locator("div.tag_hide-cell")
        assert hidden.count() >= 1, f"{name}: no hidden solution"
        for i in range(hidden.count()):
            cell = hidden.nth(i)
            inner = cell.locator(".cell_input, .cell_output")
            assert inner.count() >= 1
            assert not any(inner.nth(j).is_visible()
                           for j in range(inner.count())), name
            cell.locator("summary").first.click()
            assert inner.first.is_visible(), name
    assert visit.problems == [], "\n".join(visit.problems)
