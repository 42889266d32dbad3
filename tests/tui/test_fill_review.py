"""BenchFill review from the keyboard (issue 11, "what a curator expects" 1): skip a proposal, and reject the rest
of a session after a confirmation; a session made by the real job against the local OpenAI-compatible server."""

from __future__ import annotations

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.fake_llm import fake_llm  # noqa: F401 - the fixture
from tests.fill_world import configure_endpoints, store_world
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def _session(fake, db, monkeypatch) -> tuple[str, int]:
    from benchloupe.engine.benchfill import BenchFillConfig
    from benchloupe.jobs import fill

    bench = store_world(fake, db)
    configure_endpoints(fake, db, monkeypatch)
    return bench, fill.start_fill(db, bench, fill.FillOptions(gap=1), config=BenchFillConfig(max_rounds=2))


def _candidates(db, sid, reviewable_only: bool = False):
    from benchloupe.store import curation
    from benchloupe.store import fill as fillstore
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return fillstore.candidates(conn, sid, reviewable_only=reviewable_only), curation.audit_log(conn)
    finally:
        conn.close()


@pytest.mark.timeout(240, method="thread")
async def test_skip_and_reject_the_rest_with_confirmation(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    from benchloupe.tui.widgets.dialogs import ConfirmDialog

    db = tmp_path / "fill.db"
    bench, sid = _session(fake_llm, db, monkeypatch)
    pending = _candidates(db, sid, reviewable_only=True)[0]  # what the review queue shows
    pending = set(pending.loc[pending["review_state"] == "pending", "id"])
    assert len(pending) >= 2, "the session needs two proposals to skip between"
    app = BenchloupeApp(db, benchmark=bench)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="review queue")
        screen = app.screen
        first = screen.current_candidate()
        await pilot.press("l")  # skip: the next one, the first stays to review
        assert screen.current_candidate() != first
        assert screen.cands.set_index("id").loc[first, "review_state"] == "pending"
        await pilot.press("X")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="confirmation")
        assert f"{len(pending)} proposals" in str(app.screen.query_one("Label").render())
        await pilot.press("n")  # no: nothing changes
        await pilot.pause(0.1)
        assert app.screen is screen and screen.view
        await pilot.press("X")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="asked again")
        await pilot.press("y")
        assert not screen.view  # shown at once: nothing left to review
        await wait_until(pilot, lambda: app.screen is screen and idle(app)(), timeout=60, what="writes")
    cands, log = _candidates(db, sid)
    done = cands[cands["id"].isin(pending)]
    assert len(done) == len(pending)
    assert (done["review_state"] == "rejected").all()
    assert done["note"].str.contains(f"rest of session #{sid}").all()
    assert (log["entity_id"].isin(pending) & log["action"].str.contains("reject")).sum() == len(pending)
