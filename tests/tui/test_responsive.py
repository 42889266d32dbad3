"""The app stays responsive whatever a job reports: progress is coalesced into a few job-line paints per second
and nothing per report rebuilds the footer or the bindings (issue 11, the blocker)."""

from __future__ import annotations

import time

import pytest

from benchloupe.jobs.process import JobSpec
from benchloupe.tui import app as app_module
from benchloupe.tui.app import BenchloupeApp
from tests.tui import jobfns
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


@pytest.mark.timeout(90, method="thread")
async def test_progress_flood_keeps_keys_answering(demo_db):
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    footer_rebuilds = []
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        original = app.refresh_bindings
        app.refresh_bindings = lambda: (footer_rebuilds.append(1), original())[1]
        # a job (in its own process, jobs/process.py) that burns CPU in pure Python and reports as fast as
        # Python can call it, each time with a new message: a BenchFill session against a local endpoint with
        # no delay is the real case (thousands of reports)
        assert app.start_job("flood", JobSpec(jobfns.spin, (600.0,)))
        await pilot.pause(0.5)
        t0, paints0, rebuilds0 = time.monotonic(), app.job_paints, len(footer_rebuilds)
        for key, mode in (("2", "items"), ("3", "models"), ("8", "benchfill"), ("1", "benchmarks"),
                          ("2", "items")):
            await pilot.press(key)
            await wait_until(pilot, lambda m=mode: getattr(app.screen, "MODE", "") == m, timeout=20,
                             what=f"key {key} to open {mode} while a job floods progress")
        await wait_until(pilot, lambda: app.screen.shown_token == app.screen.current_token(), timeout=20,
                         what="items to load under the flood")
        table = app.screen.query_one("#items-table")
        before = table.cursor
        await pilot.press("down", "down")
        await wait_until(pilot, lambda: table.cursor == before + 2, timeout=20, what="cursor to move")
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen", timeout=20, what="help")
        await pilot.press("escape")
        await wait_until(pilot, lambda: type(app.screen).__name__ != "HelpScreen", timeout=20, what="close")
        await wait_until(pilot, lambda: "annotating child" in str(
            app.screen.query_one("#job-label").render()), timeout=20, what="the job line to follow the job")
        elapsed = time.monotonic() - t0
        paints = getattr(app, "job_paints", 10**9) - paints0
        assert paints <= getattr(app_module, "PROGRESS_HZ", 4) * elapsed + 10, f"{paints} job-line paints in {elapsed:.1f} s"
        # switching screens refreshes bindings (Textual does); progress reports never do
        assert len(footer_rebuilds) - rebuilds0 <= 20, f"{len(footer_rebuilds) - rebuilds0} binding refreshes"
        assert getattr(getattr(app, "_progress", None), "calls", 10**6) > 1000, "the flood did not flood"
        assert app._progress.lag() < 5.0, "the job line fell behind the job"
        await pilot.press("x")
        await wait_until(pilot, lambda: not app.job.running, timeout=20, what="the flood to stop")
        assert app.job.outcome == "cancelled", app.job.outcome
