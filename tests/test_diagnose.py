"""ddpdemo.diagnose on Flight Recorder dumps recorded from real gloo groups
(tests/data/fr_gloo_2ranks.pkl, as tests/test_ledger.py), then on a live
hang: the answer is read from the error, and the check never gives it
away. Then a page's own list of fixes, and the jobs of "Diagnose these"
(ddpdemo.examples.puzzles) on live ranks."""
import os
import pickle

import pytest
import torch.distributed as dist

import ddpdemo
import ddpdemo.examples.puzzles as puzzles
from ddpdemo import diagnose
from ddpdemo.runtime.ledger import Ledger

pytestmark = pytest.mark.timeout(120)
DATA = os.path.join(os.path.dirname(__file__), "data", "fr_gloo_2ranks.pkl")


@pytest.fixture(scope="module")
def recorded():
    with open(DATA, "rb") as f:
        return pickle.load(f)


def test_parting_is_the_first_row_where_the_ranks_differ(recorded):
    # Rank 0 alone reached #3; in the other dump the ops differ at #1.
    assert diagnose.parting(Ledger(2, recorded["lonely"])) == 3
    assert diagnose.parting(Ledger(2, recorded["mismatch"])) == 1
    agreeing = {0: recorded["lonely"][1], 1: recorded["lonely"][1]}
    assert diagnose.parting(Ledger(2, agreeing)) is None


def puzzle(recorded):
    error = ddpdemo.HangError([0], 2, 2,
                              ledger=Ledger(2, recorded["lonely"]))
    return diagnose.Diagnosis(error, fix=diagnose.digest("a"))


def test_check_says_which_parts_are_right_and_nothing_more(recorded):
    quiz = puzzle(recorded)
    blank = quiz.check()
    assert not blank.right and blank.count("not answered yet") == 3
    wrong = quiz.check(stuck=[1], seq=2, fix="b")
    assert not wrong.right and wrong.endswith("0 of 3 right.")
    half = quiz.check(stuck=0, seq=2, fix="a")
    assert half.splitlines() == ["stuck ranks: right",
                                 "collective number: not right, look again",
                                 "fix: right", "2 of 3 right."]
    right = quiz.check(stuck=[0], seq=3, fix="a")
    assert right.right and right.endswith("All right.")
    for verdict in (blank, wrong, half, right):   # never the answer
        assert "3" not in verdict.replace("of 3", "")
        assert diagnose.FIXES["a"] not in verdict


def test_the_fix_is_not_in_clear():
    assert len({diagnose.digest(f) for f in diagnose.FIXES}) == \
        len(diagnose.FIXES)
    assert all(diagnose.digest(f) != f for f in diagnose.FIXES)
    assert "a)" in diagnose.show_fixes() and "f)" in diagnose.show_fixes()


def lonely_barrier():
    if dist.get_rank() == 0:
        dist.barrier()


def test_a_live_hang(cluster):
    with pytest.raises(ddpdemo.HangError) as caught:
        cluster.run(lonely_barrier, timeout=2)
    quiz = diagnose.Diagnosis(caught.value, fix=diagnose.digest("f"))
    assert quiz.stuck == [0] and quiz.seq is not None
    assert quiz.check(stuck=[0], seq=quiz.seq, fix="f").right
    assert not quiz.check(stuck=[0], seq=quiz.seq + 1, fix="f").right


# A page's own list of fixes ("Diagnose these", book/diagnose.ipynb).
PAGE = puzzles.FIXES


def test_the_chapters_digests_and_list_are_unchanged():
    # Chapters 5 and 8 store these digests and this list in their cells.
    assert (diagnose.digest("a"), diagnose.digest("d")) == \
        ("95c62c677be4", "e5412205d119")
    assert diagnose.show_fixes() == diagnose.show_fixes(diagnose.FIXES)
    assert diagnose.show_fixes().splitlines()[0] == \
        "a) build a loader that only rank 0 uses with rank=-1 (chapter 5)"


def test_a_pages_own_fixes_are_shown_and_digested_apart():
    assert diagnose.show_fixes(PAGE).splitlines() == \
        [f"{letter}) {text}" for letter, text in PAGE.items()]
    own = {diagnose.digest(f, PAGE) for f in PAGE}
    assert len(own) == len(PAGE)
    # One letter, two lists, two digests: a chapter's digest says nothing
    # about the page's answer.
    assert not own & {diagnose.digest(f) for f in diagnose.FIXES}
    assert diagnose.digest("z", PAGE) not in own


def test_check_against_a_pages_fixes_never_gives_the_answer(recorded):
    error = ddpdemo.HangError([0], 2, 2,
                              ledger=Ledger(2, recorded["lonely"]))
    quiz = diagnose.Diagnosis(error, fix=diagnose.digest("d", PAGE),
                              fixes=PAGE)
    wrong = quiz.check(stuck=[0], seq=3, fix="b")
    assert not wrong.right and wrong.splitlines()[2] == \
        "fix: not right, look again"
    # The chapters' list has a "d" too: its digest is not the page's.
    chapters = diagnose.Diagnosis(error, fix=diagnose.digest("d"))
    assert not chapters.check(stuck=[0], seq=3, fix="b").right
    assert chapters.check(stuck=[0], seq=3, fix="d").right
    right = quiz.check(stuck=[0], seq=3, fix="d")
    assert right.right and right.endswith("All right.")
    for verdict in (quiz.check(), wrong, right):
        assert not any(text in verdict for text in PAGE.values())
        assert "3" not in verdict.replace("of 3", "")
        assert "d)" not in verdict and "[0]" not in verdict


# What each of the page's jobs leaves, as its solutions say: the stuck
# ranks, the collective number where the ranks part (counted from the
# group's last collective before the run) and the right fix.
PUZZLES = {puzzles.train_and_log: ([0, 1], 3, "b"),
           puzzles.train_with_early_stop: ([1], 4, "d"),
           puzzles.train_and_count: ([0, 1], 2, "f")}


def collectives_so_far(cluster):
    """The group's last collective number on rank 0 (0 for a new group)."""
    return max((e["seq"] for e in cluster.ledger().by_rank[0]), default=0)


@pytest.mark.parametrize("job", list(PUZZLES), ids=lambda job: job.__name__)
def test_each_puzzle_hangs_as_its_solution_says(cluster, job):
    """ddpdemo.examples.puzzles on live gloo ranks: the hang, read as the
    page reads it, then the fixed job, which finishes."""
    stuck, seq, fix = PUZZLES[job]
    before = collectives_so_far(cluster)
    with pytest.raises(ddpdemo.HangError) as caught:
        cluster.run(job, timeout=3)
    quiz = diagnose.Diagnosis(caught.value, diagnose.digest(fix, PAGE),
                              PAGE)
    assert (quiz.stuck, quiz.seq) == (stuck, before + seq)
    assert quiz.check(stuck=stuck, seq=before + seq, fix=fix).right
    others = [f for f in PAGE if f != fix]
    assert not any(quiz.check(stuck=stuck, seq=before + seq, fix=f).right
                   for f in others)
    assert len(cluster.run(job, fixed=True, timeout=20)) == 2
