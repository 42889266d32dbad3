"""The review card's se is on the scale of the difficulty beside it (issue 32 point 9: a logit-scale se sat
beside a 0-1 difficulty)."""

from __future__ import annotations

import math

import pytest

from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.screens.benchfill import se_words
from tests.fake_llm import fake_llm  # noqa: F401 - the fixture
from tests.tui.conftest import loaded, wait_until
from tests.tui.test_fill_review import _candidates, _session

pytestmark = pytest.mark.anyio


def test_the_se_words():
    assert se_words(0.8, -2.0, 2.0) == "se 0.200 (0-1 scale)"
    assert se_words(0.8, None, None) == "se 0.800 (logit scale)"
    assert se_words(0.8, 1.0, 1.0) == "se 0.800 (logit scale)"  # no width: the raw se, labelled
    assert se_words(None, -2, 2) == "se unknown" and se_words(math.nan, -2, 2) == "se unknown"


@pytest.mark.timeout(240, method="thread")
async def test_the_card_shows_the_se_of_the_shown_difficulty(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db = tmp_path / "fill.db"
    bench, sid = _session(fake_llm, db, monkeypatch)
    cands = _candidates(db, sid, reviewable_only=True)[0].set_index("id")
    app = BenchloupeApp(db, benchmark=bench)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="review queue")
        c = cands.loc[app.screen.current_candidate()]
        card = str(app.screen.query_one("#fill-review").render())
        se = c["payload"]["se"] / (c["b_max"] - c["b_min"])
        assert f"se {se:.3f} (0-1 scale)" in card, card
