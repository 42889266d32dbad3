"""Benchmarks: every benchmark with its counts and last runs; open one, import a file, build the demo.

The first screen of ``benchloupe open``: it reads plain rows (store/summary.py) into a
:class:`~benchloupe.columns.Columns`, so its first paint waits for neither pandas nor the response matrix
(issue 26: counting a 5,000 x 14,000 benchmark's results through the dense matrix, and importing pandas, were
most of a 1.6 s first paint)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding

from benchloupe.columns import Columns
from benchloupe.tui.screens.base import BenchScreen
from benchloupe.tui.screens.import_form import check_import, import_fields
from benchloupe.tui.widgets.dialogs import FormDialog
from benchloupe.tui.widgets.safe import SafeStatic, Text
from benchloupe.tui.widgets.table import Column, FrameTable, column_values, fmt_int, format_lines
from benchloupe.words import count

COLUMNS = [
    Column("name", "benchmark", 22),
    Column("kind", "kind", 6),
    Column("items", "items", 6, fmt_int, right=True),
    Column("models", "models", 6, fmt_int, right=True),
    Column("results", "results", 8, fmt_int, right=True),
    Column("last_run", "last run", 24),
]


class BenchmarksScreen(BenchScreen):
    MODE = "benchmarks"
    NEEDS_BENCHMARK = False
    BINDINGS = [
        Binding("enter", "select_row", "Open", id="benchmarks.open"),
        Binding("d", "demo", "Demo workspace", id="benchmarks.demo"),
        Binding("o", "import_file", "Import file", id="benchmarks.import"),
        Binding("r", "report", "Write report", id="benchmarks.report"),
    ]

    def compose_body(self) -> ComposeResult:
        yield SafeStatic("", id="bench-hint", markup=False)
        yield FrameTable(id="bench-table")
        yield SafeStatic("", id="bench-detail", classes="detail", markup=False)

    def fetch(self, conn: sqlite3.Connection, benchmark: str | None) -> dict:
        from benchloupe.store.summary import recent_runs, summary_rows

        cols, rows = summary_rows(conn)
        at = cols.index("results")  # every result: observed static cells, arena rewards, preferences
        rows = [r[:at] + (r[at] + r[cols.index("rewards")] + r[cols.index("preferences")],) + r[at + 1:] for r in rows]
        last = cols.index("last_run")
        rows = [r[:last] + (r[last] or "",) + r[last + 1:] for r in rows]
        df = Columns.from_rows(rows, cols)
        recent = {name: recent_runs(conn, name, 4) for name in df["name"].tolist()}
        return {"frame": df, "lines": format_lines(df, COLUMNS), "recent": recent}

    def show(self, data: dict) -> None:
        df = data["frame"]
        self.recent = data["recent"]
        self.app.benchmark_count = len(df)
        table = self.query_one(FrameTable)
        table.set_data(df, COLUMNS, data["lines"], keep_key="name")
        hint = self.query_one("#bench-hint", SafeStatic)
        if not len(df):
            msg = Text("The database is empty.  ", style="bold")
            msg.append("d", style="bold reverse")
            msg.append(" builds the demo workspace (simulated benchmarks with known truth);  ")
            msg.append("o", style="bold reverse")
            msg.append(" imports a results file.")
            hint.update(msg)
        else:
            if self.app.benchmark is None:  # the first benchmark with static results: every screen has content
                names = df["name"].tolist()
                static = [n for n, kind in zip(names, df["kind"].tolist()) if kind != "arena"]
                self.app.benchmark = str((static or names)[0])
                self.query_one("TopBar").refresh_bar()
            table.move_to_value("name", self.app.benchmark)
            hint.update(Text(f"{count(len(df), 'benchmark')} in {self.app.db_path.name}.  enter opens one, "
                             "o imports a file, d adds the demo workspace, r writes a report.", style="dim"))
        table.focus()
        self._show_detail()
        self.app.warm_up()

    def on_frame_table_highlighted(self, event: FrameTable.Highlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        table = self.query_one(FrameTable)
        name = table.current_value("name")
        detail = self.query_one("#bench-detail", SafeStatic)
        if name is None:
            detail.update("")
            return
        row = {k: table.current_value(k) for k in ("active_items", "items", "models", "rewards", "preferences")}
        text = Text(str(name), style="bold")
        text.append(f"  {row['active_items']} active of {count(int(row['items']), 'item')} · "
                    f"{count(int(row['models']), 'model')} · {count(int(row['rewards']), 'reward')} · "
                    f"{count(int(row['preferences']), 'preference')}\n")
        recent = getattr(self, "recent", {}).get(name)
        if not recent:
            text.append("no runs yet: 4 opens Runs", style="dim")
        else:
            for r in recent:
                text.append(f"#{r['id']} {r['kind']} {r['status']} {r['created_at']}",
                            style="red" if r["status"] == "failed" else "")
                if r["error"]:
                    text.append(f"  {r['error']}", style="dim")
                text.append("\n")
        detail.update(text)

    def on_frame_table_selected(self, event: FrameTable.Selected) -> None:
        self.app.open_benchmark(str(column_values(event.table.frame, "name")[event.row]))

    def action_demo(self) -> None:
        from benchloupe.tui.jobs_ui import demo_job

        self.app.start_job("demo workspace", demo_job(self.app.db_path))

    def action_import_file(self) -> None:
        """The import dialog: the options of ``benchloupe import`` that apply to the chosen format."""
        from benchloupe.tui.jobs_ui import import_job

        def done(values: dict | None) -> None:
            if not values:
                return
            paths, fmt = values.pop("paths"), values.pop("format")
            title = f"import {Path(paths[0]).name}" + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")
            self.app.start_job(title, import_job(self.app.db_path, paths, None if fmt == "auto" else fmt, values),
                               on_done=self._imported)

        self.app.push_screen(FormDialog("Import results files", import_fields(), check=check_import,
                                        note="Files, folders or globs, separated by spaces (quote a path with "
                                             "spaces); all are imported in one transaction. Only the options of "
                                             "the chosen (or detected) format are shown."), done)

    def action_report(self) -> None:
        """The report of the highlighted benchmark (``benchloupe report``), as a job: where to write it, and as
        what; the path is checked in the form (a folder for an HTML file, a missing folder: one line)."""
        from benchloupe.report.build import check_output, default_output
        from benchloupe.tui.jobs_ui import report_job
        from benchloupe.tui.widgets.dialogs import Field

        name = self.query_one(FrameTable).current_value("name") or self.app.benchmark
        if name is None:
            self.app.notify("no benchmark to report on: import one, or d builds the demo", severity="warning",
                            markup=False)
            return

        def path(raw: str) -> str:
            if not raw.strip():
                raise ValueError("give a file (html) or a folder (md) to write")
            return raw.strip()

        def check(values: dict) -> None:
            check_output(Path(values["output"]).expanduser(), values["format"])

        def done(values: dict | None) -> None:
            if values:
                out = str(Path(values["output"]).expanduser().resolve())
                self.app.start_job(f"report of {name}", report_job(self.app.db_path, str(name), out, values["format"]),
                                   on_done=self._reported)

        fields = [Field("output", "write to", str(default_output("html", str(name))), path,
                        "an HTML file, or a folder for md (report.md with its figures beside it)"),
                  Field("format", "format", "html", lambda v: v or "html", choices=("html", "md"))]
        self.app.push_screen(FormDialog(f"Report of {name}", fields, check=check,
                                        note="Every analysis's latest finished run, with figures, captions and "
                                             "their numbers; a section without a run names the command that "
                                             "makes it."), done)

    def _reported(self, result: object) -> None:
        if isinstance(result, dict) and result.get("message"):
            self.app.notify(str(result["message"]), title="Report", timeout=15, markup=False)

    def _imported(self, result: object) -> None:
        if isinstance(result, dict) and result.get("summary"):
            self.app.notify(str(result["summary"]), title="Imported", timeout=15)
