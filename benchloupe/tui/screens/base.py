"""What every workbench screen shares: the tab line, the job line, the footer, and loading in a worker.

A screen implements ``fetch(conn, benchmark)`` (runs in a thread worker with its own connection, reads
through the store) and ``show(data)`` (runs on the UI thread, touches widgets). It reloads when it is shown
after the open benchmark or the store changed (``app.data_version``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.message import Message
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from benchloupe.tui.widgets.footer import KeyFooter
from benchloupe.tui.widgets.jobbar import JobBar
from benchloupe.tui.widgets.safe import SafeStatic, Text
from benchloupe.tui.writes import Written, ordered_write

TABS = (("1", "Bench", "benchmarks"), ("2", "Items", "items"), ("3", "Models", "models"), ("4", "Runs", "runs"),
        ("5", "Anomalies", "anomalies"), ("6", "Reversals", "reversals"), ("7", "Coverage", "coverage"),
        ("8", "Fill", "benchfill"))
# shown where the line has room for it and the benchmark's whole name (not at 80 columns: key 9 still goes there)
ROOMY_TABS = (("9", "Item flags", "itemflags"),)

SHORT = {"Models": "Mod", "Anomalies": "Anom", "Reversals": "Rev", "Coverage": "Cov"}  # 80 columns: room for the actor


class TopBar(SafeStatic):
    """One line: the screens with their keys (current one highlighted) and the open benchmark."""

    def __init__(self, mode: str) -> None:
        super().__init__(id="topbar", markup=False)
        self.mode = mode

    def on_mount(self) -> None:
        self.refresh_bar()

    def on_resize(self) -> None:
        self.refresh_bar()

    def _tabs(self, tabs: tuple, wide: bool) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        for key, label, mode in tabs:
            label = label if wide else SHORT.get(label, label)
            if mode == self.mode:
                text.append(f" {key} {label} ", style="reverse bold")
            else:
                text.append(f" {key}", style="bold")
                text.append(f" {label}", style="dim")
        return text

    def refresh_bar(self) -> None:
        wide = self.size.width >= 100
        text = self._tabs(TABS, wide)
        bench = self.app.benchmark
        # who decides here (every write records it), and a database this curator cannot write: kept whole at
        # 80 columns, the benchmark's name gives way
        who = Text(" · as " if wide else " · ", style="dim")
        who.append(str(getattr(self.app, "actor", "")), style="bold cyan")
        if getattr(self.app, "file_changed", None):  # the file was replaced or deleted under the app: stopped
            who.append(" · file changed: stopped", style="bold red")
        elif getattr(self.app, "read_only", None):
            who.append(" · read-only", style="bold yellow")
        name = Text(bench if bench else "no benchmark", style="bold" if bench else "dim italic")
        roomy = self._tabs(TABS + ROOMY_TABS, wide)
        if roomy.cell_len + 4 + name.cell_len + who.cell_len <= self.size.width:
            text = roomy
        text.append("  │ ", style="dim")
        room = self.size.width - text.cell_len - who.cell_len
        if self.size.width and name.cell_len > room:
            name.truncate(max(room, 4), overflow="ellipsis")
        text.append_text(name)
        text.append_text(who)
        self.update(text)


class BenchScreen(Screen):
    """Base screen: tab line, body (``compose_body``), job line, footer; data loaded by ``fetch``/``show``."""

    MODE: ClassVar[str] = ""
    AUTO_FOCUS = "FrameTable"
    NEEDS_BENCHMARK: ClassVar[bool] = True

    # What the screen shows, as topics of store/live.py: a change by another process reloads the screen only when
    # one of them changed (``live_refresh``).
    TOPICS: ClassVar[tuple[str, ...]] = ("flags", "runs", "items", "models", "fill", "benchmarks")
    LIVE_MIN_S: ClassVar[float] = 0.0  # at most one live reload this often (BenchFill: its journal is busy)

    class Loaded(Message):
        def __init__(self, data: object, token: tuple, seq: int = 0, stamp: dict | None = None,
                     live: bool = False) -> None:
            super().__init__()
            self.data, self.token, self.seq, self.stamp, self.live = data, token, seq, stamp, live

    def __init__(self) -> None:
        super().__init__()
        self._token: tuple | None = None
        self.shown_token: tuple | None = None
        self._seq = 0  # the latest load started; an older one's result is dropped
        self._stamp: dict | None = None  # the topics' stamp of what is shown
        self._loading = False
        self._live_again = False
        self._live_at = 0.0
        self.live_reloads = 0  # reloads that a change by another writer caused (tests, bench)

    def compose(self) -> ComposeResult:
        yield TopBar(self.MODE)
        yield from self.compose_body()
        yield JobBar()
        yield KeyFooter(compact=True)

    def compose_body(self) -> ComposeResult:
        yield from ()

    def action_select_row(self) -> None:
        """Enter: the focused table's row is selected (the screen's ``on_frame_table_selected`` acts on it)."""
        from benchloupe.tui.widgets.table import FrameTable

        table = self.focused if isinstance(self.focused, FrameTable) else next(iter(self.query(FrameTable)), None)
        if table is not None:
            table.action_select()

    # ------------------------------------------------------------------ loading
    def on_screen_resume(self) -> None:
        self.query_one(TopBar).refresh_bar()
        self.query_one(JobBar).show_state(self.app.job)
        if self.current_token() != self._token:
            self.reload()

    def current_token(self) -> tuple:
        """What the screen's data depends on: the open benchmark (when it needs one) and the store version."""
        return (self.app.benchmark if self.NEEDS_BENCHMARK else None, self.app.data_version)

    def reload(self, *, live: bool = False) -> None:
        """Read again from the store (in a worker). *live*: the store changed under the screen (another process,
        or this app's own write): compare the topics' stamps first and fetch only when they moved
        (``fetch_live``), keeping the cursor, marks, search and sort (each screen's ``show``)."""
        if live and self._loading:
            self._live_again = True  # one more when this load is in: never a queue of loads behind a busy store
            return
        current = self.current_token()
        # the stamps say what changed since what is on screen, only for the benchmark on screen
        same_benchmark = self.shown_token is not None and self.shown_token[0] == current[0]
        if self.NEEDS_BENCHMARK and self.shown_token is not None and not same_benchmark:
            self.benchmark_changed()
        self._token = current
        if self.NEEDS_BENCHMARK and not self.app.benchmark:
            self.show_no_benchmark()
            self.shown_token = self._token
            return
        self._seq += 1
        self._loading = True
        self._live_again = False
        if not live:
            self.loading_started()
        self._load(self._token, self._seq, self._stamp if live and same_benchmark else None)

    def live_refresh(self) -> None:
        """The store changed (``PRAGMA data_version``, tui/live.py): reload what changed, at most every
        LIVE_MIN_S seconds."""
        import time

        now = time.monotonic()
        if self.LIVE_MIN_S and now - self._live_at < self.LIVE_MIN_S:
            self._live_again = True
            self.set_timer(self.LIVE_MIN_S - (now - self._live_at), self._live_retry)
            return
        self._live_at = now
        self.reload(live=True)

    def _on_view(self) -> bool:
        """On this mode's screen stack (a dialog may be over it): a live reload still shows."""
        try:
            return self in self.app.screen_stack
        except Exception:  # noqa: BLE001 - between modes, shutting down
            return False

    def _live_retry(self) -> None:
        if self._live_again and not self._loading and self._on_view():
            self._live_again = False
            self.live_refresh()

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def _load(self, token: tuple, seq: int, old_stamp: dict | None) -> None:
        from benchloupe.store import live
        from benchloupe.store.db import connect

        conn = connect(self.app.db_path)
        try:
            stamp = live.stamp(conn, self.TOPICS)
            if old_stamp is not None:
                changed = live.changed(old_stamp, stamp)
                data = self.fetch_live(conn, token[0], changed) if changed else None
            else:
                data = self.fetch(conn, token[0])
        except BaseException:
            self.app.call_from_thread(self._load_ended, seq)
            raise
        finally:
            conn.close()
        self.post_message(self.Loaded(data, token, seq, stamp, live=old_stamp is not None))

    def _load_ended(self, seq: int) -> None:
        if seq == self._seq:
            self._loading = False

    def on_bench_screen_loaded(self, message: BenchScreen.Loaded) -> None:
        if message.seq != self._seq:
            return  # a later load is on its way
        self._loading = False
        if message.token == self._token:
            if message.data is not None:
                self.live_reloads += message.live
                self.show(message.data)
            self._stamp = message.stamp
            self.shown_token = message.token
        if self._live_again and self._on_view():
            self._live_again = False
            self.live_refresh()

    def on_written(self, message: Written) -> None:
        if message.message:
            self.notify(message.message, markup=False)
        self.app.data_changed(reload_current=message.reload)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            import time

            error = event.worker.error
            key = (event.worker.group, str(error))
            now = time.monotonic()
            again = event.worker.group == "load" and key == getattr(self, "_last_error", (None, 0.0))[0] and \
                now - self._last_error[1] < 60
            if not again:  # the same failure of a live reload again: notified once a minute, not 4 times a second
                self._last_error = (key, now)
                self.app.report_error(error, self.MODE)
            if event.worker.group == "load":  # but the screen says it every time: the reload that failed again
                self.loading_failed(error)  # may have redrawn the status line of the emptied table meanwhile

    # ------------------------------------------------------------------ hooks
    def fetch(self, conn: sqlite3.Connection, benchmark: str | None) -> object:
        """Read what the screen shows (worker thread; no widgets here)."""
        return None

    def fetch_live(self, conn: sqlite3.Connection, benchmark: str | None, changed: set[str]) -> object:
        """Read again after the topics in *changed* moved (worker thread); by default the whole ``fetch``."""
        return self.fetch(conn, benchmark)

    def show(self, data: object) -> None:
        """Put fetched data on screen (UI thread)."""

    def loading_started(self) -> None:
        """Called before a reload starts."""

    def loading_failed(self, error: BaseException) -> None:
        """The read failed (the error is already notified): nothing the screen showed before stays on it, since
        it may be another benchmark's (issue 21 item 2: the tab line named demo-math over demo-chem's models).
        Tables and panels are emptied, :meth:`forget` drops what the keys act on, and the status line says
        what could not be read."""
        from benchloupe.tui.widgets.table import FrameTable
        from benchloupe.tui.wording import error_text

        for table in self.query(FrameTable):
            table.clear()
        lines = [w for w in self.query(SafeStatic) if not isinstance(w, TopBar) and w.id != "job-label"]
        for w in lines:
            w.update("")
        status = next((w for w in lines if w.has_class("status-line")), lines[0] if lines else None)
        if status is not None:
            what = self._token[0] if self.NEEDS_BENCHMARK and self._token else "the database"
            first = (error_text(error).strip().splitlines() or [type(error).__name__])[0]
            status.update(Text(f"could not read {what}: {first}", style="bold red"))
        self.forget()

    def benchmark_changed(self) -> None:
        """Another benchmark is about to be read: a search typed for the previous one does not survive it (issue
        32 point 4: Items read "0 of 320 items /math-0009" on the new benchmark). By default every table's
        ``/`` search is dropped; screens with searches or filters of their own drop those too."""
        from benchloupe.tui.widgets.table import FrameTable

        for table in self.query(FrameTable):
            for box in table._search_boxes():
                box.remove()
            if table.query:
                table.set_query("")

    def reveal(self, row_id: int) -> bool:
        """Select the row whose ``id`` is *row_id* on this screen's table and scroll it into view, dropping a
        search that hides it (a jump always lands on and shows its target, issue 32 point 4); False when the
        screen's data does not hold it."""
        from benchloupe.tui.widgets.table import FrameTable

        table = next(iter(self.query(FrameTable)), None)
        if table is None:
            return False
        if table.move_to_value("id", row_id):
            return True
        self.benchmark_changed()  # the same as for a new benchmark: no search of ours stays
        return table.move_to_value("id", row_id)

    def forget(self) -> None:
        """Drop the rows the screen's keys act on (a failed read must leave nothing to decide on)."""

    def show_no_benchmark(self) -> None:
        """Called instead of fetch when no benchmark is open."""
        self.notify(self.app.no_benchmark_hint(), markup=False)


def store_write(screen: Screen, fn: Callable[[sqlite3.Connection], object], message: str = "", *,
                reload: bool = True) -> None:
    """Run ``fn(conn)`` in a thread worker on *screen* with its own connection, after every write the app
    queued before it (tui/writes.py: in the order of the keys); then tell the app the store changed (reloading
    the current screen when *reload*). Refused with one line on a read-only database."""
    if not screen.app.can_write():
        return
    ordered_write(screen, fn, message, reload=reload)
