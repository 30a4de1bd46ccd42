"""The chapters' name for ddpdemo.runtime.devices (a rank's device and gloo's
network interface, chapters 0 and 1).

It lives with the runtime, whose engines use it. This name is the
same module, not a copy (`ddpdemo.devices is ddpdemo.runtime.devices`),
so what a chapter reads or patches is what the runtime uses.
"""
import sys

from .runtime import devices

sys.modules[__name__] = devices
