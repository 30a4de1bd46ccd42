"""`python -m ddpdemo.explain`: the command's short name. The code lives
in ddpdemo.triage.explain, with the other commands that read a reader's
job; this module re-exports it (the same functions), so chapter 10's
`from ddpdemo import explain` and the triage page's command keep one
name."""
import sys

from .triage.explain import (
    SECTIONS, SITE, explain, findings, link, main, render)

__all__ = ["SECTIONS", "SITE", "explain", "findings", "link", "main",
           "render"]

if __name__ == "__main__":
    sys.exit(main())
