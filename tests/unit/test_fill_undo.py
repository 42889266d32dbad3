"""Undo of a BenchFill review decision and the edit rules (issue 11, "what a curator expects" 1): a session made
by the real job against the local OpenAI-compatible server, decisions through jobs.fill on a real SQLite file."""

from __future__ import annotations

import pytest

from benchloupe.jobs import fill
from benchloupe.store import fill as fillstore
from benchloupe.store.db import StoreError, connect
from tests.fake_llm import fake_llm  # noqa: F401 - the fixture
from tests.fill_world import configure_endpoints, store_world


def _session(fake, db, monkeypatch) -> tuple[str, int, list[int]]:
    from benchloupe.engine.benchfill import BenchFillConfig

    bench = store_world(fake, db)
    configure_endpoints(fake, db, monkeypatch)
    sid = fill.start_fill(db, bench, fill.FillOptions(gap=1), config=BenchFillConfig(max_rounds=2))
    conn = connect(db)
    try:
        cands = fillstore.candidates(conn, sid)
    finally:
        conn.close()
    return bench, sid, [int(i) for i in cands.loc[cands["review_state"] == "pending", "id"]]


def _snapshot(db) -> dict:
    conn = connect(db)
    try:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()
                for t in ("items", "fill_candidates", "flags", "run_items")}
    finally:
        conn.close()


def _state(db, cid: int) -> tuple:
    conn = connect(db)
    try:
        row = conn.execute("SELECT review_state, item_id, note FROM fill_candidates WHERE id = ?", (cid,)).fetchone()
        items = conn.execute("SELECT count(*) FROM items WHERE origin = 'benchfill'").fetchone()[0]
        actions = [r[0] for r in conn.execute("SELECT action FROM audit_log WHERE entity = 'fill_candidate' AND"
                                              " entity_id = ? ORDER BY id", (cid,))]
        return tuple(row), items, actions
    finally:
        conn.close()


@pytest.mark.timeout(240, method="thread")
def test_undo_an_accept_removes_exactly_its_item_and_an_edit_is_checked(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db = tmp_path / "fill.db"
    bench, sid, pending = _session(fake_llm, db, monkeypatch)
    first, second = pending[:2]
    before = _snapshot(db)
    with pytest.raises(StoreError, match="no decision to undo"):
        fill.undo_candidate(db, first)
    # an edit with a terminal escape or a NUL is refused by the same rule as an LLM rewrite, and changes nothing
    for text, answer in (("What is \x1b]0;pwned\x07 2 + 2?", "4"), ("What is 2 + 2?", "4\x00"), ("  ", "4")):
        with pytest.raises(StoreError, match="control characters|empty"):
            fill.decide_candidate(db, first, "accept", "edited", edited_text=text, edited_answer=answer)
    assert _snapshot(db) == before
    item = fill.decide_candidate(db, first, "accept", "good", edited_text="What is [b]2[/b] + 2?\n\tSum.",
                                 edited_answer="4")
    assert item is not None
    conn = connect(db)
    try:
        assert tuple(conn.execute("SELECT text, answer FROM items WHERE id = ?", (item,)).fetchone()) == (
            "What is [b]2[/b] + 2?\n\tSum.", "4")
    finally:
        conn.close()
    out = fill.undo_candidate(db, first)
    assert {k: out[k] for k in ("from", "item_id")} == {"from": "accepted", "item_id": item}
    state, n_items, actions = _state(db, first)
    assert state == ("pending", None, "") and n_items == 0
    assert actions == ["fill:accept", "fill:undo"]
    after = _snapshot(db)
    assert after["items"] == before["items"], "exactly the accepted item went away"
    assert [r for r in after["fill_candidates"] if r["id"] != first] == [
        r for r in before["fill_candidates"] if r["id"] != first]
    # a reject is undone too
    fill.decide_candidate(db, second, "reject", "dull")
    out = fill.undo_candidate(db, second)
    assert {k: out[k] for k in ("from", "item_id")} == {"from": "rejected", "item_id": None}
    assert _state(db, second)[0] == ("pending", None, "")
    # later work built on an accepted item: the undo is refused and changes nothing
    item = fill.decide_candidate(db, first, "accept", "again")
    conn = connect(db)
    try:
        conn.execute("INSERT INTO flags (kind, benchmark_id, item_id, score, payload) SELECT 'anomaly', benchmark_id,"
                     " id, 1.0, '{}' FROM items WHERE id = ?", (item,))
        conn.commit()
    finally:
        conn.close()
    held = _snapshot(db)
    with pytest.raises(StoreError, match=r"cannot undo .*\(flags\)"):
        fill.undo_candidate(db, first)
    assert _snapshot(db) == held


def test_edit_rules_are_the_rewrite_rules():
    """An edit passes the checks a rewrite from the LLM must pass (engine precheck_child): text and answer not
    empty, no control characters (newline and tab allowed), a multiple-choice answer among the options."""
    from benchloupe.engine.benchfill import ChildDraft, FillItem, precheck_child

    parent = FillItem("p", "What is 1 + 1?", "2", 0.5)
    cases = [("What is 2 + 2?", "4", ()), ("What is\n\t2 + 2?", "4", ()), ("What \x1b[2J is 2 + 2?", "4", ()),
             ("What is 2 + 2?", "4\x00", ()), ("", "4", ()), ("What is 2 + 2?", " ", ()),
             ("Pick one", "B", ("3", "4")), ("Pick one", "4", ("3", "4")), ("Pick one", "5", ("3", "4"))]
    for text, answer, choices in cases:
        ours = fill.edit_problem(text, answer, choices)
        engine = precheck_child(ChildDraft(text, answer, choices), parent, "choice" if choices else "short")
        assert (ours is None) == (engine is None), (text, answer, choices, ours, engine)
    assert "not one of the 2 options" in fill.edit_problem("Pick one", "5", ("3", "4"))
