"""ddpdemo.diagnose on Flight Recorder dumps recorded from real gloo groups
(tests/data/fr_gloo_2ranks.pkl, as tests/test_ledger.py), then on a live
hang: the answer is read from the error, and the check never gives it
away."""
import os
import pickle

import pytest
import torch.distributed as dist

import ddpdemo
from ddpdemo import diagnose
from ddpdemo.ledger import Ledger

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
