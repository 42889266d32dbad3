"""Pilot tests of the Coverage screen (issue 15): each gap's C.6 interval and status, the lattice / tail warnings,
the ability band and the robustness summary on screen, and gap flags triaged with c / d / u / o."""

from __future__ import annotations

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (120, 40)


def _coverage_run(db):
    from benchloupe import jobs
    from benchloupe.jobs.coverage import CoverageConfig

    return jobs.ANALYSES["coverage"].run(db, "demo-math", CoverageConfig(n_draws=100, robustness="loo,priors"))


def _state(db, flag_id):
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return curation.flags(conn, kind="gap").set_index("id").loc[flag_id, "state"]
    finally:
        conn.close()


def _plain(widget) -> str:
    r = widget.render()
    return getattr(r, "plain", str(r))


async def test_coverage_screen_shows_intervals_warnings_band_and_robustness(demo_db):
    _coverage_run(demo_db)
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage screen")
        table = app.screen.query_one("#gaps")
        frame = table.frame
        assert len(frame) == 5 and set(frame["status"]) <= {"gap", "uncertain", "tail", "lattice"}
        assert all("-" in s and s != "-" for s in frame["interval"])  # every top gap has its 95% interval
        notes = _plain(app.screen.query_one("#coverage-notes"))
        assert "max gap 95% interval" in notes and "ability range" in notes
        assert "⚠ lattice:" in notes  # 40 models: 240 items on a few dozen sum-score levels
        assert "robustness: LOO (40 refits)" in notes and "prior variants" in notes
        plot = _plain(app.screen.query_one("#coverage-plot"))
        assert "▔" in plot


async def test_gap_flags_are_triaged_with_keys(demo_db):
    _coverage_run(demo_db)
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage screen")
        table = app.screen.query_one("#gaps")
        first = int(table.frame["flag_id"].iloc[0])
        await pilot.press("c")
        await wait_until(pilot, lambda: _state(demo_db, first) == "confirmed", what="confirmed in the store")
        await wait_until(pilot, loaded(app, "coverage"), what="reload")
        await pilot.press("down")
        second = int(table.frame["flag_id"].iloc[table.row])
        assert second != first
        await pilot.press("d")
        await wait_until(pilot, lambda: _state(demo_db, second) == "dismissed", what="dismissed")
        await wait_until(pilot, loaded(app, "coverage"), what="reload")
        assert "dismissed" in set(app.screen.query_one("#gaps").frame["state"])
        await pilot.press("o")
        await wait_until(pilot, lambda: _state(demo_db, int(app.screen.query_one("#gaps").frame["flag_id"]
                                                           .iloc[app.screen.query_one("#gaps").row])) == "open",
                         what="reopened")


async def test_triage_without_a_run_is_a_message(demo_db):
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage screen")
        await pilot.press("c")
        assert app.is_running
