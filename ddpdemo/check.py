"""`python -m ddpdemo.check`: the command's short name. The code lives in
ddpdemo.triage.check (with checkflow and checkrules), beside the other
commands that read a reader's own job; this module re-exports it."""
import sys

from .triage.check import SITE, BadInput, check, link, main, report

__all__ = ["SITE", "BadInput", "check", "link", "main", "report"]

if __name__ == "__main__":
    sys.exit(main())
