"""ddpdemo.errors: stack dumps parsed, paths shortened, messages that
name the ranks. A synthetic faulthandler dump stands in for a real one
(tests/test_cluster.py checks real dumps from stuck ranks)."""
import faulthandler
import linecache

from ddpdemo import ledger
from ddpdemo.runtime.errors import (Failure, HangError, RankError,
                                    format_stack, in_module, parse_stack,
                                    short_path)
from ddpdemo.runtime import engine

import pytest

pytestmark = pytest.mark.fast

SITE = "/venv/lib/python3.11/site-packages"
DUMP = f'''Thread 0x00007f1 (most recent call first):
  File "/repo/ddpdemo/runtime/engine.py", line 40 in watch
  File "/usr/lib/python3.11/threading.py", line 982 in run

Current thread 0x00007f2 (most recent call first):
  File "{SITE}/torch/distributed/distributed_c10d.py", line 5356 in barrier
  File "{SITE}/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/tmp/ipykernel_4242/123456.py", line 3 in validate
  File "/repo/ddpdemo/runtime/engine.py", line 180 in call
  File "<string>", line 1 in <module>
  File "{SITE}/ipyparallel/engine/kernel.py", line 157 in do_apply
'''


def test_parse_stack_takes_the_thread_running_the_readers_code():
    # The guard thread also runs in engine.py; it must not be chosen.
    frames = parse_stack(DUMP)
    assert [f[2] for f in frames] == ["validate", "wrapper", "barrier"]
    assert frames[0] == ("/tmp/ipykernel_4242/123456.py", 3, "validate")


def test_parse_stack_of_an_idle_engine_is_empty():
    assert parse_stack(DUMP.replace(" in call", " in idle")) == []


def test_short_path_hides_pids_and_install_locations():
    assert short_path("/tmp/ipykernel_4242/123456.py") == "<notebook cell>"
    assert short_path("<ranks 0123456789ab>") == "<%%ranks cell>"
    assert short_path(f"{SITE}/torch/distributed/c10d_logger.py") == \
        "torch/distributed/c10d_logger.py"
    assert short_path("/home/me/src/ddpdemo/ordering.py") == \
        "ddpdemo/ordering.py"


def test_format_stack_quotes_source_lines_it_can_read():
    name = "<ranks feedfacecafe>"
    linecache.cache[name] = (30, None, ["x = 1\n", "dist.barrier()\n"], name)
    text = format_stack([(name, 2, "<module>")])
    assert text.splitlines() == [
        '    File "<%%ranks cell>", line 2, in <module>',
        "        dist.barrier()"]


def test_hang_error_names_stuck_ranks_and_what_each_was_doing():
    error = HangError([2, 0], 5.0, 4, stacks={
        0: parse_stack(DUMP), 2: []})
    assert isinstance(error, TimeoutError)
    assert error.ranks == [0, 2]
    lines = str(error).splitlines()
    assert lines[0] == ("2 of 4 ranks did not finish within 5 s: "
                        "ranks [0, 2] (finished: ranks [1, 3]).")
    assert "rank 0 is blocked in barrier(), called from:" in lines
    assert ("rank 2 had not started this code yet "
            "(its engine was still busy)") in lines


def test_hang_error_without_a_dump_says_so():
    assert "rank 1: no stack available" in str(HangError([1], 3, 2))


def test_rank_error_lists_each_rank_and_the_blocked_ones():
    error = RankError({1: "ValueError: bad", 0: "process died (signal "
                       "SIGKILL)"}, blocked=[3, 2])
    assert isinstance(error, RuntimeError)
    assert list(error.errors) == [0, 1]
    assert error.blocked == [2, 3]
    assert str(error).splitlines() == [
        "2 rank(s) failed:",
        "  rank 0: process died (signal SIGKILL)",
        "  rank 1: ValueError: bad",
        "  still running, probably waiting for them: ranks [2, 3] "
        "(the cluster restarts them)"]


def test_a_report_without_its_ledger_says_why():
    """Where the ledger could not be built, both reports say so, with the
    reason (ddpdemo.runtime.outcome gives it), where the ledger would be.
    """
    said = ("No ledger: the ranks' Flight Recorder ledger could not be "
            "built (KeyError: 'entries').")
    hang = HangError([1], 5, 2, ledger_error="KeyError: 'entries'")
    assert str(hang).splitlines()[-2:-1] == [said]  # before the restart
    assert hang.ledger is None and hang.ledger_error == "KeyError: 'entries'"
    failed = RankError({1: "ValueError: bad"},
                       ledger_error="KeyError: 'entries'")
    assert str(failed).splitlines() == ["1 rank(s) failed:",
                                        "  rank 1: ValueError: bad", said]
    assert "No ledger" not in str(HangError([1], 5, 2))


def test_hang_summary_lists_each_stuck_ranks_calls():
    error = HangError([1], 5, 2, {1: parse_stack(DUMP)})
    assert error.summary().splitlines() == [
        str(error).splitlines()[0],
        "rank 1 is blocked in:",
        "    validate()  (<notebook cell>)",
        "    wrapper()  (c10d_logger.py)",
        "    barrier()  (distributed_c10d.py)"]


def test_parse_stack_recognises_the_real_engine_file(tmp_path):
    """No path is written out here: a real faulthandler dump taken inside
    the real engine.call, so moving engine.py keeps this test honest (a
    parser looking for the old path would return [] and the hang report
    would say "had not started this code yet")."""
    dump = tmp_path / "dump.txt"

    def readers_code():
        with open(dump, "w") as f:
            faulthandler.dump_traceback(f, all_threads=False)
        return 1

    assert engine.call(readers_code, (), {}) == 1
    frames = parse_stack(dump.read_text())
    assert [f[2] for f in frames][-1] == "readers_code"
    assert in_module(engine.__file__, engine)
    assert not in_module(__file__, engine)


def test_a_rank_on_another_prefix_is_matched_by_the_package_path():
    from ddpdemo.runtime.errors import package_path
    other = "/elsewhere/venv/src/" + package_path(engine.__file__)
    assert in_module(other, engine)
    # The ledger hides the engine's frames by the same reference.
    frames = [{"name": "barrier", "filename": "/x/torch/distributed/c.py"},
              {"name": "call", "filename": other},
              {"name": "step", "filename": "/tmp/ipykernel_1/2.py"},
              {"name": "train", "filename": "/tmp/ipykernel_1/2.py"}]
    assert ledger.site(frames) == "train > step"


def test_rank_error_keeps_each_failure_as_data():
    """Per rank, the exception's type, message and traceback text, as
    fields; the message is made from them (its first line, cut at 300)."""
    raised = Failure("ValueError", "bad input\nsecond line",
                     "Traceback (most recent call last):\n  ...\n")
    error = RankError({1: raised, 0: "process died (signal SIGKILL)"})
    assert error.failures[1] is raised
    assert error.failures[1].traceback.startswith("Traceback")
    assert error.failures[0] == Failure(None, "process died (signal "
                                              "SIGKILL)")
    assert error.errors == {0: "process died (signal SIGKILL)",
                            1: "ValueError: bad input"}
    assert "  rank 1: ValueError: bad input" in str(error).splitlines()
    long = Failure("KeyError", "x" * 400)
    assert len(long.line) == 300 and str(long) == long.line


def test_hang_summary_is_made_from_the_errors_data():
    # The summary's first line comes from the ranks and the timeout, not
    # from reading the message back.
    error = HangError([1], 5, 2, {1: parse_stack(DUMP)})
    error.args = ("a message rewritten by someone",)
    assert error.summary().splitlines()[0] == (
        "1 of 2 ranks did not finish within 5 s: rank 1 (finished: "
        "rank 0).")
