"""An item made by BenchFill names its parent by key on its panel (issue 32 point 9: "parent item #468")."""

from __future__ import annotations

import pytest

from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.screens.items import show_item
from tests.tui.conftest import idle, wait_until

pytestmark = pytest.mark.anyio


async def test_the_item_panel_names_the_parent_by_its_key(demo_db):
    from benchloupe.store.db import connect

    conn = connect(demo_db)
    try:
        (child, _), (parent, parent_key) = conn.execute("SELECT id, key FROM items ORDER BY id LIMIT 2").fetchall()
        conn.execute("UPDATE items SET parent_id = ? WHERE id = ?", (parent, child))
        conn.commit()
    finally:
        conn.close()
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        show_item(app, child)
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ItemPanel" and idle(app)()
                         and app.screen.detail is not None, what="panel")
        head = str(app.screen.query_one("#item-head").render())
        assert f"parent {parent_key}" in head and f"#{parent}" not in head, head
