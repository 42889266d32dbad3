"""Job functions for the TUI tests: module-level, so that a job's child process (jobs/process.py) can import
them; nothing heavy is imported here."""

from __future__ import annotations

import os
import time


def whoami(progress, cancel) -> dict:
    """The job's process id and its parent's."""
    progress(1, 1, "asked")
    return {"message": f"pid {os.getpid()}", "pid": os.getpid()}


def spin(progress, cancel, seconds: float = 2.0, check_cancel: bool = True) -> dict:
    """Burn *seconds* of this process's CPU in pure Python (it holds the GIL), reporting as fast as it can:
    the worst case for the UI of a job in a thread."""
    t0, i = time.process_time(), 0
    while time.process_time() - t0 < seconds:
        if check_cancel and cancel.is_set():
            from benchloupe.engine.common import Cancelled

            raise Cancelled("cancelled")
        i += 1
        progress(i % 5000, 5000, f"annotating child {i}")
    return {"message": f"sent {i} progress reports", "cpu_s": time.process_time() - t0, "pid": os.getpid()}


def wait_for_cancel(progress, cancel, limit: float = 120.0) -> dict:
    """Report now and then until cancelled (or *limit* s)."""
    t0 = time.monotonic()
    while not cancel.is_set() and time.monotonic() - t0 < limit:
        progress(1, 2, f"waiting {os.getpid()}")
        cancel.wait(0.02)
    from benchloupe.engine.common import Cancelled

    raise Cancelled("cancelled")


def stubborn(progress, cancel) -> dict:
    """Ignores cancel and SIGTERM: only SIGKILL ends it."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        progress(1, 2, f"stubborn {os.getpid()}")
        time.sleep(0.02)
