"""The chapters' name for ddpdemo.runtime.ledger (the Flight Recorder's
ledger, chapter 5).

It lives with the runtime, which a hang report needs. This name is the
same module, not a copy (`ddpdemo.ledger is ddpdemo.runtime.ledger`),
so what a chapter reads or patches is what the runtime uses.
"""
import sys

from .runtime import ledger

sys.modules[__name__] = ledger
