"""``w`` writes what the screen is about and ``W`` only decisions (issue 32 point 11): on Runs the runs (it wrote
the catalogue of analyses), on BenchFill the session's proposals (it wrote the sessions table, no proposal in
it), on every other screen its rows; ``W`` leaves out decisions that were undone (they were written as empty
"open" rows), on every triage screen."""

from __future__ import annotations

import threading

import pytest

from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.widgets.table import FrameTable
from tests.tui.conftest import idle, loaded, wait_until
from tests.tui.test_exports import export

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def _stored(db, sql: str, *args) -> list:
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return [r[0] for r in conn.execute(sql, args)]
    finally:
        conn.close()


def _fill_session(db) -> None:
    from benchloupe.engine.benchfill import BenchFillConfig
    from benchloupe.jobs.fill import FillOptions
    from benchloupe.prompts import simulated
    from benchloupe.tui.jobs_ui import run_fill

    with simulated.serving():
        run_fill(lambda *a: None, threading.Event(), str(db), "demo-math", FillOptions(), BenchFillConfig())


async def test_w_on_every_screen_writes_what_the_screen_is_about(showcase_db, tmp_path):
    _fill_session(showcase_db)
    runs = _stored(showcase_db, "SELECT r.id FROM runs r JOIN benchmarks b ON b.id = r.benchmark_id"
                                " WHERE b.name = 'demo-math'")
    app = BenchloupeApp(showcase_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        for key, mode in (("1", "benchmarks"), ("2", "items"), ("3", "models"), ("4", "runs"), ("5", "anomalies"),
                          ("6", "reversals"), ("7", "coverage"), ("8", "benchfill")):
            await pilot.press(key)
            await wait_until(pilot, loaded(app, mode), what=mode)
            screen = app.screen
            for table in screen.query(FrameTable):  # whichever table has the focus
                table.focus()
                await pilot.pause()
                rows = await export(pilot, app, tmp_path / f"{mode}-{table.id}.csv")
                if mode == "runs":
                    assert sorted(int(r["id"]) for r in rows) == sorted(runs), (table.id, rows[:2])
                    assert {"kind", "status", "metrics"} <= set(rows[0])
                elif mode == "benchfill":
                    view = [int(screen.cands["id"].iloc[i]) for i in screen.view]
                    assert view and [int(r["id"]) for r in rows] == view
                    assert {"child_key", "parent_key", "review_state", "text", "answer", "distance"} <= set(rows[0])
                    marks = ",".join("?" * len(view))
                    sids = set(_stored(showcase_db, f"SELECT session_id FROM fill_candidates WHERE id IN ({marks})",
                                       *view))
                    assert {int(r["session_id"]) for r in rows} == sids == {screen.session_id}
                else:
                    assert rows and len(rows) == len(table.view), (mode, table.id)
            if not list(screen.query(FrameTable)):  # a queue: the flags it steps through
                from benchloupe.tui.export import screen_table

                rows = await export(pilot, app, tmp_path / f"{mode}.csv")
                assert len(rows) == len(screen_table(screen)[0]) and (rows or mode == "reversals")
                assert {r["kind"] for r in rows} <= {"anomaly" if mode == "anomalies" else "reversal"}


async def test_W_leaves_out_decisions_undone_on_every_triage_screen(flagged_db, tmp_path):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    undone, kept = [], []
    async with app.run_test(size=SIZE) as pilot:
        for key, mode in (("5", "anomalies"), ("6", "reversals"), ("7", "coverage")):
            await pilot.press(key)
            await wait_until(pilot, loaded(app, mode), what=mode)
            screen = app.screen
            current = (lambda s=screen: s.current_id()) if mode != "coverage" else (
                lambda s=screen: int(s.query_one(FrameTable).current_value("flag_id")))
            first = current()
            await pilot.press("d")  # decided, then taken back
            await wait_until(pilot, lambda: idle(app)() and app.write_queue.pending == 0, what="decided")
            await pilot.press("z")
            await wait_until(pilot, lambda: idle(app)() and app.write_queue.pending == 0, what="undone")
            undone.append(first)
            assert current() == first  # the undone flag is on the card again
            await pilot.press("down" if mode == "coverage" else "j")
            second = current()
            assert second != first
            await pilot.press("c")  # decided and kept
            await wait_until(pilot, lambda: idle(app)() and app.write_queue.pending == 0, what="kept")
            kept.append(second)
        marks = ",".join("?" * len(undone))
        assert _stored(flagged_db, f"SELECT count(*) FROM flags WHERE id IN ({marks}) AND state = 'open'"
                       " AND version > 0", *undone)[0] == len(undone)
        await pilot.press("W")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="the path dialog")
        out = tmp_path / "decisions.csv"
        app.screen.query_one("Input").value = str(out)
        await pilot.press("enter")
        await wait_until(pilot, lambda: out.exists() and idle(app)(), what="written")
    import csv

    with out.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    ids = {int(r["id"]) for r in rows if r["what"] == "flag"}
    assert set(kept) <= ids and not set(undone) & ids, (kept, undone, ids)
    assert not [r for r in rows if r["state"] == "open" and not r["note"]]
