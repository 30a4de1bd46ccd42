"""Progress for a person waiting on engines, silence for nbval and CI.

Starting four ranks on a 2-core laptop takes seconds; a reader should see
them arrive. Stored notebook outputs must not contain that chatter, so it
is off when ipyparallel's IPP_NONINTERACTIVE (or CI) is set. Chapter 0.
"""
import os
import sys
import time


def interactive():
    """True unless IPP_NONINTERACTIVE or CI asks for quiet."""
    return not (os.environ.get("IPP_NONINTERACTIVE")
                or os.environ.get("CI"))


class Progress:
    """One self-overwriting status line on stderr."""

    def __init__(self, title):
        self.title = title
        self.start = time.monotonic()
        self.enabled = interactive()
        self._last = None

    def update(self, text):
        if self.enabled and text != self._last:
            self._last = text
            sys.stderr.write(f"\r{self.title}: {text} "
                             f"({time.monotonic() - self.start:.1f} s)   ")
            sys.stderr.flush()

    def done(self, text):
        if self.enabled:
            sys.stderr.write(f"\r{self.title}: {text} in "
                             f"{time.monotonic() - self.start:.1f} s   \n")
            sys.stderr.flush()
