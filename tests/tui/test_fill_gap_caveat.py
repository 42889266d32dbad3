"""BenchFill says when its target is a tail or lattice gap (issue 32 point 9: such a gap was accepted as the
target without a word): the form opened on such a gap says so, a session started on one says so again, and
every gap of the run is judged by its own status (a tail or lattice gap has a caveat, any other none)."""

from __future__ import annotations

import pytest

from benchloupe.jobs.fill import gap_caveat
from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.widgets.table import FrameTable
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio


def gap_statuses(db) -> list[str]:
    from benchloupe.store import read, runs
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        cov = runs.latest_run(conn, read.benchmark_id(conn, "demo-math"), ("coverage",))
        return [str(s) for s in runs.load_artifact(conn, cov, "gaps")["status"]]
    finally:
        conn.close()


def form_text(app) -> str:
    return " ".join(str(w.render()) for w in app.screen.query("SafeStatic"))


async def test_the_fill_form_and_start_name_a_tail_or_lattice_gap(demo_db):
    from benchloupe.jobs.coverage import CoverageConfig, run_coverage

    run_coverage(demo_db, "demo-math", CoverageConfig(uncertainty="none"))
    statuses = gap_statuses(demo_db)
    for n, status in enumerate(statuses, start=1):  # the class: every gap by its own status
        caveat = gap_caveat(demo_db, "demo-math", n)
        assert bool(caveat) == (status in ("tail", "lattice")), (n, status, caveat)
        assert not caveat or f"gap {n} is " in caveat
    assert gap_caveat(demo_db, "demo-math", len(statuses) + 1) == "" and gap_caveat(demo_db, "nope", 1) == ""
    tail = statuses.index("tail") + 1
    plain = statuses.index("gap") + 1
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        coverage = app.screen
        table = coverage.query_one(FrameTable)
        assert table.move_to_value("rank", plain)
        await pilot.press("b")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="fill form")
        assert "tail gap" not in form_text(app) and "lattice" not in form_text(app)
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is coverage, what="back on coverage")
        assert table.move_to_value("rank", tail)
        await pilot.press("b")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="fill form")
        assert f"gap {tail} is a tail gap" in form_text(app), form_text(app)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.job.running or app.job.outcome, what="session started")
        said = [n.message for n in app._notifications]
        app.action_cancel_job()
        await wait_until(pilot, lambda: not app.job.running, timeout=120, what="session cancelled")
        assert any(f"gap {tail} is a tail gap" in m for m in said), said
