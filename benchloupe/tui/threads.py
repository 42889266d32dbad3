"""The workbench's thread workers run in daemon threads, so quitting never waits for them (issue 32 point 5).

Textual runs a thread worker in the event loop's default executor, a ``ThreadPoolExecutor``; ``asyncio.run``
ends with ``loop.shutdown_default_executor()`` and the interpreter's exit joins every pool thread, so ``q`` a
few seconds after opening left a blank terminal for 6-8 s while the engine's warm-up (importing the analyses
registry, starting the forkserver) finished, and after a long session 2-5 s behind a slow read. Nothing a
worker does needs to outlive the app except a decision being written, and the app waits for those before it
exits (``BenchloupeApp.action_quit``: writes take milliseconds).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor


class DaemonExecutor(ThreadPoolExecutor):
    """An executor whose every task runs in a daemon thread of its own, and whose shutdown waits for none.

    A subclass of ``ThreadPoolExecutor`` only because ``loop.set_default_executor`` requires one; none of the
    pool's machinery (its queue, its threads joined at exit) is used."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to whoever awaits the future
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=run, name="benchloupe-worker", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to join: the threads are daemons (the app waits for its queued writes before it exits)."""
