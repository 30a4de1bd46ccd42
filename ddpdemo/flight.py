"""The chapters' name for ddpdemo.runtime.flight (torch's Flight Recorder on
every rank, chapter 5).

It lives with the runtime, which a hang report needs. This name is the
same module, not a copy (`ddpdemo.flight is ddpdemo.runtime.flight`),
so what a chapter reads or patches is what the runtime uses.
"""
import sys

from .runtime import flight

sys.modules[__name__] = flight
