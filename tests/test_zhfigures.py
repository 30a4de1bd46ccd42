"""ddpdemo.book.zhfigures: the interactive figures read in Chinese on a
Chinese page, every control, step, mark and sentence of them, and stay
English on an English page. Straight from ddpdemo.interactive's HTML, for
every kind of figure and every sentence the ledger can say, in Chromium,
with no book built (tests/test_site.py checks the built pages)."""
import copy
import pickle
import re

import needs
import pytest

from ddpdemo import interactive
from ddpdemo.book import zhfigures
from ddpdemo.runtime.ledger import Ledger
from test_interactive import FR, MARKS, SPANS, fake_ring
from test_site import CHROMIUM_ARGS, find_chromium

pytestmark = pytest.mark.timeout(120)
SCRIPT = (zhfigures.STATIC / zhfigures.SCRIPT).read_text()
CHINESE = re.compile("[\u4e00-\u9fff]")
# What stays English on a Chinese page (i18n/zh/terms.md): a rank's name,
# and a collective as the backend names it in a ledger's cell.
KEPT = re.compile(r"rank \d+( all_reduce)?")
# Every string a figure shows or says: its elements' own text (a ledger
# cell's aside) and their aria labels and spoken lines.
STRINGS = """f => [...f.querySelectorAll("*")]
    .filter(e => e.tagName !== "STYLE" && e.tagName !== "SCRIPT")
    .flatMap(e => [e.children.length || e.tagName === "TD" ? "" :
                   e.textContent, ...["aria-label", "aria-valuetext",
                   "data-say"].map(a => e.getAttribute(a) || "")])
    .filter(s => s)"""


def ledgers():
    """A Ledger for every sentence ddpdemo.ledger can say, and for each
    kind of cell, from tests/data's recorded gloo dumps."""
    with open(FR, "rb") as f:
        recorded = pickle.load(f)
    lonely = recorded["lonely"]
    agree = copy.deepcopy(lonely)
    del agree[0]["dump"]["entries"][2]
    sites = copy.deepcopy(agree)
    for rank, caller in ((0, "validate"), (1, "checkpoint")):
        sites[rank]["dump"]["entries"][1]["frames"] = [
            {"name": caller, "filename": "/home/me/train.py"}]
    off = copy.deepcopy(lonely)
    for rec in off.values():
        rec["buffer_size"] = 0
    none = copy.deepcopy(lonely)
    none[1]["dump"]["entries"] = []
    empty = copy.deepcopy(none)
    empty[0]["dump"]["entries"] = []
    return [Ledger(2, lonely), Ledger(2, recorded["mismatch"]),
            Ledger(2, agree), Ledger(2, sites), Ledger(2, off),
            Ledger(2, none), Ledger(2, empty), Ledger(2, {0: None, 1: None}),
            Ledger(2, {0: lonely[0]}, dead=[1]),
            Ledger(2, {0: lonely[0], 1: None})]


def figures():
    records = [{"backward": (1.0, 1.004), "grads": {"0.weight": 1.001},
                "buckets": [{"index": 0, "start": 1.002, "end": 1.005}]}]
    return [interactive.ring(fake_ring()),
            interactive.ring(fake_ring(3, base=0.5), "ring all-reduce on 3 "
                             "ranks, one step at a time"),
            interactive.timeline(SPANS, "dist.barrier(), rank by rank",
                                 marks=MARKS),
            interactive.overlap(records),
            *[interactive.ledger(ledger) for ledger in ledgers()]]


@pytest.fixture(scope="module")
def page():
    executable = find_chromium()
    if executable is None:
        needs.missing("Chromium is not installed; `apt-get install chromium`")
    sync_playwright = needs.module("playwright.sync_api",
                                   "pip install -r requirements.txt")
    with sync_playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable,
                                    headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_default_timeout(20_000)
        errors = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        page.on("console", lambda m: m.type in ("error", "warning")
                and errors.append(m.text))
        yield page
        assert errors == []
        browser.close()


def show(page, lang):
    """Every figure on one page whose <html lang> is lang, with the
    script the Chinese site adds after them (deferred there)."""
    body = "".join(f.html for f in figures())
    page.set_content(f'<!doctype html><html lang="{lang}"><head><meta '
                     f'charset="utf-8"></head><body>{body}<script>{SCRIPT}'
                     "</script></body></html>")
    return page.locator(".ddp-fig").all()


def read(fig):
    """Walk a figure as a reader does (every step of a ring, Play and
    Pause; every mark or cell focused); return what the live region said
    and every string it showed or labelled."""
    said = [fig.locator("[aria-live]").inner_text()]
    slider = fig.locator("input[type=range]")
    if slider.count():
        for step in range(int(slider.get_attribute("max")) + 1):
            slider.fill(str(step))
            said.append(fig.locator("[aria-live]").inner_text())
    for mark in fig.locator("[tabindex]").all():
        mark.focus()
        said.append(fig.locator("[aria-live]").inner_text())
    return said, fig.evaluate(STRINGS)


def test_every_figure_reads_in_chinese_on_a_chinese_page(page):
    for fig in show(page, "zh-CN"):
        said, strings = read(fig)
        english = [s for s in strings if re.search("[A-Za-z]{2}", s)
                   and not CHINESE.search(s) and not KEPT.fullmatch(s)]
        assert english == [], fig.get_attribute("id")
        assert all(CHINESE.search(s) for s in said), said
        assert fig.get_attribute("data-untranslated") is None
        # a cell keeps the collective's name, not the English around it
        cells = fig.locator("td").all_inner_texts()
        assert not any(re.search(r"\((pending|dead|no answer)\)", c)
                       for c in cells), cells


def test_controls_and_steps_in_chinese(page):
    ring = show(page, "zh-CN")[0]
    play, slider = ring.locator("button"), ring.locator("input[type=range]")
    assert play.inner_text() == "播放"
    assert slider.get_attribute("aria-label") == "环形 all-reduce 的步骤"
    slider.fill("1")
    assert ring.locator(".ddp-step").inner_text() == "reduce-scatter 第 1 步"
    assert slider.get_attribute("aria-valuetext") == "reduce-scatter 第 1 步"
    assert ring.locator("[aria-live]").inner_text().startswith(
        "reduce-scatter 第 1 步（全部 6 步中的第 1 步）：rank 0 把分块 0（1）"
        "发给 rank 1，rank 1 把它加到自己的分块 0 上；")
    play.click()
    assert play.inner_text() == "暂停"
    assert play.get_attribute("aria-pressed") == "true"
    play.click()
    assert play.inner_text() == "播放"


def test_the_ledgers_finding_is_rendered_from_its_data(page):
    """The Chinese of a ledger's finding comes from the data its figure
    carries (ledger.Finding), not from its English: each kind reads as
    written, and a finding whose English says something else is still
    rendered from the data."""
    live = [fig.locator("[aria-live]").inner_text()
            for fig in show(page, "zh-CN")[4:]]
    assert live[0] == ("rank 0 到达了集合通信 #3（barrier），而 rank 1 "
                       "从未调用它：rank 1 停在了 #2（barrier）。")
    assert live[1] == ("各 rank 在集合通信 #1 处不一致：rank 0 上是 "
                       "barrier；rank 1 上是 all_reduce [3] Float。")
    assert live[3].endswith("但 #2 配对的调用位置不同：rank 0 上是 "
                            "validate；rank 1 上是 checkpoint。")
    assert live[8].startswith("rank 1 已退出")
    # The same sentence, other data: the data wins.
    fig = interactive.ledger(ledgers()[0])
    data = dict(fig.data, finding=dict(fig.data["finding"], seq=42))
    html = fig.html.replace(interactive._json(fig.data),
                            interactive._json(data))
    assert html != fig.html
    page.set_content(f'<!doctype html><html lang="zh-CN"><head><meta '
                     f'charset="utf-8"></head><body>{html}<script>{SCRIPT}'
                     "</script></body></html>")
    assert "集合通信 #42（barrier）" in \
        page.locator("[aria-live]").inner_text()


def test_english_page_keeps_english(page):
    figs = show(page, "en")
    for fig in figs:
        said, strings = read(fig)
        assert not any(CHINESE.search(s) for s in said + strings)
    assert figs[0].locator("button").inner_text() == "Play"
