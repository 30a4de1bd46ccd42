"""A chapter read locally, in a real JupyterLab, shows the book's MyST
markup rendered, as the site does: no raw `{ref}` or `{doc}` role, no
`(label)=` target line, no directive fence (issue 32, item 8). Without
the jupyterlab-myst extension JupyterLab's own Markdown renderer shows
them raw (`DDP ({doc}inside_ddp explains it)`), and this test fails.

Starts `jupyter lab` on loopback with a random port and token, opens the
chapter in Chromium through Playwright, reads the text of every rendered
Markdown cell, and stops the server and everything it started.
"""
import json
import os
import pathlib
import re
import secrets
import subprocess
import sys

import needs
import psutil
import pytest

from test_site import CHROMIUM_ARGS, ROOT, STEP_MS, find_chromium

pytestmark = pytest.mark.timeout(300)
CHAPTER = "book/all_reduce.ipynb"   # {ref} and {doc} roles, targets
# What MyST markup looks like when nothing rendered it.
RAW = [re.compile(r"\{(ref|doc|term|numref|eq|download)\}"),
       re.compile(r"^\([\w:-]+\)=\s*$", re.M),
       re.compile(r"(```|:::)\{")]
# Rendered Markdown: JupyterLab's own renderer, or jupyterlab-myst's.
RENDERED = ".jp-MarkdownCell .jp-MarkdownOutput, .jp-MarkdownCell .myst"


def jupyter():
    beside = os.path.join(os.path.dirname(sys.executable), "jupyter")
    return beside if os.path.exists(beside) else "jupyter"


@pytest.fixture
def lab(tmp_path):
    """(base URL, token) of a JupyterLab serving the repository. Its
    settings, runtime files, workspaces and checkpoints live in tmp_path
    (a checkpoint directory left in book/ would be read by other tests,
    on the other worker at the same time); every cell is rendered at once
    (no windowing), so all of them can be read."""
    needs.module("jupyterlab", "pip install -r requirements.txt")
    needs.module("jupyterlab_myst", "pip install -r requirements.txt")
    settings = tmp_path / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none"}))
    token = secrets.token_hex(16)
    checkpoints = ROOT / pathlib.Path(CHAPTER).parent / ".ipynb_checkpoints"
    had = checkpoints.exists()
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"))
    server = subprocess.Popen(
        [jupyter(), "lab", "--no-browser", "--allow-root",
         "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0",
         f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={ROOT}",
         f"--FileCheckpoints.checkpoint_dir={tmp_path / 'checkpoints'}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines, url = [], None
    try:
        # The server names its URL once it listens (a line per extension
        # before that); the test's own timeout bounds this read.
        for line in server.stdout:
            lines.append(line)
            found = re.search(r"(http://127\.0\.0\.1:\d+)/lab", line)
            if found:
                url = found.group(1)
                break
        assert url, "jupyter lab ended without a URL:\n" + "".join(lines)
        yield url, token
    finally:
        started = psutil.Process(server.pid).children(recursive=True)
        server.terminate()     # shuts its kernels down
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
        _, left = psutil.wait_procs(started, timeout=30)
        assert not left, f"left behind: {left}"
        assert had or not checkpoints.exists(), f"left: {checkpoints}"


def test_chapter_reads_rendered_in_jupyterlab(lab):
    executable = find_chromium()
    if executable is None:
        needs.missing("Chromium is not installed; `apt-get install chromium`")
    from playwright.sync_api import sync_playwright
    url, token = lab
    with open(ROOT / CHAPTER) as f:
        markdown = [c for c in json.load(f)["cells"]
                    if c["cell_type"] == "markdown"]
    # The chapter does hold the markup this test looks for.
    source = "\n".join("".join(c["source"]) for c in markdown)
    assert RAW[0].search(source) and RAW[1].search(source)
    # Chromium's resolver rules keep it on loopback; the server's own URL
    # carries no name to resolve.
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable,
                                    headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{url}/lab/tree/{CHAPTER}?token={token}",
                      timeout=6 * STEP_MS)
            page.wait_for_function(
                f"document.querySelectorAll({json.dumps(RENDERED)}).length"
                f" >= {len(markdown)}", timeout=6 * STEP_MS)
            texts = [e.inner_text() for e in page.query_selector_all(RENDERED)]
            mystified = len(page.query_selector_all(".jp-MarkdownCell .myst"))
        finally:
            browser.close()
    assert len(texts) == len(markdown)
    assert mystified == len(markdown), "jupyterlab-myst did not render"
    raw = [m.group(0) for text in texts for pattern in RAW
           for m in pattern.finditer(text)]
    assert raw == [], f"MyST markup shown raw: {raw}"
