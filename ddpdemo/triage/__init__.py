"""The commands that read a reader's own job, apart from the lessons:
they run on what the reader brings, not on the book's clusters.

    explain    after a hang: `python -m ddpdemo.explain` reads what the
               job left behind (Flight Recorder dumps, stacks,
               torchrun's output) and names where the ranks part and
               the pattern the book shows (the triage page's step 0)
    jobfiles   explain's input side: which file holds what, read
    patterns   the hangs the book shows, recognised on a parting or on
               stacks alone, each with its section
    launchlog  what torchrun's output alone tells: a launch that failed
               before any rank ran, a rank killed by a signal
    check      before a run: `python -m ddpdemo.check` reads a training
               script's ast and names the book's pitfalls it can see;
               checkread (one file), checkvalues (a value per rank),
               checkflow (each rank's collectives), checkranks and
               checkrules (the rules)

What it may import: the standard library and torch; of ddpdemo, only
ddpdemo.runtime (the ledger's divergence and the hang report's words are
the runtime's, so a hang in the book and one in a reader's job are read
the same way). Never the top level's lessons, never ddpdemo.book, so the
commands work in a bare `pip install ddpdemo` and load no notebook
machinery. tests/test_imports.py checks this.

This file imports nothing.
"""
