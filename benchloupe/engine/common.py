"""Shared plumbing for every engine method: progress callbacks, cancellation and input errors.

Long computations take ``progress(done, total, message)`` and a ``threading.Event`` named ``cancel``;
they call :func:`check_cancel` between stages so the UI can stop them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import cache

Progress = Callable[[float, float, str], None]


class EngineError(ValueError):
    """Input the method cannot work with; the message is one line that says what and how to fix it."""


class Cancelled(RuntimeError):
    """Raised inside a computation when its cancel event is set."""


def no_progress(done: float, total: float, message: str) -> None:
    """Default progress sink: ignore."""


class Stages:
    """One monotone progress out of a job's stages (issue 32: the joint fit's percentage went 6 % -> 0 % when its
    held-out metrics began, each stage counting from 0 again).  ``Stages(progress, {"fit": 0.6, "metrics": 0.4})``;
    ``stages.part("fit")`` is a :data:`Progress` whose (done, total) fill that stage's share of the whole, after
    the stages before it; whatever a stage's own counter does (a refit starting its iterations again), the
    fraction passed on never decreases."""

    def __init__(self, progress: Progress, weights: dict[str, float]):
        total = float(sum(weights.values())) or 1.0
        self.progress, self.start, self.share = progress, {}, {}
        at = 0.0
        for name, w in weights.items():
            self.start[name], self.share[name] = at, w / total
            at += w / total
        self.last = 0.0

    def part(self, name: str) -> Progress:
        lo, share = self.start[name], self.share[name]

        def report(done: float, total: float, message: str) -> None:
            frac = min(max(done / total, 0.0), 1.0) if total else 0.0
            self.last = max(self.last, lo + share * frac)
            self.progress(self.last, 1.0, message)

        return report


def check_cancel(cancel: threading.Event | None) -> None:
    """Raise :class:`Cancelled` if the run was asked to stop."""
    if cancel is not None and cancel.is_set():
        raise Cancelled("cancelled by the user")


_CAP = threading.local()


def usable_cores(cap: int = 8) -> int:
    """The CPU cores this process may run on (its affinity, not the machine's count), at most *cap*: how many
    threads a blocked numpy pass splits its rows over (numpy releases the GIL inside the ufuncs and BLAS).
    Inside :func:`single_threaded` (a replicate), 1."""
    if getattr(_CAP, "single", False):
        return 1
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, min(cap, n))


@contextmanager
def single_threaded() -> Iterator[None]:
    """Run the block on one thread: our pools (:func:`usable_cores` is 1 in this thread) and the BLAS (through
    threadpoolctl, process-wide).  Every replicate runs so (:mod:`.replicates`): processes side by side do not
    oversubscribe the cores, and a replicate's numbers never depend on a thread count."""
    from threadpoolctl import threadpool_limits

    before = getattr(_CAP, "single", False)
    _CAP.single = True
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        _CAP.single = before


@cache
def thread_pool(name: str, cap: int = 8) -> ThreadPoolExecutor:
    """One long-lived pool per kind of pass (the static/joint pass, the DIF Newton, the pair sums): separate
    pools, so a pass running in one never waits for threads its caller holds in the same pool."""
    return ThreadPoolExecutor(max_workers=usable_cores(cap), thread_name_prefix=f"benchloupe-{name}")
