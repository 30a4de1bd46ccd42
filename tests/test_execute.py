"""ddpdemo.book.execute: a refresh keeps stored text that differs only where
the sanitiser masks it, and --check runs notebooks without storing."""
import os
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from ddpdemo.book import execute

pytestmark = pytest.mark.fast

ROOT = execute.ROOT


def notebook(*outputs, source="print('x')"):
    return new_notebook(cells=[new_code_cell(source, outputs=list(outputs))])


def stream(text):
    return new_output("stream", name="stdout", text=text)


def result(text):
    return new_output("execute_result", data={"text/plain": text},
                      execution_count=1)


def test_sanitizers_are_the_nine_nbval_uses():
    rules = execute.sanitizers()
    assert len(rules) == 9
    # torchrun's report: the time and host of each failure, and its rules,
    # as wide as a line that holds a pid
    assert execute.sanitize(
        "time      : 2026-11-29_01:10:03\nhost      : node7\n" + "=" * 57,
        rules) == "time      : <time>\nhost      : <host>\n==="
    masked = execute.sanitize("took 1.25 s, pid 42, port 7, 3.5 GB/s, "
                              "rank 3", rules)
    assert masked == "took <T> s, pid <PID>, port <PORT>, <BW> GB/s, rank 3"
    # torchrun's failure report and a rendezvous endpoint (chapter "When
    # the job itself fails"); an exit code beside them stays.
    masked = execute.sanitize("exitcode  : -9 (pid: 1234)  (SIGKILL), "
                              "received by PID 1234, 127.0.0.1:5678", rules)
    assert masked == ("exitcode  : -9 (pid: <PID>)  (SIGKILL), "
                      "received by PID <PID>, 127.0.0.1:<PORT>")
    # An interactive figure's timings block, and nothing beside it.
    block = ('<script type="application/json" data-timings>[0.25, 1e-3]'
             '</script><p>rank 1 waited 0.25 s</p>')
    assert execute.sanitize(block, rules) == (
        '<script type="application/json" data-timings><TIMINGS></script>'
        '<p>rank 1 waited 0.25 s</p>')


def test_refresh_keeps_stored_text_that_differs_only_in_timings():
    rules = execute.sanitizers()
    old = notebook(stream("took 1.2 s\n"), result("'2.0 GB/s'"))
    new = notebook(stream("took 3.4 s\n"), result("'9.1 GB/s'"))
    kept = execute.keep_unchanged(old, new, rules)
    assert kept.cells[0].outputs[0]["text"] == "took 1.2 s\n"
    assert kept.cells[0].outputs[1]["data"]["text/plain"] == "'2.0 GB/s'"


def test_refresh_stores_a_real_change():
    rules = execute.sanitizers()
    old = notebook(stream("took 1.2 s, sum 4\n"))
    new = notebook(stream("took 3.4 s, sum 5\n"))
    kept = execute.keep_unchanged(old, new, rules)
    assert kept.cells[0].outputs[0]["text"] == "took 3.4 s, sum 5\n"
    # A changed cell source never keeps old text, even if it would match.
    old = notebook(stream("took 1.2 s\n"), source="a")
    new = notebook(stream("took 3.4 s\n"), source="b")
    assert execute.keep_unchanged(old, new, rules).cells[0].outputs[0][
        "text"] == "took 3.4 s\n"


def run_execute(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", execute.__name__, *args],
                          capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


def test_nccl_outputs_are_never_stored():
    done = run_execute("--backend", "nccl", "book/live_cluster.ipynb",
                       timeout=60)
    assert done.returncode == 2
    assert "--check" in done.stderr


def test_check_stops_at_a_failing_cell_and_stores_nothing(tmp_path):
    path = tmp_path / "failing.ipynb"
    nb = new_notebook(cells=[new_code_cell("assert 1 + 1 == 3, 'arith'"),
                             new_code_cell("print('never')")])
    nbformat.write(nb, path)
    before = path.read_bytes()
    done = run_execute("--check", str(path), timeout=120)
    assert done.returncode == 1
    assert "FAILED" in done.stdout and "arith" in done.stderr
    assert path.read_bytes() == before


@pytest.mark.timeout(600)
def test_check_on_gloo_runs_chapter_0_and_leaves_it_untouched():
    path = ROOT / "book" / "live_cluster.ipynb"
    before = path.read_bytes()
    done = run_execute("--backend", "gloo", "--check", str(path))
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "checking" in done.stdout and "done in" in done.stdout
    assert path.read_bytes() == before


def test_cell_seconds_reads_nbclient_timing_metadata():
    nb = notebook(source="import time\ntime.sleep(1)")
    nb.cells[0].metadata["execution"] = {
        "iopub.execute_input": "2026-11-22T05:00:00.250000Z",
        "shell.execute_reply": "2026-11-22T05:00:01.750000Z"}
    nb.cells.append(new_code_cell("never run"))
    assert execute.cell_seconds(nb) == [(1.5, 1, "import time")]


def test_nccl_check_without_enough_gpus_says_so_in_one_line(tmp_path):
    # On this CPU build torch sees no GPU: the command must end before any
    # kernel starts (a notebook that would fail at once shows it did not
    # run), with one line that says how many GPUs it needs and sees.
    nb = tmp_path / "fails.ipynb"
    nbformat.write(notebook(source="raise SystemExit('ran')"), nb)
    assert execute.visible_gpus() < execute.NCCL_GPUS
    done = subprocess.run(
        [sys.executable, "-m", "ddpdemo.book.execute", "--backend", "nccl",
         "--check", str(nb)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0] == (f"--backend nccl needs {execute.NCCL_GPUS} GPUs (one "
                        "per rank of the book's largest cluster); this "
                        "machine's torch sees 0: nothing was run")


def test_outputs_that_differ_between_cpu_kernels_are_not_stored(tmp_path):
    """A notebook that prints which CPU kernels torch runs is refused:
    its output is one thing under ATEN_CPU_CAPABILITY=default and
    another on this machine's own kernels, as a randn value or a count
    of differing floats would be. The file stays as it was."""
    path = tmp_path / "kernels.ipynb"
    nbformat.write(notebook(source=(
        "import torch\nprint(torch.backends.cpu.get_cpu_capability())")),
        path)
    before = path.read_text()
    done = run_execute(str(path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "differ between the CPU capabilities default and native" in \
        done.stderr and "Cells: 1 (import torch)" in done.stderr
    assert path.read_text() == before


def test_outputs_the_same_on_every_cpu_are_stored(tmp_path):
    path = tmp_path / "same.ipynb"
    nbformat.write(notebook(source=(
        "import torch\nprint(torch.arange(4).sum().item())")), path)
    done = run_execute(str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    stored = nbformat.read(path, as_version=4)
    assert stored.cells[0].outputs[0]["text"] == "6\n"


def test_the_capability_reaches_the_kernel():
    with execute.capability("default"):
        assert os.environ["ATEN_CPU_CAPABILITY"] == "default"
        with execute.capability("native"):
            assert "ATEN_CPU_CAPABILITY" not in os.environ
        assert os.environ["ATEN_CPU_CAPABILITY"] == "default"


def test_the_tests_run_torch_on_the_kernels_conftest_names():
    """The root conftest.py sets ATEN_CPU_CAPABILITY=default (unless it
    was set), and a process the tests start, as nbval's kernels and
    their ranks are, runs torch on those kernels."""
    name = os.environ["ATEN_CPU_CAPABILITY"]
    done = subprocess.run(
        [sys.executable, "-c", "import torch; "
         "print(torch.backends.cpu.get_cpu_capability())"],
        capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == name.upper()


def test_a_stream_sent_in_two_chunks_is_the_same_output():
    """nbval joins consecutive chunks of one stream; so does the
    comparison between two CPU capabilities' runs."""
    rules = execute.sanitizers()
    one = notebook(stream("a\nb\n"))
    two = notebook(stream("a\n"), stream("b\n"))
    assert execute.differing_cells(one, two, rules) == []
    other = notebook(stream("a\n"), stream("c\n"))
    assert execute.differing_cells(one, other, rules) == [(1, "print('x')")]


def test_a_stored_stream_is_one_output():
    nb = execute.clean(notebook(stream("a\n"), stream("b\n"),
                                result("'r'"), stream("c\n")))
    outputs = nb.cells[0].outputs
    assert [o.get("text") for o in outputs] == ["a\nb\n", None, "c\n"]
