"""Shared plumbing for every engine method: progress callbacks, cancellation and input errors.

Long computations take ``progress(done, total, message)`` and a ``threading.Event`` named ``cancel``;
they call :func:`check_cancel` between stages so the UI can stop them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

Progress = Callable[[float, float, str], None]


class EngineError(ValueError):
    """Input the method cannot work with; the message is one line that says what and how to fix it."""


class Cancelled(RuntimeError):
    """Raised inside a computation when its cancel event is set."""


def no_progress(done: float, total: float, message: str) -> None:
    """Default progress sink: ignore."""


def check_cancel(cancel: threading.Event | None) -> None:
    """Raise :class:`Cancelled` if the run was asked to stop."""
    if cancel is not None and cancel.is_set():
        raise Cancelled("cancelled by the user")
