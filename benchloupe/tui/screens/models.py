"""Models: the abilities, intervals and ranks of ONE run (the latest by default, named in the status line; r
steps to older runs), family and owner; below the table, the highlighted model's full name and its unexpected
cells (its anomaly flags of the latest anomaly run). Mixing runs showed a joint theta beside a static
bootstrap's interval (issue 11). ``/`` filters the rows as you type (name, family, owner; 4,280 metabench models),
escape clears; ``s``/``S`` sort by column. ``m`` marks a model and ``m`` on a second one compares the two (issue 34:
the numbers of ``benchloupe compare``, :mod:`benchloupe.tui.screens.model_compare`); ``m`` on the marked one
unmarks it."""

from __future__ import annotations

import math
import sqlite3
from dataclasses import replace

import numpy as np
import pandas as pd
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import Input

from benchloupe.tui.screens.base import BenchScreen
from benchloupe.tui.widgets.safe import SafeStatic, Text
from benchloupe.tui.widgets.table import (
    Column,
    FrameTable,
    fit_columns,
    fmt_int,
    fmt_num,
    keep_tail,
    status_width,
)
from benchloupe.words import count, estimate_text

SEARCH_DEBOUNCE = 0.05
RUN_WORDS = {"joint": "joint fit", "static": "static fit", "arena": "arena fit", "bt": "Bradley-Terry baseline",
             "avg-reward": "average-reward baseline", "bootstrap": "bootstrap"}


def _interval(lo, hi, digits: int = 2, signed: bool = True) -> str:
    f = fmt_num(digits, signed)
    a, b = f(lo), f(hi)
    return f"[{a},{b}]" if a and b else ""


def rank_interval(lo, hi) -> str:
    """A rank interval in whole ranks, rounded outwards: a bootstrap's ends are quantiles of the replicates'
    ranks (25.475-45.575 reads 25-46, which holds it); blank when the run has none. Exports keep the ends."""
    if pd.isna(lo) or pd.isna(hi):
        return ""
    return f"{math.floor(float(lo) + 1e-9)}-{math.ceil(float(hi) - 1e-9)}"


COLUMNS = [
    Column("name", "model", 17, identity=True),
    Column("family", "family", 8),
    Column("owner", "owner", 8),
    Column("rank", "rank", 4, fmt_int, right=True),
    Column("theta", "θ", 6, fmt_num(2, signed=True), right=True),
    Column("ci", "95% interval", 13, sort_key="lo", export=("se", "lo", "hi")),
    Column("rank_ci", "rank CI", 7, sort_key="rank_lo", export=("rank_lo", "rank_hi")),
]


ESTIMATE_COLUMN = Column("est", "estimated full accuracy (seen items)", 38, sort_key="estimate",
                         export=("estimate", "estimate_lo", "estimate_hi", "seen", "n_items", "observed"))


def columns_for(width: int, *, estimates: bool = False) -> list[Column]:
    """Every column from the one run shown; the model name takes the width the others leave (on a wide
    terminal family and owner get room too: "northwi…" at 160 columns beside a 60-cell name).  ``estimates``:
    the latest estimate run's column last (issue 34)."""
    cols = COLUMNS + ([ESTIMATE_COLUMN] if estimates else [])
    if width >= 120:
        wider = {"family": 12, "owner": 16}
        return fit_columns([replace(c, width=wider.get(c.key, c.width)) for c in cols], width)
    return fit_columns(cols, width)


class ModelsScreen(BenchScreen):
    """Every number on the screen comes from one run, named in the status line; r steps to an older run."""

    MODE = "models"
    BINDINGS = [Binding("enter", "model_flags", "Model's flags", id="models.flags"),
                Binding("r", "next_run", "Other run", id="models.run"),
                Binding("m", "mark", "Compare", id="models.compare"),
                Binding("slash", "search", "Search", id="models.search"),
                Binding("escape", "clear_search", "Clear", show=False, id="models.clear")]

    def __init__(self) -> None:
        super().__init__()
        self.run_id: int | None = None  # None: the latest run
        self.shown_run: int | None = None
        self.runs = pd.DataFrame()
        self.flags: dict = {}  # model id -> {count, top}: views.model_flag_summary
        self.query_text = ""
        self._haystack = np.array([], dtype=object)
        self._timer: Timer | None = None
        self.marked: tuple[int, str] | None = None  # (model id, name) marked with m to compare with another
        self.estimate_source: tuple[int | None, int | None] = (None, None)  # (estimate run, its calibration run)

    def compose_body(self) -> ComposeResult:
        yield SafeStatic("", id="models-status", classes="status-line", markup=False)
        yield Input(placeholder="search name, family and owner (escape clears)", id="models-search")
        yield FrameTable(id="models-table", searchable=False)
        yield SafeStatic("", id="models-detail", classes="detail", markup=False)

    def fetch(self, conn: sqlite3.Connection, benchmark: str) -> dict:
        from benchloupe.store import read, views

        runs = views.model_runs(conn, benchmark)
        ids = [int(i) for i in runs["id"]]
        rid = self.run_id if self.run_id in ids else (ids[0] if ids else None)
        df = views.run_model_table(conn, benchmark, rid)
        df["ci"] = [_interval(lo, hi) for lo, hi in zip(df["lo"], df["hi"])]
        df["rank_ci"] = [rank_interval(a, b) for a, b in zip(df["rank_lo"], df["rank_hi"])]
        flags = views.model_flag_summary(conn, read.benchmark_id(conn, benchmark), "anomaly")  # per model, by SQL
        # the calibration the estimates came from is named beside them: the columns may be another run's
        est_run, est_from, est = views.latest_estimates(conn, benchmark)
        columns = columns_for(self.app.size.width, estimates=bool(est))
        if est:  # partly evaluated models (issue 34): the estimate in its own column, never in the observed ones
            for f in views.ESTIMATE_FIELDS:
                df[f] = pd.array([est.get(int(i), {}).get(f) for i in df["id"]], dtype="Float64").astype(float)
            df["est"] = [estimate_text(*v) for v in zip(df["estimate"], df["estimate_lo"], df["estimate_hi"],
                                                        df["seen"], df["n_items"])]
        hay = (df["name"].astype(str) + "\n" + df["family"].fillna("").astype(str) + "\n"
               + df["owner"].fillna("").astype(str)).str.lower().to_numpy()
        return {"frame": df, "columns": columns, "flags": flags,  # the table formats the rows it draws
                "runs": runs, "run_id": rid, "haystack": hay, "estimate_run": est_run,
                "estimate_from": est_from}

    def show(self, data: dict) -> None:
        self.flags = data["flags"]
        self.runs = data["runs"]
        df = data["frame"]
        table = self.query_one(FrameTable)
        new_run = data["run_id"] != self.shown_run
        table.set_data(df, data["columns"], keep_key=None if new_run else "id")
        if new_run:  # a new fit (or another run chosen): start at rank 1
            table.sort_key, table.descending = None, False
            table.set_view(np.arange(len(df)))
        self.shown_run = data["run_id"]
        self.estimate_source = (data["estimate_run"], data["estimate_from"])
        self._haystack = data["haystack"]
        if self.marked is not None and not (df["id"] == self.marked[0]).any():
            self.marked = None  # the marked model is gone (removed, or another benchmark)
        if self.query_text:
            self._apply_search()
        self._status()
        if not self.query_one("#models-search", Input).has_focus:
            table.focus()
        self._detail()

    def loading_started(self) -> None:
        """The first load (or another benchmark's) says so while the worker reads (issue 26: 5,000 models)."""
        if self.shown_token is None or self.shown_token[0] != self.app.benchmark:
            self.query_one("#models-status", SafeStatic).update(Text(f"loading {self.app.benchmark}…", style="dim"))

    def forget(self) -> None:
        self.flags, self.runs, self.shown_run = pd.DataFrame(), pd.DataFrame(), None
        self.marked = None
        self._haystack = np.array([], dtype=object)

    def _status(self) -> None:
        table = self.query_one(FrameTable)
        df = table.frame
        text = Text(no_wrap=True, overflow="ellipsis")
        if self.marked is not None:  # first: at 80 columns the end of the line is cut
            text.append(f"A = {self.marked[1]} marked: m on another model compares · ", style="bold yellow")
        if self.query_text:
            text.append(f"{len(table.view)} of {count(len(df), 'model')}", style="bold")
            text.append(" /", style="dim")
            text.append(self.query_text, style="bold")
        else:
            text.append(count(len(df), "model"), style="bold")
        if self.shown_run is None:
            text.append(" · no fits yet: 4 opens Runs (start a static or joint fit)", style="dim")
        else:
            run = self.runs[self.runs["id"] == self.shown_run].iloc[0]
            k = int(np.flatnonzero(self.runs["id"].to_numpy() == self.shown_run)[0])
            text.append(f" · every column from run #{self.shown_run}, {RUN_WORDS.get(run['kind'], run['kind'])}",
                        style="bold")
            text.append(f" of {str(run['created_at'])[:16]}", style="dim")
            text.append(f" · r: other run ({k + 1} of {len(self.runs)})", style="dim")
        tail = Text(f"  sort: {table.sort_label} · ? all keys", style="dim")  # never the part cut (issue 32 #7)
        status = self.query_one("#models-status", SafeStatic)
        status.update(keep_tail(text, tail, status_width(status)))

    # ------------------------------------------------------------------ search
    def action_search(self) -> None:
        box = self.query_one("#models-search", Input)
        box.display = True
        box.focus()

    def action_clear_search(self) -> None:
        self._drop_search()
        self._apply_search()
        self.query_one(FrameTable).focus()

    def _drop_search(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        box = self.query_one("#models-search", Input)
        with box.prevent(Input.Changed):
            box.value = ""
        box.display = False
        self.query_text = ""

    def benchmark_changed(self) -> None:
        """A new benchmark (or a jump whose model the search hides): no search."""
        super().benchmark_changed()
        self._drop_search()
        if len(self._haystack) == len(self.query_one(FrameTable).frame):
            self._apply_search()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "models-search":
            return
        if self._timer is not None:
            self._timer.stop()
        value = event.value
        self._timer = self.set_timer(SEARCH_DEBOUNCE, lambda: self._search(value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "models-search":
            if self._timer is not None:
                self._timer.stop()
            self._search(event.value)
            self.query_one(FrameTable).focus()

    def _search(self, value: str) -> None:
        self.query_text = value
        self._apply_search()

    def _apply_search(self) -> None:
        """Keep the rows whose name, family or owner hold the typed text (case-insensitive)."""
        table = self.query_one(FrameTable)
        current = table.current_value("id")
        q = self.query_text.strip().lower()
        if q and len(self._haystack) == len(table.frame):
            keep = np.flatnonzero(pd.Series(self._haystack).str.contains(q, regex=False).to_numpy())
        else:
            keep = np.arange(len(table.frame))
        table.set_view(keep)
        if current is not None:
            table.move_to_value("id", current)
        self._status()
        self._detail()

    def action_next_run(self) -> None:
        """r: the next older run with model estimates (wrapping to the latest)."""
        if len(self.runs) < 2:
            self.notify("only one run has estimated these models", markup=False)
            return
        ids = [int(i) for i in self.runs["id"]]
        k = ids.index(self.shown_run) if self.shown_run in ids else -1
        self.run_id = ids[(k + 1) % len(ids)]
        self.reload()

    def on_frame_table_highlighted(self, event: FrameTable.Highlighted) -> None:
        self._detail()

    def action_mark(self) -> None:
        """m: mark the highlighted model as A; on a second model, compare the two (the mark is then spent, so
        back here m marks the next pair); on the marked one, unmark it."""
        table = self.query_one(FrameTable)
        if table.row is None:
            return
        row = table.frame.iloc[table.row]
        mid, name = int(row["id"]), str(row["name"])
        if self.marked is None:
            self.marked = (mid, name)
            self.notify(f"{name} marked as A: m on another model compares them", markup=False)
        elif self.marked[0] == mid:
            self.marked = None
            self.notify(f"{name} unmarked", markup=False)
        else:
            from benchloupe.tui.screens.model_compare import ModelCompareScreen

            first, self.marked = self.marked[1], None
            self.app.push_screen(ModelCompareScreen(first, name))
        self._status()

    def action_model_flags(self) -> None:
        """Enter: the highlighted model's anomaly flags on 5 Anomalies."""
        table = self.query_one(FrameTable)
        if table.row is None:
            return
        row = table.frame.iloc[table.row]
        self.app.show_flags("anomalies", "model_id", int(row["id"]), f"model {row['name']}")

    def _detail(self) -> None:
        table = self.query_one(FrameTable)
        box = self.query_one("#models-detail", SafeStatic)
        if table.row is None:
            box.update("")
            return
        row = table.frame.iloc[table.row]
        text = Text(str(row["name"]), style="bold")
        text.append(f"  family {row['family'] or '-'} · owner {row['owner'] or '-'}")
        if pd.notna(row["se"]):
            text.append(f" · se {row['se']:.3f}")
        if "estimate" in row and pd.notna(row["estimate"]):
            text.append("\n")
            text.append(estimate_text(row["estimate"], row["estimate_lo"], row["estimate_hi"], row["seen"],
                                      row["n_items"]), style="bold")
            text.append(f"  estimated for the whole benchmark; observed {100 * row['observed']:.1f} % on the "
                        f"{int(row['seen'])} items it answered", style="dim")
            est_run, est_from = self.estimate_source
            text.append(f" · estimate run #{est_run}" + (f" from calibration run #{est_from}" if est_from else ""),
                        style="dim")
        text.append("\n")
        mine = self.flags.get(int(row["id"]))
        if not mine:
            text.append("no unexpected cells flagged for this model (5: Anomalies; screening runs in 4: Runs)",
                        style="dim")
        else:
            text.append(count(int(mine["count"]), "unexpected cell"), style="bold")
            text.append("  item · expected P(correct) · observed · residual · state\n", style="dim")
            for r in mine["top"]:
                p = r["payload"]
                text.append(f"{r['item_key']}  ")
                text.append(f"{_num(p.get('expected_p'))}  {p.get('observed', '')}  {_num(p.get('residual'), True)}  ")
                text.append(str(r["state"]), style="dim")
                text.append("\n")
        box.update(text)


def _num(v, signed: bool = False) -> str:
    if isinstance(v, int | float) and math.isfinite(v):
        return format(v, "+.2f" if signed else ".2f")
    return "" if v is None else str(v)
