"""What an undo says is true (issue 32 point 6): undoing a note on a flag never decided says the note was undone,
not "back to open", and the card shows no "at nan"; "(z undo)" is offered only while something is left to undo.
On both queues, for a note and for a decision."""

from __future__ import annotations

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def _texts(screen) -> tuple[str, str]:
    return str(screen.query_one("#queue-status").render()), str(screen.query_one("#queue-detail").render())


async def _settle(pilot, app) -> None:
    await wait_until(pilot, lambda: idle(app)() and app.write_queue.pending == 0 and not app.screen.saving,
                     what="written")
    await pilot.pause(0.05)


@pytest.mark.parametrize("key,mode", [("5", "anomalies"), ("6", "reversals")])
async def test_undoing_a_note_or_a_decision_says_what_came_back(flagged_db, key, mode):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(key)
        await wait_until(pilot, loaded(app, mode), what=mode)
        screen = app.screen
        if mode == "reversals":  # a pair never decided, whatever the default filter shows
            await pilot.press("f")
            await wait_until(pilot, lambda: idle(app)(), what="filter")
        fid = screen.current_id()
        await pilot.press("e")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="note dialog")
        await pilot.press(*"why", "enter")
        await _settle(pilot, app)
        status, card = _texts(screen)
        assert "note saved (z undo)" in status, status
        await pilot.press("z")
        await _settle(pilot, app)
        assert screen.current_id() == fid
        status, card = _texts(screen)
        assert "nan" not in card and "nan" not in status, card
        assert f"#{fid} note undone" in status and "back to open" not in status, status
        assert "z undo" not in status, status  # nothing left to undo
        app.data_changed()  # read again from the store (as another writer's change makes it)
        await wait_until(pilot, loaded(app, mode), what="reloaded")
        await pilot.pause(0.05)
        assert "nan" not in _texts(screen)[1], _texts(screen)[1]
        await pilot.press("d")  # a decision, then its undo
        await _settle(pilot, app)
        assert "(z undo)" in _texts(screen)[0]
        await pilot.press("z")
        await _settle(pilot, app)
        status, card = _texts(screen)
        assert f"#{fid} back to open" in status and "z undo" not in status, status
        assert "nan" not in card, card


def test_who_and_when_leave_out_what_is_not_known():
    """A card's "by bea at 14:02" from a frame's row: a missing author or time (None, "", NaN, NA) is left out,
    never printed as "nan"."""
    import numpy as np
    import pandas as pd

    from benchloupe.store.actor import by_at

    for missing in (None, "", float("nan"), np.nan, pd.NA, pd.NaT):
        assert by_at(missing, missing) == ""
        assert by_at("bea", missing) == "by bea"
        assert by_at(missing, "2026-01-01T14:02:00Z").startswith("at ")
