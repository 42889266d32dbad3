"""ctrl+pagedown / ctrl+pageup page the Items and Models tables sideways by whole columns, and a column whose
start is scrolled off keeps its label in the header (issue 32 point 7: after ctrl+pagedown the text column lost
its header and its rows started mid-word, "mpute 105 + 759")."""

from __future__ import annotations

import pytest

from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.widgets.table import FrameTable, column_bounds
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio


def row_text(table: FrameTable, y: int) -> str:
    return "".join(seg.text for seg in table.render_line(y))


@pytest.mark.parametrize("key,mode", [("2", "items"), ("3", "models")])
async def test_a_sideways_page_starts_at_a_column_under_its_label(demo_db, key, mode):
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(key)
        await wait_until(pilot, loaded(app, mode), what=mode)
        table = app.screen.query_one(FrameTable)
        table.focus()
        frozen = table.frozen
        if table.max_scroll_x == 0:
            pytest.skip(f"the {mode} table fits 80 columns: nothing to page sideways")
        starts = [a - frozen for a, _ in column_bounds(table.columns) if a >= frozen]
        seen = []
        for _ in range(6):
            await pilot.press("ctrl+pagedown")
            await pilot.pause(0.05)
            x = int(table.scroll_offset.x)
            seen.append(x)
            header = row_text(table, 0)[frozen:]
            col = next(c for (a, b), c in zip(column_bounds(table.columns), table.columns) if a <= frozen + x < b)
            # the column at the left edge is named there, whole or cut, never left without its label
            assert header.lstrip().startswith(col.label[:3]), (header, col.label)
            if x >= table.max_scroll_x:
                break
        assert seen[0] > 0, "ctrl+pagedown did not move"
        assert seen[0] in starts, (seen, starts)  # the first page lands on a column's first cell
        for _ in range(8):
            await pilot.press("ctrl+pageup")
            await pilot.pause(0.05)
        assert int(table.scroll_offset.x) == 0
