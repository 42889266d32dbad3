"""Export from the workbench (issue 11, "what a curator expects" 6): the table on screen, as filtered, searched
and sorted, with full unformatted values, and every triage decision of the open benchmark (flags and BenchFill
proposals), to CSV or JSON at a path the curator confirms. The file gets the data byte for byte (csv quoting
only, no escaping, no cutting); only what is drawn on the terminal is escaped.
"""

from __future__ import annotations

import csv
import json
import math
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

FORMATS = (".csv", ".json")
FLAG_COLUMNS = ["id", "kind", "state", "note", "updated_by", "updated_at", "item_key", "model", "model_b", "score", "run_id"]
DECISION_COLUMNS = ["what", "kind", "id", "state", "note", "by", "at", "item", "proposal", "model", "model_b", "score",
                    "run_id", "session_id", "version", "text"]


def default_path(what: str, benchmark: str | None, cwd: Path | None = None) -> Path:
    """``benchloupe-<what>-<benchmark>.csv`` in the current directory (the name made safe for a file)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", benchmark or "all").strip("._") or "benchmark"
    return (cwd or Path.cwd()) / f"benchloupe-{what}-{safe}.csv"


def check_path(raw: str) -> str | None:
    """Why *raw* cannot be written to (None when it can): a .csv or .json file in an existing folder."""
    if not raw.strip():
        return "give a file path ending in .csv or .json"
    p = Path(raw).expanduser()
    if p.suffix.lower() not in FORMATS:
        return f"{p.name}: end the name in .csv or .json (the format follows the suffix)"
    if p.is_dir():
        return f"{p}: is a folder; give a file name"
    if not p.parent.exists():
        return f"{p.parent}: no such folder"
    return None


def screen_table(screen) -> tuple[pd.DataFrame, str] | None:
    """What *screen* shows as a table, rows in the order shown, and a name for the file; None when it shows
    none. A screen with an ``export_table()`` says itself (Runs: its run history, whichever table has the
    focus, not the catalogue of analyses; BenchFill: the session's proposals as the review filter shows them,
    not the sessions table: issue 32 point 11); otherwise a screen's focused table wins over its others; a
    triage queue exports the flags it steps through (its state filter and model/item focus)."""
    from benchloupe.tui.widgets.table import FrameTable

    own = getattr(screen, "export_table", None)
    if own is not None:  # the screen says what its table is (Runs: the runs; BenchFill: the proposals)
        return own()
    tables = list(screen.query(FrameTable))
    if tables:
        table = screen.focused if isinstance(screen.focused, FrameTable) else tables[0]
        name = screen.MODE if len(tables) == 1 or table is tables[0] else f"{screen.MODE}-{table.id}"
        return table.export_frame(), name
    reader = getattr(screen, "export_rows", None)
    if reader is not None:  # a triage queue holds a page of its view: the export reads the whole view
        got = reader(FLAG_COLUMNS)
        return (got, screen.MODE) if got is not None else None
    return None


@dataclass(frozen=True)
class QueueRows:
    """A triage queue's view to export: ``count`` rows, read whole by ``read(conn)`` (in the export's worker:
    210,060 anomalies are not read on the UI thread, issue 26)."""

    count: int
    read: Callable[[sqlite3.Connection], pd.DataFrame]

    def __len__(self) -> int:
        return self.count


def decisions(conn: sqlite3.Connection, benchmark: str) -> pd.DataFrame:
    """Every decision on *benchmark*: each flag triaged or annotated (anomalies, reversals, gaps; its own
    stored state, earlier runs' too; a flag whose decisions were all undone is open with no note again and is
    left out: issue 32 point 11 found such flags as empty "open" rows) and each BenchFill proposal accepted, rejected or approved, with its note,
    who made the decision and when (``by``, ``at``: issue 25). A proposal's ``item`` is the key of the item its
    accept created (empty otherwise) and ``proposal`` its label in the session. Ids are whole numbers (issue 21
    #9: they were written as 3.0 where a column also held empty cells)."""
    from benchloupe.store import curation, fill, read

    bid = read.benchmark_id(conn, benchmark)
    f = curation.flags(conn, benchmark_id=bid)
    f = f[(f["state"] != "open") | (f["note"] != "")]  # decided then undone: open, no note, not a decision
    rows = [{"what": "flag", "kind": r.kind, "id": int(r.id), "state": r.state, "note": r.note,
             "by": r.updated_by or None, "at": r.updated_at, "item": r.item_key, "proposal": None,
             "model": r.model, "model_b": r.model_b, "score": r.score, "run_id": _int(r.run_id), "session_id": None,
             "version": int(r.version), "text": None} for r in f.itertuples()]
    c = fill.candidates(conn, reviewable_only=False)
    c = c[(c["benchmark"] == benchmark) & c["review_state"].isin(("accepted", "rejected", "waiting"))]
    rows += [{"what": "proposal", "kind": "benchfill", "id": int(r.id), "state": r.review_state, "note": r.note,
              "by": r.decided_by or None, "at": r.decided_at, "item": r.item_key if isinstance(r.item_key, str)
              else None, "proposal": r.child_key, "model": None, "model_b": None, "score": r.distance,
              "run_id": None, "session_id": int(r.session_id), "version": int(r.version), "text": r.text}
             for r in c.itertuples()]
    frame = pd.DataFrame(rows, columns=DECISION_COLUMNS)
    for col in ("id", "run_id", "session_id", "version"):
        frame[col] = frame[col].astype("Int64")
    return frame


PROPOSAL_COLUMNS = ["session_id", "id", "child_key", "round", "parent_key", "review_state", "note", "decided_by",
                    "decided_at", "valid", "verdict", "difficulty_norm", "target", "distance", "item_key", "text",
                    "answer"]


def proposals(cands: pd.DataFrame, view: list[int]) -> pd.DataFrame:
    """A BenchFill session's proposals *view* (positions in *cands*, in the review queue's order) with what a
    curator reviews: its parent's key, the state, note and who decided, the judge's verdict, the estimated
    difficulty, the target and the distance, the item an accept created, the text and the reference answer."""
    rows = cands.iloc[list(view)] if len(cands) else pd.DataFrame(columns=PROPOSAL_COLUMNS)
    out = rows.reindex(columns=PROPOSAL_COLUMNS).reset_index(drop=True)
    for col in ("session_id", "id", "round", "valid"):
        out[col] = out[col].astype("Int64")
    return out


def _int(v) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def _plain(v):
    """A cell as a JSON/CSV value: numpy scalars as Python ones, missing as None."""
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def write_frame(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write *frame* to *path* (.csv: a header row then one row per record; .json: a list of records),
    UTF-8, values exactly as stored; the absolute path written."""
    p = Path(path).expanduser().resolve()
    records = [[_plain(v) for v in row] for row in frame.itertuples(index=False, name=None)]
    columns = [str(c) for c in frame.columns]
    if p.suffix.lower() == ".json":
        data = [dict(zip(columns, r)) for r in records]
        p.write_text(json.dumps(data, ensure_ascii=False, indent=1, default=str) + "\n", encoding="utf-8")
    else:
        with p.open("w", encoding="utf-8", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(columns)
            w.writerows([["" if v is None else v for v in r] for r in records])
    return p
