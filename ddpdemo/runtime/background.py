"""One call at a time on a thread of its own, whose end (and error) the
caller collects later: how ddpdemo.runtime.engines launches the next
spares while a run is on the ranks (chapter 0, "How the live cluster
works").
"""
import threading


class Background:
    """run(fn) starts fn on a thread; settle() waits for it (bounded by
    `timeout` s) and raises its error there, where the caller sees it."""

    def __init__(self, timeout, name="ddpdemo-background"):
        self.timeout, self.name = timeout, name
        self._running = None    # (thread, [its error])

    def run(self, fn, *args):
        self.settle()
        failed = []

        def call():
            try:
                fn(*args)
            except BaseException as exc:    # raised by settle
                failed.append(exc)

        thread = threading.Thread(target=call, name=self.name, daemon=True)
        self._running = thread, failed
        thread.start()

    def settle(self):
        """Wait for the call under way, if any (not from its own thread)."""
        if (self._running is None
                or self._running[0] is threading.current_thread()):
            return
        thread, failed = self._running
        thread.join(self.timeout)
        if thread.is_alive():
            raise TimeoutError(f"{self.name} took over {self.timeout:g} s")
        self._running = None
        if failed:
            raise failed[0]

    def forget(self):
        """Settle, dropping an error: the caller is stopping anyway."""
        try:
            self.settle()
        except Exception:
            self._running = None
