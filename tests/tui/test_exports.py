"""``w`` writes what is stored, not what is drawn (issue 21 item 4): from every list screen of the demo (its
analyses run, a bootstrap, a BenchFill session), the exported file read back holds each value at full
precision (a difficulty as the fit's float, an interval as its two ends), and display words ("all right",
"[0.12,0.34]", "simulated · ") only in columns of their own, if at all."""

from __future__ import annotations

import csv
import json
import math
import threading

import pandas as pd
import pytest

from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.widgets.table import FrameTable
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


async def export(pilot, app, out) -> list[dict]:
    """w, the path typed over the proposed one, enter; the file read back (CSV rows or JSON records)."""
    await pilot.press("w")
    await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="the path dialog")
    app.screen.query_one("Input").value = str(out)
    await pilot.press("enter")
    await wait_until(pilot, lambda: out.exists() and idle(app)(), what=f"{out.name} written")
    if out.suffix == ".json":
        return json.loads(out.read_text(encoding="utf-8"))
    with out.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def same(written, stored) -> bool:
    """A CSV text or JSON value equals the stored value exactly (a float by its shortest repr)."""
    if stored is None or (isinstance(stored, float) and math.isnan(stored)) or stored is pd.NA:
        return written in ("", None)
    if isinstance(stored, bool):
        return str(written) in (str(stored), str(int(stored)))
    if isinstance(stored, int | float):
        return float(written) == float(stored)
    return str(written) == str(stored)


def check_stored(rows: list[dict], frame: pd.DataFrame) -> None:
    """Every exported cell is the frame's stored value of that column, row for row."""
    assert len(rows) == len(frame)
    for k, row in enumerate(rows):
        for col, v in row.items():
            stored = frame[col].iloc[k]
            stored = stored.item() if hasattr(stored, "item") else stored
            assert same(v, stored), (col, k, v, stored)


async def _open(pilot, app, key: str, mode: str):
    await pilot.press(key)
    await wait_until(pilot, loaded(app, mode), what=mode)
    return app.screen


async def test_items_export_writes_the_difficulty_as_stored(showcase_db, tmp_path):
    app = BenchloupeApp(showcase_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app, "2", "items")
        frame = screen.query_one(FrameTable).frame
        for out in (tmp_path / "items.csv", tmp_path / "items.json"):
            rows = await export(pilot, app, out)
            assert "difficulty" in rows[0] and "difficulty_text" not in rows[0], list(rows[0])
            shown = frame.iloc[screen.query_one(FrameTable).view].reset_index(drop=True)
            check_stored(rows, shown)
            difficulty = [float(r["difficulty"]) for r in rows]
            assert any(round(d, 2) != d for d in difficulty)  # full precision, not the 2 digits drawn
            words = {str(r[c]) for r in rows for c in r if c != "difficulty_note"}
            assert not words & {"all right", "all wrong"}
            assert {r["difficulty_note"] for r in rows} <= {"", None, "all right", "all wrong"}


async def test_models_export_writes_intervals_as_their_ends(showcase_db, tmp_path):
    from benchloupe.jobs import ANALYSES

    ANALYSES["bootstrap"].run(showcase_db, "demo-math", ANALYSES["bootstrap"].config_cls(B=20))
    app = BenchloupeApp(showcase_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app, "3", "models")
        rows = await export(pilot, app, tmp_path / "models.csv")
        assert {"lo", "hi", "rank_lo", "rank_hi", "theta", "rank"} <= set(rows[0]), list(rows[0])
        assert not {"ci", "rank_ci"} & set(rows[0])
        check_stored(rows, screen.query_one(FrameTable).frame)
        assert any(float(r["rank_lo"]) % 1 for r in rows)  # a bootstrap's fractional rank interval, kept


async def test_coverage_runs_and_benchfill_exports_write_stored_values(showcase_db, tmp_path):
    from benchloupe.engine.benchfill import BenchFillConfig
    from benchloupe.jobs.fill import FillOptions
    from benchloupe.prompts import simulated
    from benchloupe.tui.jobs_ui import run_fill

    with simulated.serving():
        run_fill(lambda *a: None, threading.Event(), str(showcase_db), "demo-math", FillOptions(), BenchFillConfig())
    app = BenchloupeApp(showcase_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app, "7", "coverage")
        rows = await export(pilot, app, tmp_path / "gaps.csv")
        assert {"ci_lo", "ci_hi", "lo", "hi", "width"} <= set(rows[0]) and not {"interval", "mark"} & set(rows[0])
        assert all(r["ci_lo"] for r in rows[:3])  # the showcase coverage run has C.6 intervals
        check_stored(rows, screen.query_one(FrameTable).frame)

        screen = await _open(pilot, app, "8", "benchfill")
        rows = await export(pilot, app, tmp_path / "proposals.csv")  # the session's proposals (issue 32 #11)
        shown = screen.cands.iloc[screen.view].reset_index(drop=True)
        check_stored(rows, shown[list(rows[0])])
        assert any(round(float(r["distance"]), 3) != float(r["distance"]) for r in rows if r["distance"])

        screen = await _open(pilot, app, "4", "runs")
        rows = await export(pilot, app, tmp_path / "runs.json")
        assert "summary" not in rows[0] and isinstance(json.loads(rows[0]["metrics"]), dict), list(rows[0])
        check_stored(rows, screen.query_one("#history", FrameTable).frame)
