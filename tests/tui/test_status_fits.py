"""At 80 columns a status line keeps its sort and ``? all keys`` (issue 32 point 7: the end of the line, where
they were, was the part cut). Every screen whose status line names them, with a long status (marked flags, a
search): what the terminal shows of the line ends with them."""

from __future__ import annotations

import pytest
from rich.text import Text

from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.widgets.table import keep_tail
from tests.tui.conftest import add_flags, loaded, wait_until

pytestmark = pytest.mark.anyio

SCREENS = {"2": ("items", "#items-status", True), "3": ("models", "#models-status", True),
           "5": ("anomalies", "#queue-status", False), "6": ("reversals", "#queue-status", False)}


def shown(widget) -> str:
    """The status line as the terminal shows it (its lines, each cut to the widget)."""
    strips = widget.render_lines(widget.region.reset_offset)
    return "\n".join("".join(seg.text for seg in strip).rstrip() for strip in strips)


def test_keep_tail_puts_the_tail_on_a_line_of_its_own_when_both_do_not_fit():
    line = keep_tail(Text("x" * 100), Text("  sort: key · ? all keys"), 78)
    assert line.plain == "x" * 100 + "\nsort: key · ? all keys" and line.no_wrap
    assert keep_tail(Text("short"), Text(" · ? all keys"), 78).plain == "short · ? all keys"


@pytest.mark.parametrize("key", list(SCREENS))
async def test_the_status_line_keeps_the_sort_and_the_keys_at_80_columns(demo_db, key):
    add_flags(demo_db, n_anomalies=30, n_reversals=8)
    mode, status_id, sorts = SCREENS[key]
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press(key)
        await wait_until(pilot, loaded(app, mode), what=mode)
        if mode in ("anomalies", "reversals"):
            await pilot.press("space", "j", "space")  # two marked: the longest status a queue has
        await pilot.pause(0.2)
        widget = app.screen.query_one(status_id)
        line = shown(widget)
        assert line.endswith("? all keys") and widget.size.height <= 2, line
        if sorts:
            assert "sort: " in line, line
