"""A notice never hides what a decision just changed (issue 32 point 7).

At 80x24 Textual's toast was a 40-column box of three rows at the bottom right, one row above the footer: a gap
confirmed on the Coverage screen's last row showed its new state under the notice "gap 5: confirmed (z undo)".
The workbench's notices are lines over the key footer and the job line (app.tcss): the test compares the
notice's region with the changed cell's region on the real screen, and, for every list screen at 80x24 and
160x48, that a two-line refusal stays on those two rows."""

from __future__ import annotations

import pytest
from textual.geometry import Region
from textual.widgets._toast import Toast

from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.widgets.footer import KeyFooter
from benchloupe.tui.widgets.jobbar import JobBar
from benchloupe.tui.widgets.table import FrameTable
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio

REFUSAL = ("flag #7 was changed by a.curator at 2026-12-07 12:01 (now confirmed); your decision was not saved "
           "(it was: the key looks wrong)")  # two lines at 80 columns, as a refused decision's notice


@pytest.fixture
def covered_db(demo_db):
    """The demo with a coverage run of demo-math (its five widest gaps are gap flags)."""
    from benchloupe import jobs
    from benchloupe.jobs.coverage import CoverageConfig

    jobs.ANALYSES["coverage"].run(demo_db, "demo-math", CoverageConfig(n_draws=100))
    return demo_db


def _cell(table: FrameTable, key: str) -> Region:
    """The screen region of the cursor row's *key* cell (the header is the table's first line)."""
    a, b = next(bound for bound, c in zip(table._bounds, table.columns) if c.key == key)
    top = table.content_region.y + 1 + table.cursor - int(table.scroll_offset.y)
    return Region(table.content_region.x + a - int(table.scroll_offset.x), top, b - a, 1)


def _toasts(app) -> list[Region]:
    return [t.region for t in app.screen.query(Toast)]


async def test_a_gap_decided_on_the_last_row_stays_in_sight_at_80x24(covered_db):
    app = BenchloupeApp(covered_db, benchmark="demo-math")
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage screen")
        table = app.screen.query_one("#gaps", FrameTable)
        assert len(table.view) == 5
        await pilot.press("end")
        await pilot.pause()
        cell = _cell(table, "state")
        assert cell.bottom <= table.content_region.bottom, "the last gap is on screen"
        await pilot.press("c")
        await wait_until(pilot, lambda: _toasts(app), what="the decision's notice")
        await pilot.pause(0.1)
        assert table.current_value("state") == "confirmed"
        (toast,) = _toasts(app)
        assert "confirmed" in str(app.screen.query_one(Toast).render())
        assert not toast.overlaps(cell), f"the notice {toast} covers the changed state {cell}"
        assert not toast.overlaps(table.content_region)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("key,mode", [("2", "items"), ("3", "models"), ("4", "runs"), ("5", "anomalies"),
                                      ("7", "coverage")])
async def test_notices_stay_on_the_footer_and_the_job_line(flagged_db, key, mode, size):
    """A one-line notice covers only the key footer; a two-line refusal (with its title on its first line) and
    the notice after it only the footer and the job line: no table, card or status line under them."""
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=size, notifications=True) as pilot:
        await pilot.press(key)
        await wait_until(pilot, loaded(app, mode), what=mode)
        footer = app.screen.query_one(KeyFooter).region
        chrome = footer.union(app.screen.query_one(JobBar).region)
        app.notify("gap 5: confirmed (z undo)")
        await wait_until(pilot, lambda: len(_toasts(app)) == 1, what="the notice")
        await pilot.pause(0.1)
        (one,) = _toasts(app)
        assert footer.contains_region(one), f"{one} is not on the footer {footer}"
        app.clear_notifications()
        app.notify(REFUSAL, title="Refused", severity="error", timeout=10)
        await wait_until(pilot, lambda: len(_toasts(app)) == 1, what="the refusal")
        await pilot.pause(0.1)
        (two,) = _toasts(app)
        assert two.height <= (2 if size[0] == 80 else 1) and chrome.contains_region(two), (two, chrome)
        assert str(app.screen.query_one(Toast).render()).startswith("Refused: flag #7")
