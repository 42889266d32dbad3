"""The benchloupe terminal workbench: one Textual app, one mode per screen, one background job at a time.

Screens read the store in thread workers with their own connection (store/db.py: a connection belongs to its
thread) and post what they read back as messages; long work (fits, imports, the demo build, BenchFill) runs
through :meth:`BenchloupeApp.start_job` in a *child process* (jobs/process.py): a job's Python code in a thread
held the GIL against the UI thread (issue 11: a screen switch took 1.1 s during a BenchFill session). A thread
worker of the app only waits on the child's pipe (it holds no GIL while it waits) and overwrites one
:class:`ProgressSlot` with each report; the child already coalesces its reports to a few dozen a second, and a
UI timer reads the slot ``PROGRESS_HZ`` times a second and repaints the job line when it changed. Nothing per
progress report touches the footer or the bindings: those are refreshed only when a job starts or ends (issue
11: per-message ``refresh_bindings()`` froze the app for minutes). A failing job, or a child that dies, never
takes the app down: its error is shown in one line and the app keeps running; quitting stops the child.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import App, ScreenStackError
from textual.binding import Binding
from textual.scrollbar import ScrollBar
from textual.worker import Worker, WorkerState

from benchloupe.textsafe import visible
from benchloupe.tui.palette import WorkbenchCommands
from benchloupe.tui.screens import SCREENS
from benchloupe.tui.widgets.jobbar import JobBar, JobState
from benchloupe.tui.widgets.table import WholeCellScrollBar
from benchloupe.words import count

# Every scrollbar's thumb in whole cells: the default's fractional ends are block glyphs (▇ ▁) that read as
# stray characters at the right edge of tables and panels at 80x24 (issue 11).
ScrollBar.renderer = WholeCellScrollBar

if TYPE_CHECKING:
    from benchloupe.jobs.process import JobProcess, JobSpec

WARM_UP_DELAY = 1.0
WARM_UP_FALLBACK = 10.0  # seconds after mount: the warm-up starts then if the first screen has not shown
PROGRESS_HZ = 4
QUIT_GRACE = 0.15  # seconds a running job gets to stop at each step when the app quits (cancel, SIGTERM, SIGKILL)
WRITES_GRACE = 10.0  # seconds q waits for decisions still being written before it quits anyway


class ProgressSlot:
    """The latest ``(done, total, stage)`` a job reported; written by the job's relay thread, read by the UI
    timer. ``calls`` is the number of reports the job made; :meth:`lag` how long the oldest report not yet on
    the job line has waited (bench/bench_tui_load.py)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: tuple[float, float, str] | None = None
        self._since: float | None = None
        self.calls = 0

    def put(self, done: float, total: float, stage: str, since: float | None = None, count: int | None = None) -> None:
        """A report; *since* is when (``time.monotonic()``, in any process) the oldest report it stands for was
        made, *count* how many the job made so far."""
        with self._lock:
            self._latest = (done, total, stage)
            if self._since is None:
                self._since = time.monotonic() if since is None else since
            self.calls = self.calls + 1 if count is None else count

    def take(self) -> tuple[float, float, str] | None:
        """The latest report since the last take, or None when nothing new came."""
        with self._lock:
            latest, self._latest, self._since = self._latest, None, None
        return latest

    def lag(self) -> float:
        """Seconds the oldest report not yet taken has waited (0 when the job line shows the latest)."""
        with self._lock:
            return 0.0 if self._since is None else max(0.0, time.monotonic() - self._since)


def one_line(exc: BaseException) -> str:
    """The first line of an error in the workbench's words (options named by their form fields, not as CLI
    flags: :mod:`benchloupe.tui.wording`), or its type when it has no message."""
    from benchloupe.tui.wording import error_text

    text = error_text(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class BenchloupeApp(App[int]):
    """The workbench over one database file. ``benchmark`` is the open benchmark (None until chosen)."""

    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses (tests) find it too
    TITLE = "benchloupe"
    COMMANDS = App.COMMANDS | {WorkbenchCommands}
    MODES = {name: ref for name, (ref, _key, _title) in SCREENS.items()}  # screens/__init__.py: imported when shown
    SCREEN_TITLES = {name: title for name, (_ref, _key, title) in SCREENS.items()}
    DEFAULT_MODE = "benchmarks"
    # At 80 columns the footer holds a screen's keys and three of the app's: while a job runs, x Cancel comes
    # first and q Quit leaves the footer (q still asks to quit): it cut "x Cancel jo" (issue 21 item 11).
    BINDINGS = [
        Binding("x", "cancel_job", "Cancel", id="app.cancel"),
        Binding("question_mark", "help", "Help", id="app.help"),
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("q", "quit_running", "Quit", show=False, id="app.quit_running"),
        Binding("B", "switch_benchmark", "Switch benchmark", show=False, id="app.benchmark"),
        Binding("w", "export_table", "Export table", show=False, id="app.export"),
        Binding("W", "export_decisions", "Export decisions", show=False, id="app.export_decisions"),
        *(Binding(key, f"go('{name}')", title, show=False, id=f"go.{name}")
          for name, (_cls, key, title) in SCREENS.items()),
    ]

    def __init__(self, db_path: str | Path, *, benchmark: str | None = None,
                 first_job: tuple[str, JobSpec] | None = None) -> None:
        super().__init__()
        self.db_path = Path(db_path)
        self.first_job = first_job  # (title, spec): started once the first screen is up and the engine warm
        self.benchmark = benchmark if benchmark is not None else remembered_benchmark(self.db_path)
        self.data_version = 0
        self.job = JobState()
        self.job_process: JobProcess | None = None
        self.job_end_lag: float | None = None
        self._cancel = threading.Event()
        self._on_done: Callable[[object], None] | None = None
        self._warming = False
        self._progress = ProgressSlot()
        self.job_paints = 0
        self.flag_focus: tuple[str, str, int, str] | None = None
        self.benchmark_count: int | None = None  # how many the database holds (the Benchmarks screen counts them)
        from benchloupe.store import actor
        from benchloupe.store.db import write_problem
        from benchloupe.tui.live import StoreWatcher
        from benchloupe.tui.writes import WriteQueue

        self.actor = actor.current()  # the curator's name on every write (--as, $BENCHLOUPE_USER, the login)
        self.read_only = write_problem(self.db_path)  # None, or the one line that says why nothing can be saved
        self.file_changed: str | None = None  # why the database file is no longer the one opened (issue 37 #1)
        _pin(self.db_path)
        self.write_queue = WriteQueue()
        self.watcher = StoreWatcher(self.db_path)

    def on_load(self) -> None:
        """Every thread worker in a daemon thread (tui/threads.py): quitting waits for none of them."""
        import asyncio

        from benchloupe.tui.threads import DaemonExecutor

        asyncio.get_running_loop().set_default_executor(DaemonExecutor())

    def on_mount(self) -> None:
        from benchloupe.tui.live import POLL_HZ

        self.set_interval(1 / PROGRESS_HZ, self._drain_progress)
        self.set_interval(1 / POLL_HZ, self._watch)
        if self.read_only:
            self.notify(self.read_only, title="Read-only workbench", severity="warning", timeout=15)
        self.simulated_hold = None
        self._closing = False
        self.set_timer(WARM_UP_FALLBACK, self.warm_up)  # when the first screen never showed (its read failed)

    def _hold_simulated(self) -> None:
        """Start the built-in simulated endpoint (prompts/simulated.py) when this workspace's BenchFill
        endpoints are the simulated ones (the demo's); :meth:`on_unmount` stops it (jobs/simulated.py). Its
        module (an HTTP server, the BenchFill types) is imported here, in the worker, not before the first
        paint (issue 26)."""
        from benchloupe.jobs.simulated import SimulatedHold

        hold = SimulatedHold()
        self.simulated_hold = hold  # on_unmount closes it from now on: a later take is then a no-op
        if not self._closing:
            hold.take(self.db_path)

    def on_unmount(self) -> None:
        from benchloupe.store.db import unpin

        self._closing = True
        self.watcher.close()
        unpin(self.db_path)
        if self.job_process is not None and self.job_process.is_alive():
            # cancel, then SIGTERM, then SIGKILL, each given QUIT_GRACE: no job outlives the app, and quitting
            # does not wait for one (a killed job's run reads "interrupted" when the database is next opened)
            self.job_process.stop(grace=QUIT_GRACE)
        if self.simulated_hold is not None:
            self.simulated_hold.close()

    # ------------------------------------------------------------------ start-up
    def warm_up(self, delay: float = WARM_UP_DELAY) -> None:
        """Import the engine (the analyses registry) and start the jobs' forkserver in a thread *delay* seconds
        after the first screen is up, so the Runs screen, the palette and the first job do not pay for it while
        the curator waits, and the first paint does not compete with it; the simulated endpoint's hold starts
        then too (it imports the BenchFill client: under load its timer from mount fired before the first
        paint, issue 26)."""
        if not self._warming:
            self._warming = True
            self.set_timer(delay, lambda: self.run_worker(self._warm_up_worker, thread=True, group="warm-up",
                                                          exit_on_error=False))

    def _warm_up_worker(self) -> None:
        """The warm-up, then the simulated endpoint's hold, in one thread one after the other (the two
        importing the same modules from two threads at once left the demo job of an empty database waiting
        past its test's 30 s)."""
        try:
            _import_engine()
            if self.first_job is not None and not self._closing:
                self.call_from_thread(self._start_first_job)
        finally:
            self._hold_simulated()

    def _start_first_job(self) -> None:
        """The job the command asked for after the first screen (``benchloupe demo --open``: the showcase runs);
        the screens fill in as its runs land (the store watcher sees another writer)."""
        if self.first_job is not None:
            title, spec = self.first_job
            self.first_job = None
            self.start_job(title, spec)

    # ------------------------------------------------------------------ navigation
    def action_go(self, mode: str) -> None:
        if mode in self.MODES:
            self.switch_mode(mode)

    def show_flags(self, mode: str, column: str, value: int, label: str) -> None:
        """Jump to the *mode* queue showing only the flags whose *column* (model_id, item_id) is *value*."""
        self.flag_focus = (mode, column, value, label)
        self.switch_mode(mode)

    def open_benchmark(self, name: str, mode: str = "items") -> None:
        self.benchmark = name
        self.remember_benchmark(name)
        self.switch_mode(mode)

    # ------------------------------------------------------------------ benchmark switch
    def action_switch_benchmark(self) -> None:
        """B: pick the benchmark every screen shows, in place (the screen stays the same)."""
        from benchloupe.tui.screens.picker import BenchmarkPicker

        if not isinstance(self.screen, BenchmarkPicker):
            self.push_screen(BenchmarkPicker(self.benchmark),
                             lambda name: self.call_after_refresh(self.choose_benchmark, name))

    def choose_benchmark(self, name: str | None) -> None:
        """Show *name* on every screen from now on and remember it for this database; panels about one item
        or run of the previous benchmark close."""
        if not name:
            return
        from benchloupe.tui.screens.base import BenchScreen, TopBar

        self.benchmark = name
        self.remember_benchmark(name)
        modes = tuple(ref.loaded for ref, _key, _title in SCREENS.values() if ref.loaded is not None)
        while len(self.screen_stack) > 1 and not isinstance(self.screen, modes):
            self.pop_screen()
        screen = self.screen
        if isinstance(screen, BenchScreen):
            screen.query_one(TopBar).refresh_bar()
            if screen.current_token() != screen._token:
                screen.reload()
        self.notify(f"benchmark {name}", markup=False)

    def no_benchmark_hint(self) -> str:
        """What to do when no benchmark is open: get data into an empty database, or pick one (issue 21 item
        11: "press 1 and choose one" when there was nothing to choose)."""
        if self.benchmark_count == 0:
            return "the database is empty: on 1 Bench, d builds the demo workspace and o imports a results file"
        return "no benchmark open: B picks one"

    def remember_benchmark(self, name: str) -> None:
        """Store *name* as this database's last benchmark (settings table), in a worker."""
        def write() -> None:
            from benchloupe.store import curation
            from benchloupe.store.db import connect

            conn = connect(self.db_path)
            try:
                curation.put_setting(conn, LAST_BENCHMARK, name)
            finally:
                conn.close()

        self.run_worker(write, thread=True, group="remember", exit_on_error=False)

    # ------------------------------------------------------------------ export (tui/export.py)
    def action_export_table(self) -> None:
        """w: write the table on screen (as filtered, searched and sorted) to a CSV or JSON file."""
        from benchloupe.tui import export

        got = export.screen_table(self.screen)
        if got is None:
            self.notify("nothing to export on this screen: w exports the table of a list screen", severity="warning")
            return
        if isinstance(got[0], export.QueueRows):  # a triage queue: its view is read by the export's worker
            n, name, rows = len(got[0]), got[1], got[0].read
        else:
            frame, name = got[0].copy(), got[1]
            n, rows = len(frame), (lambda conn: frame)
        self._ask_export(f"Export {count(n, 'row')} of {name}", export.default_path(name, self.benchmark), rows)

    def action_export_decisions(self) -> None:
        """W: write every decision on the open benchmark (flag triage, BenchFill proposals) to a file."""
        from benchloupe.tui import export

        bench = self.benchmark
        if not bench:
            self.notify(self.no_benchmark_hint(), severity="warning")
            return
        self._ask_export(f"Export the decisions on {bench}", export.default_path("decisions", bench),
                         lambda conn: export.decisions(conn, bench))

    def action_replicate_workers(self) -> None:
        """Where the analyses' replicates run (issue 36): every core, N local processes or a Dask scheduler;
        stored in this database's settings, used by every run started here."""
        from benchloupe.jobs import workers
        from benchloupe.store.db import connect
        from benchloupe.tui.widgets.dialogs import PromptDialog

        conn = connect(self.db_path)
        try:
            now = workers.saved_setting(conn)
        finally:
            conn.close()

        def check(text: str) -> str | None:
            try:
                workers.parse_setting(text)
            except ValueError as exc:
                return str(exc)
            return None

        def save(text: str) -> None:
            value = workers.save_setting(self.db_path, text)
            self.call_from_thread(self.notify, workers.describe(value), markup=False)

        def answered(text: str | None) -> None:
            if text is not None:
                self.run_worker(lambda: save(text), thread=True, group="remember", exit_on_error=False)

        self.push_screen(PromptDialog(
            "Replicate workers", value=now["cluster"] or str(now["jobs"] or ""), placeholder="every core",
            validate=check, help="Bootstrap refits, split reruns, perturbations, subset refits run as replicates: "
                                 "blank for every core, a number of local processes, or a Dask scheduler address "
                                 "(tcp://host:8786). The numbers are the same on any."), answered)

    def _ask_export(self, title: str, default: Path, rows: Callable) -> None:
        from benchloupe.tui import export
        from benchloupe.tui.widgets.dialogs import PromptDialog

        def answered(path: str | None) -> None:
            if path:
                self._export_worker(path, rows)

        self.push_screen(PromptDialog(title, value=str(default), validate=export.check_path,
                                      help="A .csv or .json path (the suffix picks the format); an existing "
                                           "file is replaced."), answered)

    @work(thread=True, group="export", exit_on_error=False)
    def _export_worker(self, path: str, rows: Callable) -> None:
        from benchloupe.store.db import connect
        from benchloupe.tui import export

        try:
            conn = connect(self.db_path)
            try:
                frame = rows(conn)
            finally:
                conn.close()
            written = export.write_frame(frame, path)
        except Exception as exc:  # noqa: BLE001 - shown in one line; the app keeps running
            self.call_from_thread(self.report_error, exc, "export")
            return
        self.call_from_thread(self.notify, f"wrote {count(len(frame), 'row')} to {written}", title="Exported",
                              timeout=10)

    async def action_quit_running(self) -> None:
        await self.action_quit()

    async def action_quit(self) -> None:
        """Quit; while a job runs, ask first: yes cancels the job (its run is recorded as cancelled) and quits,
        no keeps both."""
        if not self.job.running:
            self._exit_after_writes()
            return
        from benchloupe.tui.widgets.dialogs import ConfirmDialog

        if isinstance(self.screen, ConfirmDialog):
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._cancel.set()
                self._exit_after_writes()

        self.push_screen(ConfirmDialog(f"{self.job.title} is running. Cancel it and quit?",
                                       detail="Its run is recorded as cancelled."), answered)

    def _exit_after_writes(self) -> None:
        """Exit as soon as the decisions still queued are written (milliseconds; at most WRITES_GRACE s): the
        workers are daemon threads, and nothing else is waited for (issue 32 point 5)."""
        if not self.write_queue.pending:
            self.exit()
            return
        started = time.monotonic()

        def check() -> None:
            if not self.write_queue.pending or time.monotonic() - started > WRITES_GRACE:
                timer.stop()
                self.exit()

        timer = self.set_interval(0.01, check)

    def action_help(self) -> None:
        from benchloupe.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # ------------------------------------------------------------------ other writers (tui/live.py)
    def _watch(self) -> None:
        """Timer: when another connection committed (another curator, a CLI script, a job, this app's own write
        worker), every screen reloads when next shown and the one on view reloads what changed now (the screen
        under a dialog too: it stays visible)."""
        if self.file_changed is not None:
            return
        from benchloupe.store.db import pinned_problem

        if self._file_stopped(pinned_problem(self.db_path)):
            return
        before = self.watcher._print
        changed = self.watcher.changed()
        # the files moved (a commit, or bytes copied over the open file: then it may not even read): is it still
        # the workspace that was opened?
        if (changed or self.watcher._fingerprint() != before) and self._file_stopped(
                pinned_problem(self.db_path, content=True)):
            return
        if not changed:
            return
        from benchloupe.tui.screens.base import BenchScreen

        self.data_version += 1
        for screen in reversed(self.screen_stack):
            if isinstance(screen, BenchScreen):
                screen.live_refresh()
                break

    def _file_stopped(self, problem: str | None) -> bool:
        """The database file was replaced or deleted under the app (issue 37 #1): say so, and stop; every read
        and write of the path is refused from now on (store/db.py: pinned), so no decision lands on a cell the
        curator did not see and no empty database is made in its place. True when stopped."""
        if problem is None:
            return False
        self.file_changed = self.read_only = problem
        self.notify(problem, title="Database file changed", severity="error", timeout=60, markup=False)
        from benchloupe.tui.screens.base import TopBar

        for bar in self.screen.query(TopBar):
            bar.refresh_bar()
        return True

    def can_write(self) -> bool:
        """False, with the one line saying why, on a database this curator cannot write (tui: decisions stop
        before they change what the screen shows)."""
        if self.read_only:
            self.notify(self.read_only, title="Read-only", severity="warning")
            return False
        return True

    def data_changed(self, *, reload_current: bool = True) -> None:
        """The store changed (an import, a run, a decision): screens reload when next shown, the current one
        now when *reload_current* (a triage decision keeps the queue where it is)."""
        self.data_version += 1
        reload = getattr(self.screen, "reload", None)
        if reload is not None and reload_current:
            reload()

    def notify(self, message: str, *, title: str = "", **kwargs) -> None:
        """Every notification is literal text with control characters escaped (messages quote data: keys,
        model names, file paths), its title on the same line ("Refused: ..."), so a notice after a decision is
        one line over the footer, not a box over the table's last rows (app.tcss, issue 32 point 7)."""
        kwargs["markup"] = False
        text = visible(message, keep_layout=True)
        super().notify(f"{visible(title)}: {text}" if title else text, **kwargs)

    # ------------------------------------------------------------------ errors
    def report_error(self, exc: BaseException, where: str = "") -> None:
        """Show a failure in one line (what went wrong; the store's and engine's messages say how to fix)."""
        import sqlite3

        prefix = f"{where}: " if where else ""
        if isinstance(exc, sqlite3.Error):  # SQLite's words ("attempt to write a readonly database") as the cause
            from benchloupe.store.db import describe_sqlite_error, write_problem

            problem = write_problem(self.db_path)
            if problem and not self.read_only:  # permissions changed under the app: no more decisions start
                self.read_only = problem
            self.notify(prefix + describe_sqlite_error(exc, self.db_path), title="Failed", severity="error",
                        timeout=10, markup=False)
            return
        self.notify(prefix + one_line(exc), title="Failed", severity="error", timeout=10, markup=False)

    # ------------------------------------------------------------------ jobs
    def start_job(self, title: str, spec: JobSpec, on_done: Callable[[object], None] | None = None) -> bool:
        """Run *spec* (``fn(progress, cancel, *args)``, jobs/process.py) in a child process; *on_done* gets its
        result here. False (and a notice) when a job is running."""
        if self.job.running:
            self.notify(f"{self.job.title} is still running; press x to cancel it first", severity="warning",
                        markup=False)
            return False
        from benchloupe.store.db import pinned_problem

        if self._file_stopped(self.file_changed or pinned_problem(self.db_path, content=True)):
            return False  # a job would write into (or create) whatever is at the path now
        import dataclasses

        from benchloupe.jobs.process import JobProcess
        from benchloupe.tui.wording import error_text

        try:
            handle = JobProcess(spec if spec.error_text else dataclasses.replace(spec, error_text=error_text))
        except Exception as exc:  # noqa: BLE001 - e.g. no semaphores (a locked-down /dev/shm): one line
            self.report_error(exc, title)
            return False
        self.job_process, self._cancel, self._on_done = handle, handle.cancel, on_done
        self._progress = ProgressSlot()
        self.job_end_lag = None
        self.job = JobState(title=title, running=True, started=time.monotonic())
        self._show_job(bindings=True)
        self._job_worker(handle, self._progress)
        return True

    @work(thread=True, exclusive=True, group="job", exit_on_error=False)
    def _job_worker(self, handle: JobProcess, slot: ProgressSlot) -> object:
        """Start the child and relay its reports (this thread waits on the pipe, holding no GIL)."""
        return handle.start().wait(slot.put)

    def _drain_progress(self) -> None:
        """Repaint the job line with the job's latest report, if it sent one since the last tick."""
        latest = self._progress.take()
        if latest is not None and self.job.running:
            self.job.done, self.job.total, self.job.stage = latest
            self.job.pace.add(time.monotonic(), self.job.done, self.job.total)
            if self._cancel.is_set():
                self.job.stage = "cancelling… " + self.job.stage
            self._show_job()

    def action_cancel_job(self) -> None:
        if self.job.running:
            self._cancel.set()
            self.job.stage = "cancelling…"
            self._show_job()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_job":
            return self.job.running
        if action in ("quit", "quit_running"):  # one q; its footer label only while no job runs
            return (action == "quit_running") == self.job.running
        return True

    def _show_job(self, *, bindings: bool = False) -> None:
        """Repaint the current screen's job line; *bindings* when the job started or ended (``x`` appears or
        goes), never per progress report."""
        self.job_paints += 1
        try:
            screen = self.screen
        except ScreenStackError:  # between modes, or shutting down: the next tick paints
            return
        for bar in screen.query(JobBar):
            bar.show_state(self.job)
        if bindings:
            self.refresh_bindings()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.group != "job" or event.state not in (WorkerState.SUCCESS, WorkerState.ERROR,
                                                         WorkerState.CANCELLED):
            return
        self.job.running = False
        if self.job_process is not None and self.job_process.finished_at is not None:
            self.job_end_lag = max(0.0, time.monotonic() - self.job_process.finished_at)
        if event.state == WorkerState.SUCCESS:
            result = worker.result
            self.job.outcome = _describe(result)
            self.data_changed()
            if self._on_done is not None:
                self._on_done(result)
        elif event.state == WorkerState.ERROR and type(worker.error).__name__ == "Cancelled":
            self.job.outcome = "cancelled"
            self.data_changed()
            self.notify(f"{self.job.title} cancelled", markup=False)
        else:
            self.job.failed = True
            error = worker.error or RuntimeError("cancelled")
            self.job.outcome = "failed: " + one_line(error)
            self.data_changed()
            self.report_error(error, self.job.title)
        self._show_job(bindings=True)


def _import_engine() -> None:
    """A warm module cache for the screens (their modules, pandas, the analyses registry) and a running
    forkserver for the jobs."""
    from benchloupe.jobs import process
    from benchloupe.tui.screens import import_all

    import_all()
    process.warm_up()


def _describe(result: object) -> str:
    if isinstance(result, int) and not isinstance(result, bool):
        return f"done (run #{result})"
    if isinstance(result, dict) and result.get("message"):
        return str(result["message"])
    return "done"


LAST_BENCHMARK = "tui.last_benchmark"


def _pin(db_path: Path) -> None:
    """Pin the workbench's database file (store/db.py): every connection checks it is still that file."""
    from benchloupe.store.db import StoreError, pin

    if db_path.is_file():
        try:
            pin(db_path)
        except StoreError:
            pass  # not openable now: the first screen's read says why


def remembered_benchmark(db_path: Path) -> str | None:
    """The benchmark last chosen in the workbench on this database, when it still exists (None otherwise:
    the Benchmarks screen then opens the first benchmark with static results)."""
    from benchloupe.store import read
    from benchloupe.store.db import StoreError, connect

    try:
        conn = connect(db_path, create=False)
    except StoreError:
        return None
    try:
        name = read.setting(conn, LAST_BENCHMARK)
        if not isinstance(name, str):
            return None
        exists = conn.execute("SELECT 1 FROM benchmarks WHERE name = ?", (name,)).fetchone()
        return name if exists else None
    except Exception:  # noqa: BLE001 - a damaged setting must not stop the app from opening
        return None
    finally:
        conn.close()


def run_app(db_path: str | Path, first_job: tuple[str, JobSpec] | None = None) -> int:
    """Open the workbench on *db_path* (created and migrated by the caller), with *first_job* (title, spec)
    started after the first screen; the exit status."""
    app = BenchloupeApp(db_path, first_job=first_job)
    app.run()
    return int(app.return_code or 0)
