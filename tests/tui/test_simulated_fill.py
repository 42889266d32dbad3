"""BenchFill out of the box (issue 11 item 10): on the demo, whose endpoints are the built-in simulated server,
a new user runs a session from the Coverage screen (7, b, ctrl+s) and reviews its proposals on 8; the app
starts the simulated server when it opens the workspace and stops it when it exits."""

from __future__ import annotations

import socket

import pytest

from benchloupe.prompts import simulated
from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


async def test_a_session_from_coverage_on_the_simulated_endpoint_then_review(demo_db):
    from benchloupe.jobs.coverage import CoverageConfig, run_coverage

    run_coverage(demo_db, "demo-math", CoverageConfig(uncertainty="none"))
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: simulated.current() is not None, what="simulated server started")
        port = simulated.current().port
        assert port_open(port)
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        await pilot.press("b")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="fill form")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not app.job.running and app.job.outcome != "", timeout=180, what="session")
        assert not app.job.failed, app.job.outcome
        await wait_until(pilot, loaded(app, "benchfill"), what="review queue")
        screen = app.screen
        assert screen.session_id is not None and screen.view, "no proposal to review"
        summary = str(screen.query_one("#fill-summary").render())
        assert summary.startswith("session #") and "(simulated endpoints) proposals ready" in summary
        assert "estimated difficulty" in str(screen.query_one("#fill-review").render())
        table = screen.query_one("#sessions")
        assert str(table.frame["message_shown"].iloc[0]).startswith("simulated · ")
    assert simulated.current() is None and not port_open(port)


async def test_a_workspace_with_real_endpoints_starts_no_simulated_server(demo_db):
    from benchloupe.jobs import fill

    for role in ("rewriter", "judge"):
        fill.set_endpoint(demo_db, role, model="m", base_url="http://127.0.0.1:9/v1")
    assert fill.uses_simulated(demo_db)  # the demo's annotators are still simulated
    from benchloupe.store.curation import put_setting
    from benchloupe.store.db import connect

    conn = connect(demo_db)
    put_setting(conn, fill.ENDPOINTS_KEY, {"rewriter": None, "judge": None, "annotators": []})
    conn.close()
    assert not fill.uses_simulated(demo_db)
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(2.5)  # past the app's start-up delay: it looked, and found nothing simulated
        assert simulated.current() is None
