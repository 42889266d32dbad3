"""The report from the workbench (issue 35): r on the Benchmarks screen opens the report form for the highlighted
benchmark, the job line runs it, and the palette offers it as "benchmarks: write report"; a path the report
cannot be written to is refused in the form, in one line, and nothing starts."""

from __future__ import annotations

import pytest

from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.widgets.dialogs import FormDialog
from tests.tui.conftest import loaded, wait_until
from tests.tui.test_import_dialog import set_field

pytestmark = pytest.mark.anyio


async def test_r_on_benchmarks_writes_the_report_as_a_job(showcase_db, tmp_path):
    out = tmp_path / "chem.html"
    app = BenchloupeApp(showcase_db, benchmark="demo-chem")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, FormDialog), what="report form")
        assert "demo-chem" in app.screen.title_text
        await set_field(pilot, "output", str(tmp_path))  # a folder for an HTML file: refused in the form
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, FormDialog) and not app.job.running
        error = str(app.screen.query_one("#dialog-error").render())
        assert "is a folder" in error, error
        await set_field(pilot, "output", str(out))
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.job.title == "report of demo-chem" and not app.job.running
                         and app.job.outcome != "", timeout=180, what="report job")
        assert not app.job.failed, app.job.outcome
        assert "report written to" in app.job.outcome, app.job.outcome
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.count("<figure") >= 8


async def test_the_palette_offers_the_report(showcase_db):
    from benchloupe.tui.palette import WorkbenchCommands, command_name, screen_bindings
    from benchloupe.tui.screens.benchmarks import BenchmarksScreen

    names = [command_name("benchmarks", b) for b in screen_bindings(BenchmarksScreen)]
    assert "benchmarks: write report" in names
    assert WorkbenchCommands  # the provider lists every screen's bindings (tui/palette.py)
