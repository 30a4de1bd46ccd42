"""The chapters' name for ddpdemo.runtime.errors (HangError and RankError,
chapter 0 on).

It lives with the runtime, which a hang report needs. This name is the
same module, not a copy (`ddpdemo.errors is ddpdemo.runtime.errors`),
so what a chapter reads or patches is what the runtime uses.
"""
import sys

from .runtime import errors

sys.modules[__name__] = errors
