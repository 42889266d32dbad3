"""Models: abilities with bootstrap 95% intervals, joint/static/arena (and baseline) ranks side by side,
family and owner; below the table, the highlighted model's unexpected cells (its anomaly flags)."""

from __future__ import annotations

import math
import sqlite3

import pandas as pd
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding

from benchloupe.tui.screens.base import BenchScreen
from benchloupe.tui.widgets.safe import SafeStatic
from benchloupe.tui.widgets.table import Column, FrameTable, fmt_int, fmt_num, format_lines

THETA_ORDER = ("joint", "static", "arena", "bt", "avg_reward")


def _interval(lo, hi, digits: int = 2, signed: bool = True) -> str:
    f = fmt_num(digits, signed)
    a, b = f(lo), f(hi)
    return f"[{a},{b}]" if a and b else ""


COLUMNS = [
    Column("name", "model", 17),
    Column("family", "family", 8),
    Column("owner", "owner", 8),
    Column("joint_rank", "J", 3, fmt_int, right=True),
    Column("static_rank", "S", 3, fmt_int, right=True),
    Column("arena_rank", "A", 3, fmt_int, right=True),
    Column("theta", "θ", 6, fmt_num(2, signed=True), right=True),
    Column("ci", "95% interval", 13),
    Column("rank_ci", "rank CI", 7),
    Column("bt_rank", "BT", 3, fmt_int, right=True),
    Column("avg_reward_rank", "AvgR", 4, fmt_int, right=True),
]


WIDE = 120


def columns_for(width: int) -> list[Column]:
    """The 80-column layout, or the model's whole name (and family, owner) on a wide terminal."""
    if width < WIDE:
        return COLUMNS
    wider = {"name": min(48, width - 95), "family": 10, "owner": 14}
    return [Column(c.key, c.label, wider[c.key], c.fmt, c.right) if c.key in wider else c for c in COLUMNS]


class ModelsScreen(BenchScreen):
    MODE = "models"
    BINDINGS = [Binding("enter", "model_flags", "Model's flags", id="models.flags")]

    def compose_body(self) -> ComposeResult:
        yield SafeStatic("", id="models-status", classes="status-line", markup=False)
        yield FrameTable(id="models-table")
        yield SafeStatic("", id="models-detail", classes="detail", markup=False)

    def fetch(self, conn: sqlite3.Connection, benchmark: str) -> dict:
        from benchloupe.store import curation, read, views

        df = views.model_table(conn, benchmark)
        theta = pd.Series([None] * len(df), dtype=float)
        source = pd.Series([""] * len(df), dtype=object)
        for kind in reversed(THETA_ORDER):
            col = df[f"{kind}_theta"].astype(float)
            theta = col.where(col.notna(), theta)
            source = source.where(col.isna(), kind)
        df["theta"] = theta.to_numpy()
        df["theta_source"] = source.to_numpy()
        df["ci"] = [_interval(lo, hi) for lo, hi in zip(df["lo"], df["hi"])]
        df["rank_ci"] = [f"{int(a)}-{int(b)}" if pd.notna(a) and pd.notna(b) else ""
                         for a, b in zip(df["rank_lo"], df["rank_hi"])]
        flags = curation.queue_flags(conn, read.benchmark_id(conn, benchmark), "anomaly")
        columns = columns_for(self.app.size.width)
        return {"frame": df, "columns": columns, "lines": format_lines(df, columns), "flags": flags}

    def show(self, data: dict) -> None:
        self.flags = data["flags"]
        df = data["frame"]
        table = self.query_one(FrameTable)
        table.set_data(df, data["columns"], data["lines"], keep_key="id")
        sources = sorted({s for s in df["theta_source"] if s})
        text = Text(f"{len(df)} models", style="bold")
        if sources:
            text.append(f" · θ from the latest {', '.join(sources)} run · J/S/A joint/static/arena ranks",
                        style="dim")
        else:
            text.append(" · no fits yet: 4 opens Runs (start a static or joint fit)", style="dim")
        if df["lo"].notna().any():
            text.append(" · intervals from the latest bootstrap", style="dim")
        self.query_one("#models-status", SafeStatic).update(text)
        table.focus()
        self._detail()

    def on_frame_table_highlighted(self, event: FrameTable.Highlighted) -> None:
        self._detail()

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
        text.append("\n")
        mine = self.flags[self.flags["model_id"] == row["id"]] if len(self.flags) else self.flags
        if not len(mine):
            text.append("no unexpected cells flagged for this model (5: Anomalies; screening runs in 4: Runs)",
                        style="dim")
        else:
            text.append(f"{len(mine)} unexpected cells", style="bold")
            text.append("  item · expected P(correct) · observed · residual · state\n", style="dim")
            for r in mine.head(6).itertuples():
                p = r.payload
                text.append(f"{r.item_key}  ")
                text.append(f"{_num(p.get('expected_p'))}  {p.get('observed', '')}  {_num(p.get('residual'), True)}  ")
                text.append(str(r.state), style="dim")
                text.append("\n")
        box.update(text)


def _num(v, signed: bool = False) -> str:
    if isinstance(v, int | float) and math.isfinite(v):
        return format(v, "+.2f" if signed else ".2f")
    return "" if v is None else str(v)
