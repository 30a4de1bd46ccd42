"""The reference pages (issues 21 and 44): the triage page and glossary.

book/triage.md quotes error messages; each quote (a ```text block) is
followed by a MyST comment saying how it is checked, and this test checks
it that way, so the page cannot drift from the installed torch:

    % checked: output NOTEBOOK   every line is in NOTEBOOK's stored outputs,
                                 which strict nbval re-runs on gloo
    % checked: live KIND         the test provokes it and compares
                                 (torch.load, open, gloo-mismatch,
                                 gloo-shapes, state-dict)
    % checked: render ChildFailedError
                                 torch's ChildFailedError, the exception
                                 torchrun raises, renders the same
                                 failures (time, host and pids masked)
    % checked: format LOG        the line is in tests/data/explain/LOG, a
                                 real torchrun's output, and its message,
                                 numbers as {}, is a format string of the
                                 installed torch (its compiled library)
    % checked: source PATHS      every line is in one of torch's Python
                                 files PATHS (comma-separated; whitespace
                                 and comment marks aside)
    % checked: absent SOURCE     NCCL-only text, not in the installed CPU
                                 build: the test checks that it is still
                                 absent, so the page's note stays true
    % checked: nccl HEADER       NCCL-only text torch wraps: the first
                                 line's frame (DistBackendError, "NCCL
                                 error in: ") is in the installed HEADER,
                                 the other lines (CUDA build, NCCL's
                                 library) are still absent

Every link of the two pages goes to a section label that exists or to a
page of the book, never a whole chapter by {doc}.
"""
import json
import os
import re
import signal
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOK = os.path.join(ROOT, "book")
LOGS = os.path.join(ROOT, "tests", "data", "explain")
TORCH = os.path.dirname(torch.__file__)
QUOTE = re.compile(r"^```text\n(.*?)^```\n% checked: (\w+) (\S+)$",
                   re.M | re.S)
# Chapters of issue 44 written on other branches at the same time: the
# page links to them by file name; once merged they are in book/.
PENDING = set()
pytestmark = pytest.mark.timeout(300)


def read(name):
    with open(os.path.join(BOOK, name)) as f:
        return f.read()


def flat(text):
    return " ".join(text.split())


def quotes():
    """[(lines, kind, argument)] of the triage page, in page order."""
    return [([line for line in text.splitlines() if line.strip()], kind, arg)
            for text, kind, arg in QUOTE.findall(read("triage.md"))]


def section(title):
    """The triage page's section whose heading starts with title."""
    return read("triage.md").split(f"\n## {title}")[1].split("\n## ")[0]


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


def torch_holds(*phrases):
    """The phrases that the installed torch's sources, headers or
    libraries hold anywhere (one walk for all)."""
    needles = {p: p.encode() for p in phrases}
    found = set()
    for folder, _, files in os.walk(TORCH):
        for name in files:
            if name.endswith((".py", ".h", ".hpp", ".cpp", ".cuh")) or \
                    ".so" in name:
                with open(os.path.join(folder, name), "rb") as f:
                    data = f.read()
                found |= {p for p, n in needles.items() if n in data}
    return found


def searched(kind, lines):
    """The phrases of a quote that its check looks for in the installed
    torch: a message as a format string, or a line's first long run of
    words (of an NCCL-only line, said to be absent)."""
    if kind == "format":
        return [re.sub(r"\d+", "{}", line.split(": ", 1)[1])
                for line in lines]
    if kind == "absent":
        return [re.findall(r"[A-Za-z][A-Za-z ]{20,}[A-Za-z]", line)[0]
                for line in lines]
    if kind == "nccl":
        return [re.findall(r"[A-Za-z][A-Za-z ]{8,}[A-Za-z]", line)[0]
                for line in lines[1:]]
    return []


def torch_found():
    """Which of every quote's searched phrases the installed torch holds:
    one walk of it for the module (it reads every library)."""
    if not _FOUND:
        wanted = [p for lines, kind, _ in quotes()
                  for p in searched(kind, lines)]
        _FOUND.append(torch_holds(*wanted))
    return _FOUND[0]


_FOUND = []


def source_texts(paths):
    """torch's Python files at paths (comma-separated, relative to
    site-packages), each as one string: lines without their indent and
    comment marks, whitespace collapsed."""
    root = os.path.dirname(TORCH)
    texts = []
    for path in paths.split(","):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            texts.append(flat(" ".join(re.sub(r"^\s*#+\s?", "", line)
                                       for line in f)))
    return texts


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


# Two gloo ranks, 2 s group timeout, wrap a model in DDP (its collectives
# match). Then rank 0 enters a barrier, rank 1 an all_reduce. Each prints
# the error its collective raised; once both timeouts are past, rank 0
# loads the wrapper's state_dict into the plain model and the plain one
# into the wrapper, then strips the prefix as the page says. Each raises
# its error again: the process ends on an uncaught error. They run with
# TORCH_FR_DUMP_TEMP_FILE set and write no dump themselves: step 0 says
# that then none exists, however the hang ends.
MISMATCH = """
import sys
from datetime import timedelta
import torch
import torch.distributed as dist
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present
from torch.nn.parallel import DistributedDataParallel as DDP
rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2],
                        rank=rank, world_size=2,
                        timeout=timedelta(seconds=2))
wrapped = DDP(torch.nn.Sequential(torch.nn.Linear(2, 2)))
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
    if rank == 0:   # local work only, once the timeouts are past
        state = wrapped.state_dict()
        plain = torch.nn.Sequential(torch.nn.Linear(2, 2))
        try:
            wrapped.load_state_dict(plain.state_dict())
        except RuntimeError as error:
            print("into the wrapper:", error)
        try:
            plain.load_state_dict(state)
        except RuntimeError as error:
            print(f"{type(error).__name__}: {error}")
        consume_prefix_in_state_dict_if_present(state, "module.")
        print("stripped:", plain.load_state_dict(state), flush=True)
    raise
"""


def mismatched(tmp_path, tries=5):
    """What the two ranks of MISMATCH printed, rank 0 first, from the
    first run in which each rank's own timeout fired. Which rank times out
    first is a race: its timeout closes the pair, and the other rank may
    then print "Connection closed by peer" instead (the page says so).
    Every run must end in one of those two, never in a matched call.
    Run once for this module: four tests read it (the dumps found after
    every run, in _DUMPS)."""
    if _MISMATCHED:
        return _MISMATCHED
    _MISMATCHED[:] = _mismatched(tmp_path, tries)
    return _MISMATCHED


_MISMATCHED = []
_DUMPS = []


def _two_ranks(code, store, env=None, stderr=subprocess.PIPE):
    """Run `code` as ranks 0 and 1 (argv: rank, store path), bounded:
    (the processes, what each printed on stdout), rank 0 first."""
    procs = [subprocess.Popen([sys.executable, "-c", code, str(rank), store],
                              env=env, stdout=subprocess.PIPE,
                              stderr=stderr, text=True)
             for rank in range(2)]
    try:
        outs = [proc.communicate(timeout=120)[0] for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    return procs, outs


def _mismatched(tmp_path, tries):
    seen = []
    for attempt in range(tries):
        store = str(tmp_path / f"store-{attempt}")
        dumps = tmp_path / f"fr-{attempt}"
        dumps.mkdir()
        env = dict(os.environ, TORCH_FR_DUMP_TEMP_FILE=str(dumps / "rank_"))
        procs, outs = _two_ranks(MISMATCH, store, env=env)
        assert [proc.returncode for proc in procs] == [1, 1], outs
        _DUMPS.extend(os.listdir(dumps))
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
    if kind == "gloo-shapes":
        return "\n".join(shapes_differ(tmp_path))
    if kind == "state-dict":
        return module_prefix(tmp_path)
    try:
        if kind == "open":              # a file that is not there
            (tmp_path / "missing").read_text()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    raise AssertionError(f"{kind} raised nothing")


# Two gloo ranks all_gather boxes, (3, 4) on rank 0 and (4, 4) on rank 1,
# each into buffers shaped like its own; rank 1 says whether rank 0's
# boxes arrived as rank 0 sent them.
SHAPES = """
import sys
from datetime import timedelta
import torch
import torch.distributed as dist
rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2],
                        rank=rank, world_size=2,
                        timeout=timedelta(seconds=5))
def boxes_of(r):
    return torch.arange((3 + r) * 4, dtype=torch.float).reshape(-1, 4)
boxes = boxes_of(rank)
out = [torch.full_like(boxes, float("nan")) for _ in range(2)]
try:
    dist.all_gather(out, boxes)
    print("returned; rank 0's boxes intact:",
          torch.equal(out[0][:3], boxes_of(0)), flush=True)
except RuntimeError as error:
    print(error, flush=True)
"""


def shapes_differ(tmp_path):
    """What each rank of SHAPES printed (stderr too), rank 0 first: the
    rank with fewer boxes aborts; the other returns with rank 0's boxes
    garbled, or fails with the aborted rank's connection."""
    procs, outs = _two_ranks(SHAPES, str(tmp_path / "shapes-store"),
                             stderr=subprocess.STDOUT)
    assert procs[0].returncode == -signal.SIGABRT, outs
    assert ("returned; rank 0's boxes intact: False" in outs[1]
            or "Connection reset by peer" in outs[1]
            or "Connection closed by peer" in outs[1]), outs
    return outs


def module_prefix(tmp_path):
    """What rank 0 of MISMATCH printed of the state_dicts it loaded."""
    out = mismatched(tmp_path)[0]
    assert "stripped: <All keys matched successfully>" in out
    # The page: into the wrapper, a plain state gives the lists swapped.
    swapped = out.split("into the wrapper:")[1]
    assert 'Missing key(s) in state_dict: "module.0.weight"' in swapped
    assert 'Unexpected key(s) in state_dict: "0.weight"' in swapped
    return out


def torchrun_reports():
    """torchrun's report, rendered by torch's ChildFailedError (what
    torchrun raises) from the failures it records: rank 1 exited 1 (no
    error file) first, then torchrun's SIGTERM ended rank 0; and rank 1
    killed by SIGKILL."""
    from torch.distributed.elastic.multiprocessing.errors import (
        ChildFailedError, ProcessFailure)

    def report(*failures):
        found = {}
        for rank, exitcode, at in failures:
            failure = ProcessFailure(local_rank=rank, pid=1000 + rank,
                                     exitcode=exitcode, error_file="<N/A>")
            failure.timestamp = at
            found[rank] = failure
        error = ChildFailedError("train.py", found)
        return f"{type(error).__module__}.{type(error).__name__}: {error}"
    return "\n".join([report((1, 1, 1_800_000_000), (0, -15, 1_800_000_001)),
                      report((1, -9, 1_800_000_000))])


def masked(text):
    """Text with what changes from run to run (time, host, pids) masked."""
    text = re.sub(r"\d{4}-\d\d-\d\d_\d\d:\d\d:\d\d", "TIME", text)
    text = re.sub(r"(host +: )\S+", r"\1HOST", text)
    return re.sub(r"(pid: |PID )\d+", r"\1N", text)


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
    assert kinds <= set(CHECKS), kinds - set(CHECKS)


def check_output(lines, stem, tmp_path):
    shown = outputs(stem)
    for line in lines:
        assert line in shown, f"{stem} does not show {line!r}"


def check_live(lines, kind, tmp_path):
    real = provoke(kind, tmp_path)
    for line in lines:
        assert line in real, (line, real)


def check_render(lines, cls, tmp_path):
    assert cls == "ChildFailedError"
    real = masked(torchrun_reports())
    for line in lines:
        assert masked(line) in real, (line, real)


def check_format(lines, log, tmp_path):
    # A real torchrun's output holds the line, and the installed torch
    # holds its message as a format string.
    with open(os.path.join(LOGS, log)) as f:
        text = f.read()
    for line in lines:
        assert line in text, (line, log)
        module, cls = line.split(": ", 1)[0].rsplit(".", 1)
        assert getattr(sys.modules[module], cls)
    for phrase in searched("format", lines):
        assert phrase in torch_found(), phrase


def check_source(lines, paths, tmp_path):
    texts = source_texts(paths)
    for line in lines:
        assert any(flat(line) in text for text in texts), (line, paths)


def check_absent(lines, path, tmp_path):
    # The page says these lines are not in the installed CPU build.
    assert path.endswith(".cpp") and not any(
        os.path.basename(path) in files for _, _, files in os.walk(TORCH))
    found = set(searched("absent", lines)) & torch_found()
    assert not found, f"in the installed torch now, cite: {found}"
    # ... while the class that prints them is declared there.
    header = os.path.join(TORCH, "include", "torch", "csrc",
                          "distributed", "c10d",
                          os.path.basename(path)[:-4] + ".hpp")
    with open(header) as f:
        assert "getNCCLWatchdogTimeoutErrorMsg" in f.read()


def check_nccl(lines, header, tmp_path):
    # torch wraps NCCL's error: its frame is in the installed header
    # (C10D_NCCL_CHECK); the rest (NCCLUtils.cpp of the CUDA build, NCCL's
    # own library) is not in the installed CPU build.
    with open(os.path.join(TORCH, "include", "torch", "csrc",
                           "distributed", "c10d", header)) as f:
        text = flat(f.read())
    assert 'std::string err = "NCCL error in: "' in text
    assert "TORCH_CHECK_WITH(DistBackendError, false, err);" in text
    assert lines[0].startswith(
        "torch.distributed.DistBackendError: NCCL error in: ")
    assert torch.distributed.DistBackendError
    phrases = searched("nccl", lines)
    assert len(phrases) == 3 and not set(phrases) & torch_found(), phrases


CHECKS = {"output": check_output, "live": check_live,
          "render": check_render, "format": check_format,
          "source": check_source, "absent": check_absent,
          "nccl": check_nccl}


@pytest.mark.parametrize("lines,kind,arg", quotes())
def test_quoted_message_is_the_real_one(lines, kind, arg, tmp_path):
    CHECKS[kind](lines, arg, tmp_path)


def test_the_static_rendezvous_waits_600_s_by_default():
    from torch.distributed.elastic.rendezvous import static_tcp_rendezvous
    assert static_tcp_rendezvous._default_timeout_seconds == 600
    assert "(600 s by default; here `--rdzv-conf timeout=5`)" in flat(
        section("It crashed"))
    # ... and the quoted run was that one (its log's writer).
    with open(os.path.join(LOGS, "launch_logs.py")) as f:
        assert '"--rdzv-conf", "timeout=5"' in f.read()


def test_a_gloo_job_that_writes_no_dump_has_none(tmp_path):
    # Step 0: gloo writes no dump itself, however the hang ends. The
    # mismatched ranks ran with TORCH_FR_DUMP_TEMP_FILE set: each timed
    # out, caught it, then ended on the uncaught error.
    assert ("a job that writes none has none, however the hang ends (a "
            "gloo timeout, caught or not, writes nothing)"
            ) in flat(section("Step 0"))
    mismatched(tmp_path)
    assert _DUMPS == []


def test_the_dump_file_is_a_prefix_with_the_rank_appended(tmp_path,
                                                           monkeypatch):
    assert ("`TORCH_FR_DUMP_TEMP_FILE=/tmp/fr/rank_`. It is a prefix: each "
            "rank's dump is that name with the rank appended "
            "(`/tmp/fr/rank_0`") in flat(section("Step 0"))
    # NCCL's writer (the installed header) ...
    with open(os.path.join(TORCH, "include", "torch", "csrc", "distributed",
                           "c10d", "FlightRecorder.hpp")) as f:
        assert "filename_ = c10::str(namePrefix, rank);" in f.read()
    # ... and the book's scripts, on gloo.
    from ddpdemo import launch
    monkeypatch.setenv(launch.DUMP_VAR, str(tmp_path / "rank_"))
    launch.dump_flight_recorder(3)
    assert os.listdir(tmp_path) == ["rank_3"]


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


def page_links(text):
    """The pages a page's Markdown links go to, by file name."""
    return re.findall(r"\]\((?!https?:)([^)#]*\.(?:ipynb|md))\)", text)


@pytest.mark.parametrize("page", ["glossary.md", "triage.md"])
def test_links_go_to_sections_that_exist(page):
    text = read(page)
    assert "{doc}" not in text, f"{page} links to a whole chapter by {{doc}}"
    targets = refs(text)
    assert targets, f"{page} links to nothing"
    missing = sorted(set(targets) - labels())
    assert missing == [], f"{page} links to labels nobody defines"
    pages = set(page_links(text))
    assert pages <= set(os.listdir(BOOK)) | PENDING, pages


TRIAGE = ["It hangs", "It crashed with", "The numbers look wrong",
          "Every line is printed N times", "Checkpoint and resume",
          "Memory and devices", "It is slow"]


def entries():
    """[(section, entry)]: each bold-headed entry of the triage page, its
    quotes and text included."""
    found = []
    for title in TRIAGE:
        found += [(title, entry) for entry in
                  re.split(r"\n(?=\*\*)", section(title))
                  if entry.startswith("**")]
    return found


def test_the_triage_page_is_keyed_on_what_the_reader_sees():
    headings = re.findall(r"(?m)^## (.*)$", read("triage.md"))
    assert headings[0] == "Three rules behind most entries"
    assert headings[1].startswith("Step 0")
    assert headings[2:] == TRIAGE


def test_every_entry_links_the_home_of_its_lesson():
    assert len(entries()) > 40
    for title, entry in entries():
        assert refs(entry) or page_links(entry), (title, entry[:60])


def test_each_rule_links_its_entries_and_a_section():
    rules = re.findall(r"(?ms)^\d\. (.*?)(?=^\d\. |\Z)",
                       section("Three rules"))
    assert len(rules) == 3
    for rule in rules:
        own = [r for r in refs(rule) if r.startswith("triage-")]
        assert own and set(own) <= labels(), rule
        assert [r for r in refs(rule) if not r.startswith("triage-")] \
            or page_links(rule), rule


@pytest.mark.parametrize("where,words", [
    # Issue 44's six cases, each answered by an entry of its section.
    ("Every line is printed N times", ["progress bar, once per rank"]),
    ("Memory and devices", ["GPU 0 from every rank", "set_device",
                            "device_ids", "map_location"]),
    ("Checkpoint and resume", ['"module.0.weight"', "`module.`"]),
    ("Checkpoint and resume", ["weights differ after resuming"]),
    ("It hangs", ["NaN loss", "early stopping", "`continue`", "`break`",
                  "rule 2"]),
    ("It crashed with", ["`all_gather` of a different number of boxes",
                         "rule 1"])])
def test_the_issues_six_cases_have_their_entry(where, words):
    assert any(all(w in flat(entry) for w in words)
               for title, entry in entries() if title == where), words


def test_the_triage_page_comes_right_after_the_introduction():
    from ddpdemo.book.i18n import toc_names
    names = toc_names()
    assert names[:2] == ["book/intro", "book/triage"]
