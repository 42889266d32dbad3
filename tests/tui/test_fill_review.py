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


def _item_rows(db):
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return [tuple(r) for r in conn.execute("SELECT id, key, text, answer FROM items WHERE origin = 'benchfill'"
                                               " ORDER BY id")]
    finally:
        conn.close()


def _notes(app) -> list[str]:
    return [n.message for n in app._notifications]


@pytest.mark.timeout(240, method="thread")
async def test_undo_an_accept_or_a_reject_from_the_keys(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db = tmp_path / "fill.db"
    bench, sid = _session(fake_llm, db, monkeypatch)
    app = BenchloupeApp(db, benchmark=bench)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="review queue")
        screen = app.screen
        first = screen.current_candidate()
        await pilot.press("a", *"keep", "enter")  # accept with a note: an item
        await wait_until(pilot, lambda: app.screen is screen and idle(app)() and screen.undo_stack, timeout=60,
                         what="accept written")
        assert [r[1] for r in _item_rows(db)] == [f"benchfill-{sid}-{first}"]
        await pilot.press("z")  # back to review: the item is gone again, the proposal is pending and shown
        # the undo is written, then the reload that brings the cursor back lands (CI once read between the two)
        await wait_until(pilot, lambda: loaded(app, "benchfill")() and not screen.undo_stack
                         and screen.current_candidate() == first, timeout=60, what="undo written and shown")
        assert _item_rows(db) == []
        cands, log = _candidates(db, sid)
        row = cands.set_index("id").loc[first]
        assert row["review_state"] == "pending" and row["note"] == "" and row["item_id"] is None or \
            row["item_id"] != row["item_id"]
        assert screen.current_candidate() == first and "pending" in str(screen.query_one("#fill-review").render())
        assert log["action"].tolist()[:2] == ["fill:undo", "fill:accept"]
        await pilot.press("r", "enter")  # a reject, undone the same way
        await wait_until(pilot, lambda: app.screen is screen and idle(app)() and screen.undo_stack, timeout=60,
                         what="reject written")
        await pilot.press("z")
        await wait_until(pilot, lambda: loaded(app, "benchfill")() and not screen.undo_stack, timeout=60,
                         what="undo of the reject")
        assert _candidates(db, sid)[0].set_index("id").loc[first, "review_state"] == "pending"
        # later work on an accepted item: z refuses with the reason, changes nothing, and stays to undo
        await pilot.press("a", "enter")
        await wait_until(pilot, lambda: app.screen is screen and idle(app)() and screen.undo_stack, timeout=60,
                         what="accepted again")
        from benchloupe.store.db import connect

        conn = connect(db)
        conn.execute("INSERT INTO flags (kind, benchmark_id, item_id, payload) SELECT 'anomaly', benchmark_id, id,"
                     " '{}' FROM items WHERE origin = 'benchfill'")
        conn.commit()
        conn.close()
        await pilot.press("z")
        await wait_until(pilot, lambda: any("cannot undo" in m for m in _notes(app)) and idle(app)(), timeout=60,
                         what="refusal")
        assert len(_item_rows(db)) == 1 and screen.undo_stack
        assert _candidates(db, sid)[0].set_index("id").loc[first, "review_state"] == "accepted"


@pytest.mark.timeout(240, method="thread")
async def test_edit_text_and_answer_then_accept_and_bad_edits_are_refused(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    from textual import events

    from benchloupe.tui.screens.benchfill import EditDialog

    db = tmp_path / "fill.db"
    bench, sid = _session(fake_llm, db, monkeypatch)
    app = BenchloupeApp(db, benchmark=bench)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="review queue")
        screen = app.screen
        cid = screen.current_candidate()
        proposed = screen.cands.set_index("id").loc[cid]
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, EditDialog), what="edit dialog")
        dialog = app.screen
        area = dialog.query_one("#edit-area")
        assert area.text == proposed["text"] and dialog.query_one("#edit-answer").value == proposed["answer"]
        assert "\n" not in proposed["text"]
        await pilot.press("end", *" [b]Show your work.[/b]")
        await pilot.press("tab")
        answer = dialog.query_one("#edit-answer")
        answer.post_message(events.Paste("\x1b]0;pwned\x07\x00"))  # a terminal paste: an escape and a NUL
        await pilot.pause(0.1)
        await pilot.press("ctrl+s")
        await pilot.pause(0.1)
        assert app.screen is dialog, "an edit with control characters must not be accepted"
        assert "reference answer contains control characters" in str(dialog.query_one("#edit-error").render())
        await pilot.press("ctrl+u", "ctrl+s")  # cleared: an empty answer is refused too
        await pilot.pause(0.1)
        assert app.screen is dialog and "answer is empty" in str(dialog.query_one("#edit-error").render())
        await pilot.press(*"12345", "ctrl+s")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="note")
        await pilot.press(*"clearer", "enter")
        await wait_until(pilot, lambda: app.screen is screen and idle(app)() and screen.undo_stack, timeout=60,
                         what="edited accept written")
    (item,) = _item_rows(db)
    assert item[2] == proposed["text"] + " [b]Show your work.[/b]" and item[3] == "12345"
    cands, log = _candidates(db, sid)
    assert cands.set_index("id").loc[cid, "review_state"] == "accepted"
    assert '"edited": true' in log.loc[log["action"] == "fill:accept", "detail"].iloc[0]


@pytest.mark.timeout(240, method="thread")
async def test_marked_proposals_decided_together_and_undone_together(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db = tmp_path / "fill.db"
    bench, sid = _session(fake_llm, db, monkeypatch)
    app = BenchloupeApp(db, benchmark=bench)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="review queue")
        screen = app.screen
        ids = [int(screen.cands["id"].iloc[i]) for i in screen.view[:2]]
        await pilot.press("space")
        assert screen.current_candidate() == ids[1]
        await pilot.press("space")
        assert "2 marked" in str(screen.query_one("#fill-summary").render())
        await pilot.press("left_square_bracket")
        assert "● marked" in str(screen.query_one("#fill-review").render())
        await pilot.press("a", *"both", "enter")
        await wait_until(pilot, lambda: app.screen is screen and idle(app)() and screen.undo_stack, timeout=60,
                         what="batch accept")
        assert sorted(r[1] for r in _item_rows(db)) == sorted(f"benchfill-{sid}-{i}" for i in ids)
        await pilot.press("z")
        await wait_until(pilot, lambda: loaded(app, "benchfill")() and not screen.undo_stack, timeout=60,
                         what="batch undo")
    assert _item_rows(db) == []
    cands, log = _candidates(db, sid)
    assert set(cands.set_index("id").loc[ids, "review_state"]) == {"pending"}
    assert (log["action"] == "fill:undo").sum() == 2
