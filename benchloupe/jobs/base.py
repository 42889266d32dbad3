"""What every run of the jobs layer shares: the run row and its guard (:class:`RunContext`), the code version and
input fingerprint it records, SIGTERM as a cancel, and the registry of analyses the area modules (calibration,
diagnostics, audit, coverage, fill) register into.

The area modules import this module, never the :mod:`benchloupe.jobs` package that imports them (lazily) to fill
the registry: no import circle (issue 27). The package re-exports every name here.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path

import numpy as np

from benchloupe import __version__, interrupt
from benchloupe.engine.common import Cancelled, EngineError
from benchloupe.interrupt import Terminated  # noqa: F401 - one class from the first instruction on (issue 24)
from benchloupe.store import read, runners, runs
from benchloupe.store.db import StoreError, connect, transaction


def code_version() -> str:
    """Package version plus the git commit when running from a checkout."""
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parents[2],
                             capture_output=True, text=True, timeout=5).stdout.strip()
    except Exception:  # noqa: BLE001 - no git, not a checkout
        sha = ""
    return f"{__version__}+{sha}" if sha else __version__


def _config_dict(config) -> dict:
    return asdict(config) if is_dataclass(config) else dict(config)


def fingerprint(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        if a is None:
            h.update(b"none")
            continue
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


@contextmanager
def cancellable_by_signals() -> Iterator[None]:
    """While the body runs in the main thread, SIGTERM raises :class:`Terminated` (SIGINT already raises
    KeyboardInterrupt); the previous handler is restored afterwards. Elsewhere (TUI workers) a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum, frame):
        interrupt.mark_signalled()
        raise Terminated("cancelled by SIGTERM")

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


STOPPING_LINE = "benchloupe: stopping after the calls in flight (send it again to stop at once)\n"


class SignalCancel:
    """What :func:`cooperative_signals` saw: ``reason`` is the first signal's stop line, None while none came."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel, self.reason = cancel, None

    def stopped(self, exc: BaseException) -> BaseException:
        """The exception a run stopped by the first signal ends with (Terminated or KeyboardInterrupt, as if the
        signal had raised it), else *exc* itself."""
        if isinstance(exc, Cancelled) and self.reason is not None:
            return Terminated(self.reason) if "SIGTERM" in self.reason else KeyboardInterrupt(self.reason)
        return exc


@contextmanager
def cooperative_signals(cancel: threading.Event) -> Iterator[SignalCancel]:
    """While the body runs in the main thread, the first SIGTERM or Ctrl-C sets *cancel* and returns; the body
    stops at its next cancel check. A second one raises at once, as :func:`cancellable_by_signals` does.

    For bodies that coordinate threads (BenchFill's concurrent LLM calls): an exception raised by a handler lands
    on whatever instruction the main thread is at, e.g. inside ``concurrent.futures.wait()`` after it acquired
    some of the pending futures' locks; the worker threads then wait for those locks forever while the main
    thread joins them, and the process never exits (the CI hang of the fill SIGTERM test). Elsewhere (TUI
    workers, whose cancel is the event itself) a no-op."""
    holder = SignalCancel(cancel)
    if threading.current_thread() is not threading.main_thread():
        yield holder
        return

    def on_signal(signum, frame):
        interrupt.mark_signalled()
        if holder.reason is not None:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise Terminated("cancelled by SIGTERM")
        holder.reason = "cancelled by SIGTERM" if signum == signal.SIGTERM else "cancelled by Ctrl-C (SIGINT)"
        cancel.set()
        try:  # os.write: print() from a handler can meet its own stream's lock
            os.write(2, STOPPING_LINE.encode())
        except OSError:
            pass

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield holder
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stop_reason(exc: BaseException) -> tuple[str, str]:
    """(status, one-line error) of a run ended by *exc*: cancelled for Ctrl-C, SIGTERM and cancel, else failed
    with the real cause (a database write that failed says so)."""
    if isinstance(exc, Terminated):
        return "cancelled", "cancelled by SIGTERM"
    if isinstance(exc, KeyboardInterrupt):
        return "cancelled", "cancelled by Ctrl-C (SIGINT)"
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, Cancelled):
        return "cancelled", text
    if isinstance(exc, sqlite3.Error):
        return "failed", f"could not write to the database: {text}"
    if isinstance(exc, OSError):
        return "failed", f"{type(exc).__name__}: {text}"
    return "failed", text


class RunContext:
    """Creates the run row (with its runner and heartbeat), times stages, and marks the run failed or
    cancelled if the body raises; a SIGKILL leaves it ``running`` for the next open to mark interrupted."""

    def __init__(self, db_path, kind: str, benchmark: str | None, config, seed: int | None,
                 inputs: list[tuple[str, str]] = (), label: str = ""):
        self.db_path, self.kind, self.benchmark = db_path, kind, benchmark
        self.config, self.seed, self.inputs, self.label = _config_dict(config), seed, inputs, label
        self.t0 = time.perf_counter()
        self.timings: dict[str, float] = {}
        self.run_id: int | None = None

    def start(self, conn, fp: str) -> int:
        bid = read.benchmark_id(conn, self.benchmark) if self.benchmark else None
        inputs = [(read.benchmark_id(conn, b), role) for b, role in self.inputs]
        try:
            self.run_id = runs.create_run(conn, self.kind, bid, config=self.config, seed=self.seed,
                                          code_version=code_version(), input_fingerprint=fp, inputs=inputs,
                                          label=self.label)
        except KeyboardInterrupt as exc:  # Ctrl-C right after the row was written
            self.fail(conn, exc)
            raise
        return self.run_id

    def lap(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.timings[name] = round(now - since, 4)
        return now

    @contextmanager
    def guard(self, conn) -> Iterator[None]:
        """Run the body of a started run with a heartbeat and SIGTERM as a cancel; any exception is recorded
        by :meth:`fail` and re-raised."""
        run_id = self.run_id
        heart = None
        try:
            with cancellable_by_signals():
                if run_id is not None:
                    heart = runners.Heartbeat(lambda: connect(self.db_path),
                                              lambda c, now: runs.beat(c, run_id, now)).start()
                yield
        except sqlite3.Error as exc:  # disk full, I/O error, locked past the timeout: one line, the real cause
            self.fail(conn, exc)
            raise StoreError(f"{self.kind} run {run_id} failed: {stop_reason(exc)[1]} ({self.db_path}); "
                             "free space or fix the file, then run it again") from exc
        except BaseException as exc:
            self.fail(conn, exc)
            raise
        finally:
            if heart is not None:
                heart.stop()

    def fail(self, conn, exc: BaseException) -> None:
        """Bad input (EngineError) leaves no trace: the run row is removed, so the database is as it was.
        A cancellation or an unexpected failure keeps the row with its status and error for the history.
        Recording never masks *exc*: if even that write fails, the next open marks the run interrupted."""
        if self.run_id is None:
            return
        try:
            if conn.in_transaction:  # a COMMIT that failed on a full disk leaves the transaction open
                conn.execute("ROLLBACK")
            if isinstance(exc, EngineError):
                with transaction(conn):
                    conn.execute("DELETE FROM runs WHERE id = ?", (self.run_id,))
                return
            runs.fail_run(conn, self.run_id, *stop_reason(exc))
        except (sqlite3.Error, KeyboardInterrupt):
            pass


# --------------------------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class Analysis:
    """One analysis the CLI and the Runs screen can start.

    ``run(db_path, benchmark, config, *, arena=None, progress=no_progress, cancel=None) -> run_id`` loads
    from the store, computes and saves a run; ``config_cls()`` gives the paper's defaults for the form.
    ``inputs`` says what the benchmark must hold: "static", "arena", "static+arena" (arena may be a second
    benchmark passed as ``arena=``) or "any".
    """

    name: str
    title: str
    area: str
    config_cls: type
    inputs: str
    run: Callable[..., int]


_REGISTRY: dict[str, Analysis] = {}


def register(analysis: Analysis) -> Analysis:
    _REGISTRY[analysis.name] = analysis
    return analysis
