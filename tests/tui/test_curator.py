"""What a curator expects (issue 11, "build these"): quitting asks before cancelling a running job, triage
undo and "next untriaged" on every queue, search on Items and Models, the palette offers screen actions."""

from __future__ import annotations

import threading

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def _waiting_job(stop: threading.Event):
    def run(progress, cancel):
        while not cancel.is_set() and not stop.is_set():
            progress(1, 2, "waiting")
            cancel.wait(0.02)
        return {"message": "stopped"}
    return run


@pytest.mark.timeout(60, method="thread")
async def test_quit_while_a_job_runs_asks_first(demo_db):
    from benchloupe.tui.widgets.dialogs import ConfirmDialog

    app = BenchloupeApp(demo_db, benchmark="demo-math")
    stop = threading.Event()
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
            assert app.start_job("long fit", _waiting_job(stop))
            await pilot.press("q")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="quit confirmation")
            assert "long fit" in str(app.screen.query_one("Label").render())
            await pilot.press("n")  # stay: the job keeps running
            await pilot.pause(0.1)
            assert app.is_running and app.job.running and not app._cancel.is_set()
            await pilot.press("q")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="asked again")
            await pilot.press("escape")
            await pilot.pause(0.1)
            assert app.is_running and app.job.running and not app._cancel.is_set()
            await pilot.press("q")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="asked a third time")
            cancel = app._cancel
            await pilot.press("y")
            await pilot.pause(0.2)
            assert cancel.is_set()
    finally:
        stop.set()
    assert not app.is_running


async def test_quit_without_a_job_does_not_ask(demo_db):
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        await pilot.press("q")
        await pilot.pause(0.1)
    assert not app.is_running and idle(app)()
