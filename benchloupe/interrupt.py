"""SIGTERM and Ctrl-C as one exception from a command's first instruction on (issue 24, defect 8).

A job's SIGTERM used to be handled only once its run row existed (``jobs.cancellable_by_signals``): earlier, during
the imports, the parsing of a file or the loading of a benchmark, the default action ended the process by the
signal (exit -15, nothing on stderr). :func:`install` is called at the top of the command line's module, before
anything else of it is imported: from then on SIGTERM raises :class:`Terminated` in the main thread, which the
command line turns into "benchloupe: interrupted" and exit 130 (and a run that exists into ``cancelled``), the
same at 0.1 s as at 10 s. Before the command's guarded body runs (while Python is still importing it) there is
nothing to undo, so the handler prints the same line and exits 130 at once.

Every layer may use this module (it imports nothing of benchloupe), like :mod:`benchloupe.textsafe`.
"""

from __future__ import annotations

import os
import signal
import threading

EXIT_INTERRUPTED = 130


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so that a run ends ``cancelled`` (issue 10 #5)."""


_guarded = False  # True while a command body runs inside main()'s handlers
_last_signal: list[int] = []  # the signal whose exception was last raised (see raised_inside_sqlite)


_signalled = threading.Event()  # a SIGTERM or Ctrl-C came: this process is ending (never cleared)


def mark_signalled() -> None:
    """Every handler of SIGTERM and Ctrl-C says that one came (jobs/base.py has handlers of its own)."""
    _signalled.set()


def signalled() -> bool:
    """Whether a SIGTERM or Ctrl-C came to this process (threads that die of the stop may stay quiet)."""
    return _signalled.is_set()


def _on_signal(signum, frame):
    _last_signal[:] = [signum]
    _signalled.set()
    if not _guarded:
        try:
            os.write(2, b"benchloupe: interrupted\n")
        finally:
            os._exit(EXIT_INTERRUPTED)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated("cancelled by SIGTERM")


def install() -> None:
    """SIGTERM (and SIGINT, whose default would print a traceback during the imports) go to :func:`_on_signal`.
    Only in the main thread, and only where nobody set a handler of their own (a test runner, an embedding
    program keep theirs)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, default in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
        try:
            if signal.getsignal(sig) is default:
                signal.signal(sig, _on_signal)
        except (ValueError, OSError):  # not the main interpreter
            pass


def _program() -> bool:
    """Whether this process is the ``benchloupe`` program, not a test runner or another program calling
    ``main()``, and this is its main thread."""
    import sys

    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    program = (spec is not None and spec.name == "benchloupe.__main__") or \
        os.path.basename(sys.argv[0] if sys.argv else "") == "benchloupe"
    return program and threading.current_thread() is threading.main_thread()


def finished() -> None:
    """The command's work is done and its output written: a SIGTERM now (while Python shuts down, when it would
    end the process by the signal) is ignored, in the ``benchloupe`` program only (a test runner calling
    ``main()`` keeps its own SIGTERM)."""
    if _program():
        try:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        except (ValueError, OSError):
            pass


def exit_interrupted() -> int:
    """An interrupted command has said so and marked its run: the ``benchloupe`` program ends now, without
    Python's shutdown, which joins every worker thread (a numpy pass's pool, the annotator calls). The signal's
    exception may have landed inside a ``with`` of a thread-pool future's lock, which such a thread then waits for
    forever, and the process would never exit. Elsewhere (a test calling ``main()``) returns the exit code."""
    if _program():
        import sys

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(EXIT_INTERRUPTED)
    return EXIT_INTERRUPTED


def raised_inside_sqlite() -> KeyboardInterrupt | None:
    """The exception a signal raised inside an SQLite callback, raised again by the caller (issue 37).

    A long query stays in SQLite's C code, where Python runs no signal handler; a progress handler (a Python
    callable SQLite calls every few thousand steps) lets the handler run, but the ``sqlite3`` module swallows the
    exception it raises and ends the query with ``OperationalError("interrupted")``. The caller that sees that error
    asks here which signal it was: SIGTERM gives :class:`Terminated`, SIGINT ``KeyboardInterrupt``, and None when no
    signal of ours came (the query was interrupted some other way). Reading it forgets it."""
    signum = _last_signal.pop() if _last_signal else None
    if signum == signal.SIGTERM:
        return Terminated("cancelled by SIGTERM")
    if signum == signal.SIGINT:
        return KeyboardInterrupt()
    return None


class guarded:
    """``with guarded():`` the body's SIGTERM raises :class:`Terminated` (handled by the caller) instead of
    exiting at once."""

    def __enter__(self):
        global _guarded
        self._was = _guarded
        _guarded = True
        return self

    def __exit__(self, *exc) -> bool:
        global _guarded
        _guarded = self._was
        return False

