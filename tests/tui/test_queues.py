"""Queues and numbers that are true (issue 11): a queue holds the latest run's flags with earlier decisions
carried over, the Reversals queue steps through pairs that reversed, the status line agrees with the card."""

from __future__ import annotations

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import add_flags, idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def _decide_first_anomaly(db) -> tuple[int, int]:
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        f = curation.flags(conn, kind="anomaly").iloc[0]
        curation.set_flag_state(conn, int(f["id"]), "confirmed", "typo in the key")
        return int(f["model_id"]), int(f["item_id"])
    finally:
        conn.close()


async def test_rerunning_an_analysis_does_not_duplicate_its_queue(flagged_db):
    model_id, item_id = _decide_first_anomaly(flagged_db)
    add_flags(flagged_db)  # the same analyses again: the same cells flagged by new runs
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        assert len(screen.flags) == 12 and screen.flags["run_id"].nunique() == 1
        cell = screen.flags[(screen.flags["model_id"] == model_id) & (screen.flags["item_id"] == item_id)]
        assert cell["state"].tolist() == ["confirmed"] and cell["note"].tolist() == ["typo in the key"]
        assert "1 of 12 triaged" in str(screen.query_one("#queue-status").render())
        card = str(screen.query_one("#queue-detail").render())
        assert "carried over" in card
        await pilot.press("h")  # earlier runs on request, marked superseded
        await wait_until(pilot, lambda: loaded(app, "anomalies")() and len(screen.flags) == 24, what="all runs")
        assert screen.flags["superseded"].sum() == 12
        await pilot.press("6")
        await wait_until(pilot, loaded(app, "reversals"), what="reversals")
        assert app.screen.flags["run_id"].nunique() == 1
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        assert app.screen.frame["anomalies"].max() == 1


async def test_reversals_queue_steps_through_reversed_pairs(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        await wait_until(pilot, loaded(app, "reversals"), what="reversals")
        screen = app.screen
        # add_flags: pairs 0 and 2 reversed (the screen holds the view's rows, a page at a time: issue 26)
        assert screen.total == 4 and screen.view_len == len(screen.view) == 2
        assert all(screen.flags["payload"].iloc[i]["reversed"] for i in screen.view)
        assert "Reversal 1 of 2" in str(screen.query_one("#queue-status").render())
        assert "Reversed: yes" in str(screen.query_one("#queue-detail").render())
        await pilot.press("f")  # every near-tie pair
        assert len(screen.view) == 4


async def test_status_agrees_with_the_card_after_a_decision(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        await pilot.press("c")
        await pilot.press("f", "f")  # filter: confirmed
        assert screen.state_filter == "confirmed" and len(screen.view) == 1
        await pilot.press("o")  # reopen it
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="save")
        status = str(screen.query_one("#queue-status").render())
        card = str(screen.query_one("#queue-detail").render())
        assert " open" in card
        assert "now open" in status, status


@pytest.mark.parametrize("observed, shown", [
    (0.0, "0 (wrong)"),  # a right/wrong outcome the analysis stored as a float: it was "0.00"
    (1.0, "1 (right)"),
    (0, "0 (wrong)"),
    (0.004, "0.004"),  # a partial-credit or rate outcome: it was "0.00"
    (0.375, "0.375"),
    (0.123456, "0.1235"),
    (7.25, "7.25"),
    (2000.5, "2000.5"),
])
async def test_the_card_shows_the_observed_outcome_as_it_is(flagged_db, observed, shown):
    import json
    import sqlite3

    conn = sqlite3.connect(flagged_db)
    fid = conn.execute("SELECT id FROM flags WHERE kind = 'anomaly' ORDER BY abs(score) DESC, id LIMIT 1").fetchone()[0]
    conn.execute("UPDATE flags SET payload = json_set(payload, '$.observed', json(?)) WHERE id = ?",
                 (json.dumps(observed), fid))
    conn.commit()
    conn.close()
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        assert app.screen.current_id() == fid
        text = str(app.screen.query_one("#queue-detail").render())
        assert f"· observed {shown} ·" in text, text


async def test_queue_counts_have_thousands_separators(demo_db):
    """The status line counted "Anomaly 1 of 1200 · 0 of 1200 triaged"; the app writes counts as 1,200."""
    from benchloupe.store import read, runs
    from benchloupe.store.db import connect

    conn = connect(demo_db)
    try:
        bid = read.benchmark_id(conn, "demo-math")
        items, models = read.items(conn, "demo-math")["id"].tolist(), read.models(conn, "demo-math")["id"].tolist()
        rid = runs.create_run(conn, "anomalies", bid, config={}, seed=0, code_version="test", input_fingerprint="t")
        rows = [{"kind": "anomaly", "item_id": int(items[k % len(items)]), "model_id": int(models[0]),
                 "score": -3.0 - k / 1000, "payload": {"expected_p": 0.9, "observed": 0, "residual": -3.0}}
                for k in range(1200)]
        runs.save_outputs(conn, rid, runs.RunOutputs(metrics={}, flags=__import__("pandas").DataFrame(rows)))
    finally:
        conn.close()
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        status = str(app.screen.query_one("#queue-status").render())
        assert "Anomaly 1 of 1,200" in status and "0 of 1,200 triaged" in status, status
        assert "1,200 flags on this model" in str(app.screen.query_one("#queue-detail").render())
