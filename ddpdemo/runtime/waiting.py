"""One way to wait for something with a deadline: poll a condition until
it holds or the time is up. Every bounded wait of the runtime that has no
blocking call of its own to bound (a process to die, a file to appear, an
engine to register) is this loop, so each says only what it waits for and
for how long. `value` waits for an answer that may be false (an exit
status, 0 included).
"""
import time


def until(condition, timeout, every=0.01):
    """Call condition() every `every` seconds until it returns something
    true (returned) or `timeout` seconds have passed (the last false value
    is returned). condition is called at least once, and once more at
    the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(min(every, max(0.0, deadline - time.monotonic())))


def value(fetch, timeout, every=0.01):
    """Call fetch() every `every` seconds until it returns something other
    than None (returned: 0 and False count, so an exit status 0 is an
    answer, not "not yet"), or `timeout` seconds have passed (None)."""
    found = []

    def known():
        found[:] = [fetch()]
        return found[0] is not None

    until(known, timeout, every)
    return found[0]
