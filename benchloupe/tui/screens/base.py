"""What every workbench screen shares: the tab line, the job line, the footer, and loading in a worker.

A screen implements ``fetch(conn, benchmark)`` (runs in a thread worker with its own connection, reads
through the store) and ``show(data)`` (runs on the UI thread, touches widgets). It reloads when it is shown
after the open benchmark or the store changed (``app.data_version``).
"""

from __future__ import annotations

import sqlite3
import threading
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

TABS = (("1", "Bench", "benchmarks"), ("2", "Items", "items"), ("3", "Models", "models"), ("4", "Runs", "runs"),
        ("5", "Anomalies", "anomalies"), ("6", "Reversals", "reversals"), ("7", "Coverage", "coverage"),
        ("8", "Fill", "benchfill"))

SHORT = {"Anomalies": "Anom", "Reversals": "Rev", "Coverage": "Cov"}


class TopBar(SafeStatic):
    """One line: the screens with their keys (current one highlighted) and the open benchmark."""

    def __init__(self, mode: str) -> None:
        super().__init__(id="topbar", markup=False)
        self.mode = mode

    def on_mount(self) -> None:
        self.refresh_bar()

    def on_resize(self) -> None:
        self.refresh_bar()

    def refresh_bar(self) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        wide = self.size.width >= 100
        for key, label, mode in TABS:
            label = label if wide else SHORT.get(label, label)
            if mode == self.mode:
                text.append(f" {key} {label} ", style="reverse bold")
            else:
                text.append(f" {key}", style="bold")
                text.append(f" {label}", style="dim")
        bench = self.app.benchmark
        text.append("  │ ", style="dim")
        text.append(bench if bench else "no benchmark", style="bold" if bench else "dim italic")
        self.update(text)


class BenchScreen(Screen):
    """Base screen: tab line, body (``compose_body``), job line, footer; data loaded by ``fetch``/``show``."""

    MODE: ClassVar[str] = ""
    AUTO_FOCUS = "FrameTable"
    NEEDS_BENCHMARK: ClassVar[bool] = True

    class Loaded(Message):
        def __init__(self, data: object, token: tuple) -> None:
            super().__init__()
            self.data, self.token = data, token

    def __init__(self) -> None:
        super().__init__()
        self._token: tuple | None = None
        self.shown_token: tuple | None = None

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

    def reload(self) -> None:
        """Read again from the store (in a worker)."""
        self._token = self.current_token()
        if self.NEEDS_BENCHMARK and not self.app.benchmark:
            self.show_no_benchmark()
            self.shown_token = self._token
            return
        self.loading_started()
        self._load(self._token)

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def _load(self, token: tuple) -> None:
        from benchloupe.store.db import connect

        conn = connect(self.app.db_path)
        try:
            data = self.fetch(conn, token[0])
        finally:
            conn.close()
        self.post_message(self.Loaded(data, token))

    def on_bench_screen_loaded(self, message: BenchScreen.Loaded) -> None:
        if message.token == self._token:
            self.show(message.data)
            self.shown_token = message.token

    def on_written(self, message: Written) -> None:
        if message.message:
            self.notify(message.message, markup=False)
        self.app.data_changed(reload_current=message.reload)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.app.report_error(event.worker.error, self.MODE)
            if event.worker.group == "load":
                self.loading_failed(event.worker.error)

    # ------------------------------------------------------------------ hooks
    def fetch(self, conn: sqlite3.Connection, benchmark: str | None) -> object:
        """Read what the screen shows (worker thread; no widgets here)."""
        return None

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
            table.set_data(table.frame.iloc[0:0], table.columns)
        lines = [w for w in self.query(SafeStatic) if not isinstance(w, TopBar) and w.id != "job-label"]
        for w in lines:
            w.update("")
        status = next((w for w in lines if w.has_class("status-line")), lines[0] if lines else None)
        if status is not None:
            what = self._token[0] if self.NEEDS_BENCHMARK and self._token else "the database"
            first = (error_text(error).strip().splitlines() or [type(error).__name__])[0]
            status.update(Text(f"could not read {what}: {first}", style="bold red"))
        self.forget()

    def forget(self) -> None:
        """Drop the rows the screen's keys act on (a failed read must leave nothing to decide on)."""

    def show_no_benchmark(self) -> None:
        """Called instead of fetch when no benchmark is open."""
        self.notify(self.app.no_benchmark_hint(), markup=False)


_WRITE_LOCK = threading.Lock()


class Written(Message):
    """A store write finished; ``message`` is shown when not empty."""

    def __init__(self, message: str, reload: bool) -> None:
        super().__init__()
        self.message, self.reload = message, reload


def store_write(screen: Screen, fn: Callable[[sqlite3.Connection], object], message: str = "", *,
                reload: bool = True) -> None:
    """Run ``fn(conn)`` in a thread worker on *screen* with its own connection, one write at a time; then
    tell the app the store changed (reloading the current screen when *reload*)."""

    def write() -> None:
        from benchloupe.store.db import connect

        with _WRITE_LOCK:
            conn = connect(screen.app.db_path)
            try:
                fn(conn)
            finally:
                conn.close()
        screen.post_message(Written(message, reload))

    screen.run_worker(write, thread=True, group="write", exit_on_error=False)
