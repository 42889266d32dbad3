"""The built-in simulated endpoint's lifetime, owned by jobs as every other run is (issue 27).

The server itself is :mod:`benchloupe.prompts.simulated` (one per process, shared by reference count). It runs
while the app has a workspace open whose BenchFill endpoints are the simulated ones (:class:`SimulatedHold`), while
``benchloupe fill`` runs on them (:func:`serving`), and while a session runs (``jobs.fill.run_fill`` holds it
too). The faces also ask here whether an endpoint is the simulated one, so neither imports the prompts layer.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from benchloupe.prompts import simulated
from benchloupe.prompts.simulated import is_simulated, simulated_roles, uses_simulated  # noqa: F401 - the faces' questions


@contextmanager
def serving() -> Iterator[None]:
    """Hold the simulated endpoint while the body runs (started here unless this process already runs it)."""
    with simulated.serving():
        yield


class SimulatedHold:
    """The app's hold on the simulated endpoint: :meth:`take` starts (or shares) it when the endpoints in effect for
    a database are the simulated ones; :meth:`close`, on exit, drops it and makes a later :meth:`take` a no-op (a
    worker still looking when the app quits must not start a server nobody stops). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.held = self._closed = False

    def take(self, db_path) -> bool:
        """Hold the server if *db_path*'s endpoints use it; whether it is held. Reads the database and imports the
        fill job (the openai client): call it from a worker thread."""
        from benchloupe.jobs.fill import uses_simulated as endpoints_of_db_use_it

        if not endpoints_of_db_use_it(db_path):
            return False
        with self._lock:
            if not (self._closed or self.held):
                simulated.acquire()
                self.held = True
            return self.held

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self.held:
                self.held = False
                simulated.release()
