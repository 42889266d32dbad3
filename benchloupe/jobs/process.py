"""Run one long job (a fit, an audit, a BenchFill session, an import) in a child process (issue 11, the blocker).

Why a process: a job's Python code holds the GIL. In a thread of the app it took the interpreter away from the
UI thread, so on a 2-core machine a screen switch took 1.1 s (p95) during a BenchFill session instead of 0.24 s
(bench/bench_tui_load.py). In a child the app keeps its core and its GIL.

A job is a :class:`JobSpec`: a module-level function ``fn(progress, cancel, *args, **kwargs)`` and plain,
picklable arguments (the database *path*, a benchmark name, a config dataclass): the child opens its own
connections. The child is forked from a *forkserver* (started once, single-threaded, with the job modules
preloaded, so a job starts in milliseconds instead of re-importing pandas and openai) and never from the
threaded app. It runs the function in its main thread (so SIGTERM is the jobs' own "cancelled by SIGTERM",
``jobs.cancellable_by_signals``), with

- ``progress`` keeping only the latest report; a sender thread sends it at most :data:`SEND_HZ` times a second
  (a BenchFill session against a local endpoint reports thousands of times a second: the pipe, and the app's
  reader, see a few dozen messages), each with the time of the oldest report it stands for (the job line's
  lag is measurable) and the number of reports so far;
- ``cancel`` a :class:`threading.Event` that a watcher thread sets when the app sets the shared
  :func:`multiprocessing.Event`, when the app goes away (the child's parent changes) or the pipe breaks;
- the result (a run id, a dict with a message) or the error sent back as ``("ok", result)`` /
  ``("error", kind, type name, one line)``; *kind* is ``cancelled`` for :class:`Cancelled`, Ctrl-C and SIGTERM.

The environment and the working directory are the app's at the job's start (the forkserver's are those of its
own start), and the child runs at a lower priority (:data:`JOB_NICE`), so that on a busy machine the keys win.
A child that dies without answering (killed, a segfault) is a :class:`JobFailed` that says so; what the job's own
transactions committed stays, and a run or session it left ``running`` becomes ``interrupted`` the next time
the database is opened (store/runners.py: its runner's pid is gone).
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import pickle
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from benchloupe.engine.common import Cancelled
from benchloupe.textsafe import visible

SEND_HZ = 20
JOB_NICE = 5
MAX_STAGE_CHARS = 400
PRELOAD = ["benchloupe.jobs", "benchloupe.jobs.fill", "benchloupe.jobs.process"]
Progress = Callable[[float, float, str], None]


class JobFailed(RuntimeError):
    """The job raised (its one-line message; ``kind`` is the exception's type name) or its process died."""

    def __init__(self, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class JobSpec:
    """``fn(progress, cancel, *args, **kwargs)``, to be run in a child: *fn* a module-level function, the
    arguments plain values (they are pickled). *error_text* says an error in the caller's words (the TUI names
    options by their form fields, not as CLI flags); ``str`` when None."""

    fn: Callable[..., object]
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    error_text: Callable[[BaseException], str] | None = None  # an error in the caller's words (module-level)


def _one_line(exc: BaseException, error_text: Callable[[BaseException], str] | None = None) -> str:
    try:
        text = (error_text or str)(exc).strip()
    except Exception:  # noqa: BLE001 - the wording must not hide the error
        text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_context: multiprocessing.context.BaseContext | None = None
_context_lock = threading.Lock()


def context() -> multiprocessing.context.BaseContext:
    """The forkserver context with the job modules preloaded (spawn where there is no forkserver), its
    helper processes started."""
    global _context
    with _context_lock:
        if _context is None:
            if "forkserver" in multiprocessing.get_all_start_methods():
                ctx = multiprocessing.get_context("forkserver")
                ctx.set_forkserver_preload(PRELOAD)
            else:
                ctx = multiprocessing.get_context("spawn")
            _start_helpers(ctx)
            _context = ctx
        return _context


def _start_helpers(ctx) -> None:
    """Start the resource tracker and the forkserver. They are handed ``sys.stderr.fileno()``, which under
    Textual is a capture object with no file descriptor ("bad value(s) in fds_to_keep"): the real stderr
    stands in while they start."""
    from multiprocessing import forkserver, resource_tracker

    captured = sys.stderr
    real = sys.__stderr__
    try:
        if real is not None and _has_fd(real):
            sys.stderr = real
        resource_tracker.ensure_running()
        if ctx.get_start_method() == "forkserver":
            forkserver.ensure_running()
    finally:
        sys.stderr = captured


def _has_fd(stream) -> bool:
    try:
        return stream.fileno() >= 0
    except (OSError, ValueError, AttributeError):
        return False


def warm_up() -> None:
    """Start the forkserver now (it imports the job modules once), so the first job starts at once."""
    context()


# ------------------------------------------------------------------------------------------- the child

class _Reporter:
    """The child's progress sink: keeps the latest report; :meth:`flush` sends it if it is new."""

    def __init__(self, conn, lock: threading.Lock) -> None:
        self.conn, self.lock = conn, lock
        self.latest: tuple[float, float, str] | None = None
        self.since: float | None = None  # when the oldest report not yet sent was made
        self.count = 0

    def __call__(self, done: float, total: float, stage: str) -> None:
        if self.since is None:
            self.since = time.monotonic()
        self.latest = (done, total, str(stage)[:MAX_STAGE_CHARS])
        self.count += 1

    def flush(self) -> None:
        latest, since = self.latest, self.since
        if latest is None:
            return
        self.latest = self.since = None
        with self.lock:
            self.conn.send(("progress", float(latest[0]), float(latest[1]), latest[2], since, self.count))


def _watch(shared_cancel, cancel: threading.Event, reporter: _Reporter, parent: int, finished: threading.Event) -> None:
    """Send progress every 1/SEND_HZ s; set *cancel* when the app asks, goes away, or stops listening."""
    while not finished.wait(1 / SEND_HZ):
        try:
            reporter.flush()
        except (OSError, ValueError):  # the app closed its end
            cancel.set()
        if shared_cancel.is_set() or os.getppid() != parent:
            cancel.set()


def child_main(spec: JobSpec, conn, shared_cancel, env: dict, cwd: str, log: str) -> None:
    """The child's entry point: run *spec* and send its result or its error on *conn*. Its stdout and stderr
    go to *log* (the app's terminal belongs to the app), where a crash leaves its last words."""
    try:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        faulthandler.enable()
    except OSError:
        pass
    os.environ.clear()
    os.environ.update(env)
    try:
        os.chdir(cwd)
    except OSError:
        pass
    try:
        os.nice(JOB_NICE)
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the app, which cancels the job itself
    lock = threading.Lock()
    reporter = _Reporter(conn, lock)
    cancel, finished = threading.Event(), threading.Event()
    watcher = threading.Thread(target=_watch, args=(shared_cancel, cancel, reporter, os.getppid(), finished),
                               name="benchloupe-job-watch", daemon=True)
    watcher.start()
    try:
        result = spec.fn(reporter, cancel, *spec.args, **spec.kwargs)
        message: tuple = ("ok", result, time.monotonic())
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the app as one line
        from benchloupe.jobs import Terminated

        kind = "cancelled" if isinstance(exc, Cancelled | Terminated | KeyboardInterrupt) else "failed"
        message = ("error", kind, type(exc).__name__, _one_line(exc, spec.error_text), time.monotonic())
    finished.set()
    watcher.join()
    try:
        reporter.flush()
        conn.send(message)
    except (OSError, ValueError):  # the app is gone
        pass
    except Exception as exc:  # noqa: BLE001 - a result that does not pickle
        conn.send(("error", "failed", type(exc).__name__, f"the job's result could not be sent back: "
                                                            f"{_one_line(exc)}", time.monotonic()))
    conn.close()


# ------------------------------------------------------------------------------------------- the parent

class JobProcess:
    """One job in a child process, seen from the app: :meth:`wait` relays its progress and returns its result.

    ``cancel`` is the shared event (``is_set()``/``set()``); :meth:`stop` cancels, then terminates, then kills.
    """

    def __init__(self, spec: JobSpec) -> None:
        try:
            pickle.dumps(spec)
        except Exception as exc:  # noqa: BLE001 - a closure or a connection: a programming error, said plainly
            raise JobFailed(f"a job runs in its own process: give a module-level function and plain arguments "
                            f"({_one_line(exc)})", "spec") from None
        ctx = context()
        self.spec = spec
        self.cancel = ctx.Event()
        self._conn, child_conn = ctx.Pipe(duplex=False)
        fd, self._log = tempfile.mkstemp(prefix="benchloupe-job-", suffix=".log")
        os.close(fd)
        self._process = ctx.Process(target=child_main, name="benchloupe-job", daemon=True,
                                    args=(spec, child_conn, self.cancel, dict(os.environ), os.getcwd(), self._log))
        self._child_conn = child_conn
        self.finished_at: float | None = None  # the child's clock (monotonic: one clock on this machine)

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def start(self) -> JobProcess:
        self._process.start()
        self._child_conn.close()
        return self

    def is_alive(self) -> bool:
        return self._process.is_alive()

    def wait(self, progress: Callable[[float, float, str, float, int], None]) -> object:
        """Relay progress reports to *progress* until the child answers; its result, or raise its error
        (:class:`Cancelled` when it was cancelled, :class:`JobFailed` otherwise or when it died)."""
        try:
            while True:
                try:
                    msg = self._conn.recv()
                except EOFError:
                    break
                if msg[0] == "progress":
                    progress(*msg[1:])
                elif msg[0] == "ok":
                    self.finished_at = msg[2]
                    return msg[1]
                else:
                    _tag, kind, name, text, self.finished_at = msg
                    raise Cancelled(text) if kind == "cancelled" else JobFailed(text, name)
        finally:
            self._conn.close()
            self._process.join(timeout=5.0)
            last = self._last_words()
        raise JobFailed(f"the job's process {self._died()}{last}; what it committed is kept, and a run it "
                        f"left running is marked interrupted", "died")

    def _last_words(self) -> str:
        """The first line of what the child wrote to its stderr (a fatal error, a traceback's cause), and the
        log removed."""
        try:
            with open(self._log, encoding="utf-8", errors="replace") as fh:
                lines = [ln.strip() for ln in fh.read()[-20000:].splitlines() if ln.strip()]
            os.unlink(self._log)
        except OSError:
            return ""
        fatal = [ln for ln in lines if ln.startswith("Fatal Python error")]
        word = (fatal or lines[-1:] or [""])[0]
        return f" ({visible(word)[:200]})" if word else ""

    def _died(self) -> str:
        code = self._process.exitcode
        if code is None:
            return "stopped answering"
        if code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with status {code} without a result"

    def stop(self, grace: float = 3.0) -> None:
        """End the job: cancel it and wait *grace* s, then SIGTERM (the jobs record "cancelled by SIGTERM"),
        then SIGKILL."""
        self.cancel.set()
        self._process.join(grace)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(grace)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(grace)
