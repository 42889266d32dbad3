"""A jump always lands on and shows its target (issue 32 point 4): ``i`` and ``m`` from every queue (Anomalies,
Reversals) select the flag's item on Items and its model on Models even when a search there hides it (the search
is cleared, the status line then counts every row), the row is scrolled into view, and a search does not survive
a benchmark switch. The flags point at the last row of each table, so a jump that does not scroll shows nothing."""

from __future__ import annotations

import json

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def _last_rows(db) -> tuple[int, str, int]:
    """The last item of Items' order and the last model of Models' (the latest run's ranking): (item id, item
    key, model id)."""
    from benchloupe.store import views
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        items = views.item_table(conn, "demo-math")
        runs = views.model_runs(conn, "demo-math")
        models = views.run_model_table(conn, "demo-math", int(runs["id"].iloc[0]) if len(runs) else None)
        return int(items["id"].iloc[-1]), str(items["key"].iloc[-1]), int(models["id"].iloc[-1])
    finally:
        conn.close()


def _flag_far_rows(db) -> tuple[int, str, int]:
    """The first card of each queue points at the last item and the last model."""
    from benchloupe.store.db import connect

    item_id, key, model_id = _last_rows(db)
    conn = connect(db)
    try:
        for kind, score, payload in (
                ("anomaly", -99.0, {"expected_p": 0.99, "observed": 0, "residual": -99.0, "source": "static"}),
                ("reversal", 99.0, {"fold": 0, "reversed": True, "gap": 0.001, "tied": False,
                                    "top_items": [{"item": key, "weight": 1.0, "contribution": 0.5}]})):
            run, bid = conn.execute("SELECT run_id, benchmark_id FROM flags WHERE kind = ? ORDER BY id DESC LIMIT 1",
                                    (kind,)).fetchone()
            other = conn.execute("SELECT id FROM models WHERE id != ? LIMIT 1", (model_id,)).fetchone()[0]
            conn.execute("INSERT INTO flags (run_id, kind, benchmark_id, item_id, model_id, model_b_id, score,"
                         " payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (run, kind, bid, item_id if kind == "anomaly" else None, model_id,
                          other if kind == "reversal" else None, score, json.dumps(payload)))
        conn.commit()
    finally:
        conn.close()
    return item_id, key, model_id


def _in_view(table) -> bool:
    rows = table.size.height - 1 - (1 if table.show_horizontal_scrollbar else 0)
    top = int(table.scroll_offset.y)
    return top <= table.cursor < top + rows


async def _search(pilot, app, mode: str, key: str, text: str) -> None:
    await pilot.press(key)
    await wait_until(pilot, loaded(app, mode), what=mode)
    await pilot.press("slash", *text, "enter")
    await wait_until(pilot, lambda: app.screen.query_text == text and idle(app)(), what=f"{mode} search")


@pytest.mark.parametrize("queue_key,queue", [("5", "anomalies"), ("6", "reversals")])
@pytest.mark.parametrize("jump,mode,target", [("i", "items", "item"), ("m", "models", "model")])
async def test_every_jump_from_every_queue_lands_on_and_shows_its_target(flagged_db, queue_key, queue, jump, mode,
                                                                         target):
    item_id, _key, model_id = _flag_far_rows(flagged_db)
    wanted = item_id if target == "item" else model_id
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await _search(pilot, app, "items", "2", "math-0009")  # a search that hides the target
        await _search(pilot, app, "models", "3", "zzz-none")
        await pilot.press(queue_key)
        await wait_until(pilot, loaded(app, queue), what=queue)
        assert app.screen._current_row()["model_id"] == model_id
        await pilot.press(jump)
        await wait_until(pilot, lambda: getattr(app.screen, "MODE", "") == mode and idle(app)()
                         and app.screen.query_one("FrameTable").current_value("id") == wanted, timeout=10,
                         what=f"{jump} lands on the {target}")
        await pilot.pause(0.1)
        screen, table = app.screen, app.screen.query_one("FrameTable")
        assert screen.query_text == "" and len(table.view) == len(table.frame), "the search was cleared"
        status = str(screen.query_one(".status-line").render())
        assert "/math-0009" not in status and "/zzz" not in status, status
        assert _in_view(table), (table.cursor, table.scroll_offset.y, table.size.height)


@pytest.mark.parametrize("key,mode", [("2", "items"), ("3", "models")])
async def test_a_search_does_not_survive_a_benchmark_switch(flagged_db, key, mode):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await _search(pilot, app, mode, key, "math")
        app.choose_benchmark("demo-chem")
        await wait_until(pilot, lambda: loaded(app, mode)() and app.screen.shown_token[0] == "demo-chem",
                         what="demo-chem")
        table = app.screen.query_one("FrameTable")
        assert app.screen.query_text == "" and len(table.view) == len(table.frame) > 0
        assert "/math" not in str(app.screen.query_one(".status-line").render())
