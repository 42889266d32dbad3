"""The workbench's replicate-workers setting (issue 36): asked in a dialog (palette "runs: replicate workers"),
checked as typed, stored in the database's settings, and used by the runs the workbench starts."""

from __future__ import annotations

import pytest

from benchloupe.jobs import workers
from benchloupe.store.db import connect
from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import wait_until

pytestmark = pytest.mark.anyio


def _saved(db) -> dict:
    conn = connect(db)
    try:
        return workers.saved_setting(conn)
    finally:
        conn.close()


async def test_setting_is_asked_checked_and_stored(demo_db):
    app = BenchloupeApp(str(demo_db))
    async with app.run_test(size=(80, 24)) as pilot:
        app.action_replicate_workers()
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog" and app.screen.query("Input"),
                         what="the dialog")
        app.screen.query_one("Input").value = "lots"
        await pilot.press("enter")
        await pilot.pause()
        assert type(app.screen).__name__ == "PromptDialog"  # refused in the dialog, nothing stored
        assert "neither a number of processes nor a scheduler address" in str(
            app.screen.query_one("#dialog-error").render())
        app.screen.query_one("Input").value = "2"
        await pilot.press("enter")
        await wait_until(pilot, lambda: _saved(demo_db)["jobs"] == 2, what="the setting stored")
    w = workers.for_database(demo_db)
    assert w.local and w.jobs == 2


def test_parse_and_describe_the_setting():
    assert workers.parse_setting("") == {"jobs": None, "cluster": ""}
    assert workers.parse_setting(" 3 ") == {"jobs": 3, "cluster": ""}
    assert workers.parse_setting("tcp://10.0.0.5:8786") == {"jobs": None, "cluster": "tcp://10.0.0.5:8786"}
    with pytest.raises(ValueError, match="1 to 4096"):
        workers.parse_setting("0")
    assert workers.describe({"jobs": 1, "cluster": ""}) == "replicates run on 1 local process"
    assert "Dask scheduler at tcp://h:1" in workers.describe({"jobs": None, "cluster": "tcp://h:1"})
