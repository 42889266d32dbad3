"""Cards say what their numbers mean (issue 32 point 10): on every card of every queue over the demo's real
analyses (the engine's own payloads), no payload field is printed raw ("a: 1.401", "mode: static", "fold: 0",
"gap: 0.001", "tied: no", "weight=0.00"), and the head shows no score that is the same on every card ("score
1.000" on every reversal)."""

from __future__ import annotations

import re

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)
CARDS = 6  # cards read per queue


@pytest.mark.parametrize("key,mode", [("5", "anomalies"), ("6", "reversals")])
async def test_every_card_shows_words_not_payload_fields(showcase_db, key, mode):
    app = BenchloupeApp(showcase_db, benchmark="demo-chem")
    async with app.run_test(size=(160, 60)) as pilot:
        await pilot.press(key)
        await wait_until(pilot, loaded(app, mode), what=mode)
        screen, seen = app.screen, 0
        scores = set()
        for _ in range(CARDS):
            row = screen._current_row()
            if row is None:
                break
            payload = screen.payload(row) if hasattr(screen, "payload") else row["payload"]
            card = str(screen.query_one("#queue-detail").render())
            for field in payload:
                assert not re.search(rf"(^|\s){re.escape(field)}[:=]", card), (field, card)
            for item in payload.get("top_items", []) or []:
                for field in item:
                    assert f"{field}=" not in card and f"{field}:" not in card, (field, card)
            head = card.splitlines()[0]
            scores.add(re.search(r"score \S+", head).group(0) if "score " in head else None)
            seen += 1
            await pilot.press("j")
            await wait_until(pilot, idle(app), what="next card")
            await pilot.pause(0.02)
        assert seen >= 2, f"the showcase has {mode} to read"
        assert scores == {None} or len(scores) > 1, scores  # a score the same on every card says nothing
