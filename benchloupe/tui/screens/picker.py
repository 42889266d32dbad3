"""The benchmark picker (``B`` anywhere, palette "benchmark: switch"): the database's benchmarks in a table
(``/`` searches, ``s`` sorts); enter switches every screen to the highlighted one, escape keeps the current."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen

from benchloupe.tui.widgets.safe import SafeStatic, Text
from benchloupe.tui.widgets.table import Column, FrameTable, fmt_int, format_lines

COLUMNS = [Column("name", "benchmark", 30, identity=True), Column("kind", "kind", 6),
           Column("items", "items", 6, fmt_int, right=True), Column("models", "models", 6, fmt_int, right=True)]


class BenchmarkPicker(ModalScreen[str | None]):
    """Choose the benchmark every screen shows; dismisses with its name, or None."""

    AUTO_FOCUS = "FrameTable"
    BINDINGS = [Binding("enter", "choose", "Switch to it", id="picker.choose"),
                Binding("escape", "cancel", "Cancel", id="picker.cancel")]

    def __init__(self, current: str | None) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog picker"):
            yield SafeStatic(Text("Switch benchmark", style="bold"), markup=False)
            yield FrameTable(id="picker-table")
            yield SafeStatic(Text("enter: switch   / search   s sort   escape: cancel", style="dim"), markup=False)

    def on_mount(self) -> None:
        self.run_worker(self._fetch, thread=True, group="picker", exit_on_error=False)

    def _fetch(self) -> None:
        from benchloupe.store import read
        from benchloupe.store.db import connect

        conn = connect(self.app.db_path)
        try:
            df = read.benchmark_summaries(conn)
        finally:
            conn.close()
        lines = format_lines(df, COLUMNS)
        self.app.call_from_thread(self._show, df, lines)

    def _show(self, df, lines) -> None:
        table = self.query_one(FrameTable)
        table.set_data(df, COLUMNS, lines)
        if self.current is not None:
            table.move_to_value("name", self.current)
        table.focus()

    def action_choose(self) -> None:
        name = self.query_one(FrameTable).current_value("name")
        if name is not None:
            self.dismiss(str(name))

    def action_cancel(self) -> None:
        self.dismiss(None)
