"""The reference pages (issue 21): symptoms, pitfalls and glossary.

book/triage.md quotes error messages; each quote (a ```text block) is
followed by a MyST comment saying how it is checked, and this test checks
it that way, so the page cannot drift from the installed torch:

    % checked: output NOTEBOOK   every line is in NOTEBOOK's stored outputs,
                                 which strict nbval re-runs on gloo
    % checked: live torch.load   the test provokes it and compares
    % checked: live open
    % checked: live gloo-mismatch
    % checked: absent SOURCE     NCCL-only text, not in the installed CPU
                                 build: the test checks that it is still
                                 absent, so the page's note stays true

Every link of the three pages goes to a section label that exists, and
pitfalls and glossary link to sections, never to whole chapters.
"""
import json
import os
import re
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOK = os.path.join(ROOT, "book")
TORCH = os.path.dirname(torch.__file__)
QUOTE = re.compile(r"^```text\n(.*?)^```\n% checked: (\w+) (\S+)$",
                   re.M | re.S)
pytestmark = pytest.mark.timeout(300)


def read(name):
    with open(os.path.join(BOOK, name)) as f:
        return f.read()


def quotes():
    """[(lines, kind, argument)] of the symptoms page, in page order."""
    return [([line for line in text.splitlines() if line.strip()], kind, arg)
            for text, kind, arg in QUOTE.findall(read("triage.md"))]


def outputs(stem):
    """All text a notebook's stored outputs show."""
    with open(os.path.join(BOOK, f"{stem}.ipynb")) as f:
        nb = json.load(f)
    found = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            found.append("".join(out.get("text", "")))
            found.append("".join(out.get("data", {}).get("text/plain", "")))
            found.append(out.get("evalue", ""))
    return "\n".join(found)


def torch_contains(phrase):
    """Whether the installed torch's sources, headers or libraries hold
    phrase anywhere."""
    needle = phrase.encode()
    for folder, _, files in os.walk(TORCH):
        for name in files:
            if name.endswith((".py", ".h", ".hpp", ".cpp", ".cuh")) or \
                    ".so" in name:
                with open(os.path.join(folder, name), "rb") as f:
                    if needle in f.read():
                        return True
    return False


def load_cut(path, elements, keep):
    """The message torch.load gives for a checkpoint of `elements`
    float32s cut to its first `keep` bytes, as `Type: message`."""
    torch.save({"w": torch.ones(elements)}, path)
    path.write_bytes(path.read_bytes()[:keep])
    try:
        torch.load(path)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    raise AssertionError(f"a checkpoint cut to {keep} bytes loaded")


# Two gloo ranks, 2 s group timeout: rank 0 in a barrier, rank 1 in an
# all_reduce. Each prints the error its collective raised.
MISMATCH = """
import sys
from datetime import timedelta
import torch
import torch.distributed as dist
rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2],
                        rank=rank, world_size=2,
                        timeout=timedelta(seconds=2))
try:
    if rank == 0:
        dist.barrier()
    else:
        dist.all_reduce(torch.ones(1))
    print("returned")
except RuntimeError as error:
    print(error, flush=True)
    # Stay alive while the other rank's own timeout comes: a process that
    # ends closes its pairs, and the other rank would then report
    # "Connection closed by peer" instead (the page says both).
    import time
    time.sleep(4)
"""


def mismatched(tmp_path, tries=5):
    """What the two ranks of MISMATCH printed, rank 0 first, from the
    first run in which each rank's own timeout fired. Which rank times out
    first is a race: its timeout closes the pair, and the other rank may
    then print "Connection closed by peer" instead (the page says so).
    Every run must end in one of those two, never in a matched call.
    Run once for this module: two tests read it."""
    if _MISMATCHED:
        return _MISMATCHED
    _MISMATCHED[:] = _mismatched(tmp_path, tries)
    return _MISMATCHED


_MISMATCHED = []


def _mismatched(tmp_path, tries):
    seen = []
    for attempt in range(tries):
        store = str(tmp_path / f"store-{attempt}")
        procs = [subprocess.Popen([sys.executable, "-c", MISMATCH,
                                   str(rank), store],
                                  stdout=subprocess.PIPE, text=True)
                 for rank in range(2)]
        try:
            outs = [proc.communicate(timeout=120)[0] for proc in procs]
        finally:
            for proc in procs:
                proc.kill()
        for out in outs:
            assert ("Timed out waiting 2000ms" in out
                    or "Connection closed by peer" in out), outs
        if all("Timed out waiting" in out for out in outs):
            return outs
        seen.append(outs)
    raise AssertionError(f"in {tries} runs no rank pair both timed out: "
                         f"{seen}")


def provoke(kind, tmp_path):
    """The message a live run gives, as `Type: message`."""
    path = tmp_path / "file"
    if kind == "torch.load":            # checkpoints cut short: the page
        return "\n".join([              # quotes every message
            load_cut(path, 4_000, 8_000),            # an 18 KB file
            load_cut(path, 2_500_000, 5_000_000),    # a 10 MB one
            load_cut(path, 4_000, 15),
            load_cut(path, 4_000, 0)])
    if kind == "gloo-mismatch":
        return "\n".join(mismatched(tmp_path))
    try:
        if kind == "open":              # a file that is not there
            (tmp_path / "missing").read_text()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    raise AssertionError(f"{kind} raised nothing")


def test_which_checkpoint_error_depends_on_the_cut(tmp_path):
    # The page: cut to between 4 KB and about 68 KB, OSError; shorter
    # (down to 22 bytes) or longer, the central-directory error; under
    # 22 bytes, not a ZIP archive; empty, EOFError.
    text = read("triage.md")
    assert "between 4 KB and about\n68 KB" in text
    path = tmp_path / "file"
    central = "failed finding central directory"
    for elements, keep, error in [
            (4_000, 0, "EOFError"), (4_000, 15, "not a ZIP archive"),
            (4_000, 21, "not a ZIP archive"), (4_000, 22, central),
            (4_000, 4_000, central), (4_000, 4_200, "OSError"),
            (4_000, 17_000, "OSError"), (30_000, 68_000, "OSError"),
            (30_000, 70_000, central), (2_500_000, 1_000_000, central),
            (2_500_000, 9_000_000, central)]:
        assert error in load_cut(path, elements, keep), (elements, keep)


def test_a_barrier_does_not_match_an_all_reduce_on_gloo(tmp_path):
    # The page: beside an all_reduce, a barrier times out, and the
    # receiving and the sending rank say so in their own words.
    barrier, all_reduce = mismatched(tmp_path)
    assert "for recv operation to complete" in barrier
    assert "for send operation to complete" in all_reduce


def test_every_quote_says_how_it_is_checked():
    text = read("triage.md")
    assert text.count("```text") == len(quotes()) >= 8
    kinds = {kind for _, kind, _ in quotes()}
    assert kinds == {"output", "live", "absent"}


@pytest.mark.parametrize("lines,kind,arg", quotes())
def test_quoted_message_is_the_real_one(lines, kind, arg, tmp_path):
    if kind == "output":
        shown = outputs(arg)
        for line in lines:
            assert line in shown, f"{arg} does not show {line!r}"
    elif kind == "live":
        real = provoke(arg, tmp_path)
        for line in lines:
            assert line in real, (line, real)
    elif kind == "absent":
        # The page says these lines are not in the installed CPU build.
        assert arg.endswith(".cpp") and not any(
            os.path.basename(arg) in files for _, _, files in os.walk(TORCH))
        for line in lines:
            phrase = re.findall(r"[A-Za-z][A-Za-z ]{20,}[A-Za-z]", line)[0]
            assert not torch_contains(phrase), (
                f"{phrase!r} is in the installed torch now: cite it")
        # ... while the class that prints them is declared there.
        header = os.path.join(TORCH, "include", "torch", "csrc",
                              "distributed", "c10d",
                              os.path.basename(arg)[:-4] + ".hpp")
        with open(header) as f:
            assert "getNCCLWatchdogTimeoutErrorMsg" in f.read()
    else:
        raise AssertionError(f"unknown check {kind}")


def labels():
    """Every MyST label defined in the book's pages and notebooks."""
    found = set()
    for name in os.listdir(BOOK):
        path = os.path.join(BOOK, name)
        if name.endswith(".md"):
            found |= set(re.findall(r"(?m)^\(([^()\s]+)\)=$", read(name)))
        elif name.endswith(".ipynb"):
            with open(path) as f:
                for cell in json.load(f)["cells"]:
                    if cell["cell_type"] == "markdown":
                        found |= set(re.findall(r"(?m)^\(([^()\s]+)\)=$",
                                                "".join(cell["source"])))
    return found


def refs(text):
    """The labels a page's {ref} roles point at."""
    return [m.group(2) or m.group(1) for m in re.finditer(
        r"\{ref\}`(?:[^`<]*<([^>]+)>|([^`<]+))`", text)]


@pytest.mark.parametrize("page", ["pitfalls.md", "glossary.md",
                                  "triage.md"])
def test_links_go_to_sections_that_exist(page):
    text = read(page)
    assert "{doc}" not in text, f"{page} links to a whole chapter"
    assert not re.search(r"\]\((?!https?:)[^)#]*\.(ipynb|md)\)", text)
    targets = refs(text)
    assert targets, f"{page} links to nothing"
    missing = sorted(set(targets) - labels())
    assert missing == [], f"{page} links to labels nobody defines"


def test_every_pitfall_links_to_a_section():
    text = read("pitfalls.md")
    entries = re.split(r"\n(?=\*\*)", text.split("\n## ", 1)[1])
    for entry in entries:
        if entry.startswith("**"):
            assert refs(entry), f"no section link: {entry[:60]}"


def test_symptoms_page_comes_right_after_the_introduction():
    from ddpdemo.book.i18n import toc_names
    names = toc_names()
    assert names[:2] == ["book/intro", "book/triage"]
