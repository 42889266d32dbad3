"""The BenchFill review card says when a proposal nearly duplicates an item (issue 33), before the decision."""

from __future__ import annotations

import pytest

from benchloupe.engine.benchfill_types import RewriteRecord
from benchloupe.jobs.fill import SqliteJournal
from benchloupe.store import fill as fillstore
from benchloupe.store.db import connect
from benchloupe.tui.app import BenchloupeApp
from tests.integration.test_fill_dupes import FRESH, PASSAGE, _child, _store
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio


async def test_the_review_card_marks_a_near_duplicate(tmp_path):
    db, sid, parent = _store(tmp_path)
    journal = SqliteJournal(db, sid)
    try:
        journal.record_rewrite(RewriteRecord("benchfill", 1, 0, str(parent), (
            _child("r1-a", PASSAGE.replace("forty metres", "fifty metres"), str(parent)),
            _child("r1-c", FRESH, str(parent)))))
    finally:
        journal.close()
    conn = connect(db)
    for key, distance in (("r1-a", 0.01), ("r1-c", 0.02)):
        fillstore.set_verdict(conn, sid, key, True, "ok")
        fillstore.set_estimate(conn, sid, key, b=0.1, z=0.5, distance=distance, se=0.3, n_successes=3, n_trials=6,
                               identified=True)
    conn.close()
    app = BenchloupeApp(db, benchmark="B")
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
