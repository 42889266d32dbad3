"""The BenchFill review card says when a proposal nearly duplicates an item (issue 33), before the decision."""

from __future__ import annotations

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.integration.test_fill_dupes import reviewable
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio


async def test_the_review_card_marks_a_near_duplicate(tmp_path):
    app = BenchloupeApp(reviewable(tmp_path), benchmark="B")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="benchfill")
        screen = app.screen
        await wait_until(pilot, lambda: bool(screen.view), what="proposals")
        card = str(screen.query_one("#fill-review").render())
        assert "Proposal 1 of 2" in card and "near-duplicate of its parent item q1 (Jaccard 0." in card
        await pilot.press("]")
        card = str(screen.query_one("#fill-review").render())
        assert "Proposal 2 of 2" in card and "near-duplicate" not in card
