"""The item flag queue (issue 33): SAT12's item 32 with its evidence card at 80x24, and K fixes its key."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.hostile import run_cli
from tests.tui.conftest import idle, loaded, wait_until
from tests.unit.test_items_audit_cli import sat12

pytestmark = pytest.mark.anyio


@pytest.fixture
def sat12_db(tmp_path) -> Path:
    db = sat12(tmp_path)
    rc, _out, err = run_cli(["audit", "items", "SAT12", "--permutations", "199", "--db", db])
    assert rc == 0, err
    return db


async def test_item_queue_card_at_80x24_and_fix_key(sat12_db):
    app = BenchloupeApp(sat12_db, benchmark="SAT12")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("9")
        await wait_until(pilot, loaded(app, "itemflags"), what="item flags")
        card = str(app.screen.query_one("#queue-detail").render())
        assert "Item.32" in card and "miskeyed" in card
        assert "suggested key: 3 (61 % of the top quartile; key 5: 19 %)" in card
        assert "Options by ability quartile" in card and "Q4 top" in card
        assert "Fit by score group" in card
        await pilot.press("K")
        await wait_until(pilot, lambda: loaded(app, "itemflags")() and idle(app)(), what="after fix")
    conn = sqlite3.connect(sat12_db)
    try:
        assert conn.execute("SELECT answer FROM items WHERE key = 'Item.32'").fetchone()[0] == "3"
        detail = conn.execute("SELECT detail FROM audit_log WHERE action = 'item:fix-key'").fetchone()[0]
        assert '"changed": 363' in detail
    finally:
        conn.close()
