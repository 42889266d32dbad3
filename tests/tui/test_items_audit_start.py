"""The item audit starts from the workbench (issue 33): from the Runs screen's analyses with its form (as every
analysis), and from the item-flags screen (9) with r; the tab line names screen 9 where it has room."""

from __future__ import annotations

import pytest

from benchloupe.store import runs
from benchloupe.store.db import connect
from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import loaded, wait_until
from tests.tui.test_run_forms import open_form, set_field

pytestmark = pytest.mark.anyio


def _item_runs(db) -> list[int]:
    conn = connect(db)
    try:
        hist = runs.list_runs(conn, "demo-math")
        return [int(i) for i, k in zip(hist["id"], hist["kind"]) if k == "items"]
    finally:
        conn.close()


async def test_runs_screen_starts_the_item_audit_with_its_form(demo_db):
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_form(pilot, app, "items")
        await set_field(pilot, "cfg-n_perm", "99")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not app.job.running and app.job.outcome != "", timeout=120, what="items")
        assert not app.job.failed, app.job.outcome
        await wait_until(pilot, loaded(app, "runs"), what="runs again")
        assert "items" in set(app.screen.query_one("#history").frame["kind"])
    conn = connect(demo_db)
    try:
        run = runs.get_run(conn, _item_runs(demo_db)[0])
    finally:
        conn.close()
    assert run["config"]["n_perm"] == 99 and run["metrics"]["items"] > 0


async def test_item_flags_screen_runs_the_audit_with_r(demo_db):
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("9")
        await wait_until(pilot, loaded(app, "itemflags"), what="item flags")
        detail = str(app.screen.query_one("#queue-detail").render())
        assert "r runs the item audit here" in detail, detail
        await pilot.press("r")
        await wait_until(pilot, lambda: app.job.title != "" and not app.job.running and app.job.outcome != "",
                         timeout=120, what="item audit")
        assert not app.job.failed, app.job.outcome
    assert len(_item_runs(demo_db)) == 1


async def test_the_tab_line_names_screen_9_where_it_has_room(demo_db):
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=(140, 24)) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        top = str(app.screen.query_one("#topbar").render())
        assert " 9 Item flags" in top and "demo-math" in top
        await pilot.press("9")
        await wait_until(pilot, loaded(app, "itemflags"), what="item flags")
        assert " 9 Item flags " in str(app.screen.query_one("#topbar").render())
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=(80, 24)) as pilot:  # no room: the benchmark's name stays whole
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        top = str(app.screen.query_one("#topbar").render())
        assert " 9" not in top and "demo-math" in top
