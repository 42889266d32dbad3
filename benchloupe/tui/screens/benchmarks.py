"""Benchmarks: every benchmark with its counts and last runs; open one, import a file, build the demo."""

from __future__ import annotations

import glob
import math
import os
import shlex
import sqlite3
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding

from benchloupe.tui.screens.base import BenchScreen
from benchloupe.tui.widgets.dialogs import Field, FormDialog
from benchloupe.tui.widgets.safe import SafeStatic
from benchloupe.tui.widgets.table import Column, FrameTable, fmt_int, format_lines

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
    ]

    def compose_body(self) -> ComposeResult:
        yield SafeStatic("", id="bench-hint", markup=False)
        yield FrameTable(id="bench-table")
        yield SafeStatic("", id="bench-detail", classes="detail", markup=False)

    def fetch(self, conn: sqlite3.Connection, benchmark: str | None) -> dict:
        from benchloupe.store import read, runs

        df = read.benchmark_summaries(conn)
        df["results"] = [
            (read.static_cell_count(conn, name) if static else 0) + rewards + prefs
            for name, static, rewards, prefs in zip(df["name"], df["static_rows"], df["rewards"], df["preferences"])
        ]
        df["last_run"] = df["last_run"].fillna("")
        recent = {name: runs.list_runs(conn, name).head(4) for name in df["name"]}
        return {"frame": df, "lines": format_lines(df, COLUMNS), "recent": recent}

    def show(self, data: dict) -> None:
        df = data["frame"]
        self.recent = data["recent"]
        table = self.query_one(FrameTable)
        table.set_data(df, COLUMNS, data["lines"], keep_key="name")
        hint = self.query_one("#bench-hint", SafeStatic)
        if df.empty:
            msg = Text("The database is empty.  ", style="bold")
            msg.append("d", style="bold reverse")
            msg.append(" builds the demo workspace (simulated benchmarks with known truth);  ")
            msg.append("o", style="bold reverse")
            msg.append(" imports a results file.")
            hint.update(msg)
        else:
            if self.app.benchmark is None:  # the first benchmark with static results: every screen has content
                static = df[df["kind"] != "arena"] if "kind" in df else df
                self.app.benchmark = str((static if len(static) else df)["name"].iloc[0])
                self.query_one("TopBar").refresh_bar()
            table.move_to_value("name", self.app.benchmark)
            hint.update(Text(f"{len(df)} benchmarks in {self.app.db_path.name}.  enter opens one, "
                             "o imports a file, d adds the demo workspace.", style="dim"))
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
        row = table.frame.iloc[table.row]
        text = Text(str(name), style="bold")
        text.append(f"  {row['active_items']} active of {row['items']} items · {row['models']} models · "
                    f"{row['rewards']} rewards · {row['preferences']} preferences\n")
        recent = getattr(self, "recent", {}).get(name)
        if recent is None or recent.empty:
            text.append("no runs yet: 4 opens Runs", style="dim")
        else:
            for r in recent.itertuples():
                text.append(f"#{r.id} {r.kind} {r.status} {r.created_at}", style="red" if r.status == "failed" else "")
                if r.error:
                    text.append(f"  {r.error}", style="dim")
                text.append("\n")
        detail.update(text)

    def on_frame_table_selected(self, event: FrameTable.Selected) -> None:
        self.app.open_benchmark(str(event.table.frame["name"].iloc[event.row]))

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

        self.app.push_screen(FormDialog("Import results files", import_fields(), check=_check_import,
                                        note="Files, folders or globs, separated by spaces (quote a path with "
                                             "spaces); all are imported in one transaction. Only the options of "
                                             "the chosen (or detected) format are shown."), done)

    def _imported(self, result: object) -> None:
        if isinstance(result, dict) and result.get("summary"):
            self.app.notify(str(result["summary"]), title="Imported", timeout=15)


# ------------------------------------------------------------------------------------------------ import dialog

def split_paths(raw: str) -> list[str]:
    """Paths as a shell would split them: spaces or newlines separate, quotes keep a path with spaces whole."""
    try:
        paths = shlex.split(raw)
    except ValueError as exc:
        raise ValueError(f"{exc} (close the quote)") from None
    if not paths:
        raise ValueError("give one or more files, folders or globs")
    if "-" in paths:
        raise ValueError("standard input (-) is for the command line; name the files here")
    return [str(Path(p).expanduser()) for p in paths]


@lru_cache(maxsize=16)
def detected_format(raw_paths: str) -> str | None:
    """The format ``auto`` would pick for the first file the paths name (a file, a folder's first file, a glob's
    first match), or None. Reads at most one file's head, so it can run as the user types."""
    from benchloupe.store.importers.base import ImportFormatError
    from benchloupe.store.importers.detect import detect_format, wanted

    try:
        first = Path(shlex.split(raw_paths)[0]).expanduser()
    except (ValueError, IndexError):
        return None
    candidates: list[Path] = []
    if first.is_file():
        candidates = [first]
    elif first.is_dir():
        for n, (root, dirs, files) in enumerate(os.walk(first)):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            hit = next((Path(root) / f for f in sorted(files) if wanted(Path(root) / f, None)), None)
            if hit is not None or n > 50:
                candidates = [hit] if hit is not None else []
                break
    elif glob.has_magic(str(first)):
        candidates = [Path(h) for h in sorted(glob.glob(str(first), recursive=True))[:5] if Path(h).is_file()]
    for c in candidates:
        try:
            return detect_format(c)
        except (ImportFormatError, OSError):
            continue
    return None


def chosen_format(raw: Mapping[str, str]) -> str | None:
    fmt = raw.get("format", "") or "auto"
    return detected_format(raw.get("paths", "")) if fmt == "auto" else fmt


def _parse_option(kind: str):
    def parse(raw: str):
        if not raw:
            return None
        if kind == "flag":
            if raw.lower() in ("yes", "y", "true", "on", "1"):
                return True
            if raw.lower() in ("no", "n", "false", "off", "0"):
                return None
            raise ValueError(f"{raw!r} is not yes or no")
        if kind == "number":
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError(f"{raw!r} is not a finite number")
            return value
        return raw
    return parse


def _existing_file(raw: str) -> str | None:
    if not raw:
        return None
    p = Path(raw).expanduser()
    if not p.is_file():
        raise ValueError(f"no such file: {p}")
    return str(p)


def _yes_no(raw: str) -> bool:
    if raw.lower() in ("yes", "y", "true", "on", "1"):
        return True
    if raw.lower() in ("", "no", "n", "false", "off", "0"):
        return False
    raise ValueError(f"{raw!r} is not yes or no")


def import_fields() -> list[Field]:
    """The dialog's fields: paths, format, benchmark, replace, then every import option, each shown only when
    the chosen format (or, for auto, the format detected from the first path) takes it."""
    from benchloupe.jobs.imports import OPTIONS, format_options
    from benchloupe.store.importers.detect import ALIASES, FORMATS
    from benchloupe.tui.wording import FORM_LABELS

    formats = ("auto", *sorted(FORMATS), *sorted(ALIASES))

    def applies(name: str):
        return lambda raw: (fmt := chosen_format(raw)) is not None and name in format_options(fmt)

    fields = [Field("paths", FORM_LABELS["paths"], "", split_paths, "files, folders or globs (results/*/samples_*.jsonl)", list_paste=True),
              Field("format", FORM_LABELS["format"], "auto", str, f"auto = detect; or one of {', '.join(sorted(FORMATS))}",
                    choices=formats),
              Field("benchmark", FORM_LABELS["benchmark"], "", lambda v: v or None, "empty = from the file"),
              Field("replace", FORM_LABELS["replace"], "no", _yes_no, "yes replaces the benchmark's results (no = merge)")]
    for o in OPTIONS:
        parse = _existing_file if o.name == "models_file" else _parse_option(o.kind)
        fields.append(Field(o.name, o.label, "", parse, o.help + (" (yes/no)" if o.kind == "flag" else ""),
                            applies=applies(o.name)))
    return fields


def _check_import(values: dict) -> None:
    """Every path names something importable (as the CLI checks them) before the job starts."""
    from benchloupe.jobs.imports import expand_paths

    fmt = values.get("format")
    if not expand_paths(values["paths"], None if fmt in (None, "auto") else fmt):
        raise ValueError(f"files: no importable file in {' '.join(values['paths'])}; name the files, or a folder "
                         "that holds the format's files")
