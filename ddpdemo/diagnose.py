"""Diagnosis exercises: read a real hang, name where it parts and the fix.

The reader gets a `HangError` that a chapter's own run raised (its stacks
and its Flight Recorder ledger), finds the ranks still stuck, the
collective number at which the ranks part, and the fix among `FIXES`, and
`Diagnosis.check` says which parts are right without giving the answer
away. The stuck ranks and the collective number come from the error
itself; the fix is the one judgment the error cannot make, so the chapter
gives it as a digest (`digest("a")`) rather than in clear. Introduced in
chapter 10's exercises (Evaluation). A page may bring its
own list of fixes ("Diagnose these", book/diagnose.ipynb, lists
ddpdemo.examples.puzzles.FIXES): `Diagnosis(error, fix, fixes)` and
`show_fixes(fixes)` take it, and its digests stand for a letter and its
text, so that one letter of two lists has two digests.
"""
import hashlib

# The fixes the book shows, one letter each (the same list in every
# exercise, so that the right one is not the only plausible one).
FIXES = {
    "a": "build a loader that only rank 0 uses with rank=-1 (chapter 5)",
    "b": "validate through ddp_model.module, not the DDP wrapper (chapter 8)",
    "c": "train inside Join([ddp_model]), or give every rank as many "
         "batches (chapter 8)",
    "d": "DDP(..., find_unused_parameters=True) (chapter 8)",
    "e": "save on rank 0 only, then dist.barrier() (chapter 8)",
    "f": "raise the group's timeout",
}


def digest(fix, fixes=None):
    """Twelve hex digits that stand for a fix's letter (of FIXES, or of a
    page's own `fixes`: then for the letter and its text)."""
    text = f"ddpdemo fix {fix}"
    if fixes is not None:
        text += f": {fixes.get(fix, '')}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def parting(ledger):
    """The first collective number at which the ranks' ledgers part: two
    ranks with different ops there, or a rank that never called it; None
    when they agree throughout. Read from what the ledger found
    (ddpdemo.runtime.ledger.Finding), so the exercise and the report cannot
    disagree."""
    found = ledger.finding
    return found.seq if found.kind in ("disagree", "missing") else None


class Diagnosis:
    """One exercise over a real `HangError`: `error.ranks` are the stuck
    ranks, `parting(error.ledger)` the collective number where the ranks
    part, and `fix` (a digest) the right letter of `FIXES`, or of the
    page's own `fixes` where it gives them."""

    def __init__(self, error, fix, fixes=None):
        self.error = error
        self.fix = fix
        self.fixes = fixes
        self.stuck = sorted(error.ranks)
        self.seq = parting(error.ledger) if error.ledger is not None else None

    def check(self, stuck=None, seq=None, fix=None):
        """Says, part by part, whether the answer is right: stuck (a rank
        or a list of ranks), seq (a collective number, a row of the
        ledger), fix (a letter of the fixes shown). Never says what is
        right."""
        if isinstance(stuck, int):
            stuck = [stuck]
        parts = [
            ("stuck ranks", stuck, stuck is not None
             and sorted(stuck) == self.stuck),
            ("collective number", seq, seq == self.seq),
            ("fix", fix, fix is not None
             and digest(fix, self.fixes) == self.fix),
        ]
        lines = [f"{name}: " + ("not answered yet" if given is None
                                else "right" if ok
                                else "not right, look again")
                 for name, given, ok in parts]
        self.right = all(ok for _, _, ok in parts)
        lines.append("All right." if self.right else
                     f"{sum(ok for *_, ok in parts)} of 3 right.")
        return Verdict("\n".join(lines), self.right)


class Verdict(str):
    """check()'s answer: prints as its lines; `.right` is True when every
    part is right."""

    def __new__(cls, text, right):
        verdict = super().__new__(cls, text)
        verdict.right = right
        return verdict

    def __repr__(self):
        return str(self)


def show_fixes(fixes=None):
    """The fixes to choose from, one a line: FIXES, or a page's own."""
    return "\n".join(f"{letter}) {text}"
                     for letter, text in (fixes or FIXES).items())
