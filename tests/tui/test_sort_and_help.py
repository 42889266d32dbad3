"""Sorting shows the top of the new order and help lists the workbench's keys first (issue 32 point 7): on every
screen with a table, ``s`` and ``S`` put the cursor on the first row, scrolled into view (the old row stayed
selected, off screen); on every screen ``?`` lists the screen's keys before Textual's own (tab: focus next)."""

from __future__ import annotations

import pytest

from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.screens.help import screen_keys
from benchloupe.tui.widgets.table import FrameTable
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)
TEXTUAL = {"Focus Next", "Focus Previous", "Copy selected text", "Page Left", "Page Right", "Scroll Up",
           "Scroll Down", "Scroll Left", "Scroll Right", "Scroll Home", "Scroll End", "Page Up", "Page Down"}
SCREENS = (("1", "benchmarks"), ("2", "items"), ("3", "models"), ("4", "runs"), ("5", "anomalies"),
           ("6", "reversals"), ("7", "coverage"), ("8", "benchfill"))


async def test_sorting_any_table_shows_the_top_row(showcase_db):
    app = BenchloupeApp(showcase_db, benchmark="demo-math")
    sorted_tables = 0
    async with app.run_test(size=SIZE) as pilot:
        for key, mode in SCREENS:
            await pilot.press(key)
            await wait_until(pilot, loaded(app, mode), what=mode)
            for table in app.screen.query(FrameTable):
                if not table.sortable or len(table.view) < 3:
                    continue
                table.focus()
                await pilot.pause()
                for sort_key in ("s", "S"):
                    await pilot.press("end")
                    await wait_until(pilot, idle(app))
                    assert table.cursor == len(table.view) - 1
                    await pilot.press(sort_key)
                    await pilot.pause()
                    assert table.cursor == 0 and table.scroll_offset.y == 0, (mode, table.id, sort_key)
                sorted_tables += 1
    assert sorted_tables >= 5


async def test_help_lists_the_screen_keys_before_textuals_own(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        for key, mode in SCREENS:
            await pilot.press(key)
            await wait_until(pilot, loaded(app, mode), what=mode)
            rows = [description for _keys, description, _on in screen_keys(app.screen)]
            textual = [k for k, d in enumerate(rows) if d in TEXTUAL]
            ours = [k for k, d in enumerate(rows) if d not in TEXTUAL]
            assert ours and (not textual or min(textual) > max(ours)), (mode, screen_keys(app.screen))
