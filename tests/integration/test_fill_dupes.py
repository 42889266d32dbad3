"""BenchFill proposals that nearly duplicate an item or another proposal are marked before review (issue 33):
the journal checks each proposal with item health's near-duplicate test against the workspace's items (its parent
included) and the session's earlier proposals; the mark is in the proposal's payload, ``review --json`` and the
line-prompt review."""

from __future__ import annotations

import io
import json
import sys

import pandas as pd

from benchloupe.engine.benchfill_types import ChildRecord, RewriteRecord
from benchloupe.engine.itemhealth.dupes import TextIndex
from benchloupe.jobs.fill import SqliteJournal
from benchloupe.store import fill as fillstore
from benchloupe.store import read
from benchloupe.store.db import connect
from benchloupe.store.importers.base import ParsedImport
from benchloupe.store.writer import write_import
from tests.hostile import run_cli

PASSAGE = ("A farmer has a rectangular field that is forty metres long and twenty five metres wide. He plants "
           "wheat on one half of the field and barley on the remaining part, then sells the barley harvest at the "
           "market for two coins a kilogram. How many square metres of the field carry barley this year?")
OTHER = ("The river that runs past the old mill freezes every winter for about six weeks, and the children of "
         "the village skate on it from the bridge to the bend by the church. Which month does it usually thaw?")
FRESH = ("A train leaves the coastal station at nine in the morning and travels inland at sixty kilometres an "
         "hour, stopping twice for ten minutes each. When does it reach the mountain town three hundred km away?")


def _store(tmp_path):
    db = tmp_path / "w.db"
    conn = connect(db)
    for bench, keys, texts in (("B", ["q1", "q2"], [PASSAGE, "What is 2 + 2?"]), ("C", ["c1"], [OTHER])):
        y = [[1] * len(keys), [0] * len(keys)]
        write_import(conn, ParsedImport(bench, "static", pd.DataFrame({"key": keys, "text": texts,
                                                                       "answer": ["x"] * len(keys)}),
                                        pd.DataFrame({"name": ["m1", "m2"]}), correct=__import__("numpy").asarray(
                                            y, "int8"), source="test"), fmt="test")
    items = read.items(conn, "B")
    parent = int(items.loc[items["key"] == "q1", "id"].iloc[0])
    sid = fillstore.create_session(conn, read.benchmark_id(conn, "B"), 0.4, 0.6, 0.5, {"item_ids": [parent]})
    conn.close()
    return db, sid, parent


def _child(key: str, text: str, parent: str, phase: str = "benchfill") -> ChildRecord:
    return ChildRecord(child_id=key, phase=phase, round=1, parent_id=parent, text=text, answer="500", choices=())


def test_text_index_finds_the_nearest_kept_text():
    index = TextIndex()
    index.add("a", PASSAGE)
    index.add("b", OTHER)
    key, jac = index.nearest(PASSAGE.replace("barley", "oats", 1))
    assert key == "a" and 0.8 <= jac < 1
    assert index.nearest(FRESH) is None
    assert index.nearest(PASSAGE, exclude="a") is None  # itself, kept earlier
    assert index.nearest("") is None


def test_proposals_duplicating_an_item_or_a_proposal_are_marked(tmp_path):
    db, sid, parent = _store(tmp_path)
    journal = SqliteJournal(db, sid)
    try:
        journal.record_rewrite(RewriteRecord("baseline", 1, 0, str(parent), (
            _child("base-1", PASSAGE, str(parent), "baseline"),)))  # the baseline's children are never reviewed
        journal.record_rewrite(RewriteRecord("benchfill", 1, 0, str(parent), (
            _child("r1-a", PASSAGE.replace("forty metres", "fifty metres"), str(parent)),
            _child("r1-b", OTHER.replace("six weeks", "seven weeks"), str(parent)),
            _child("r1-c", FRESH, str(parent)),
        )))
        journal.record_rewrite(RewriteRecord("benchfill", 2, 0, "r1-c", (
            _child("r2-a", FRESH.replace("nine in the morning", "ten in the morning"), "r1-c"),)))
    finally:
        journal.close()
    conn = connect(db)
    cands = fillstore.candidates(conn, sid, reviewable_only=False).set_index("child_key")
    conn.close()
    dup = {k: p.get("duplicate_of") for k, p in cands["payload"].items()}
    assert set(dup) == {"r1-a", "r1-b", "r1-c", "r2-a"}
    assert dup["r1-a"]["kind"] == "item" and dup["r1-a"]["key"] == "q1" and dup["r1-a"]["parent"]
    assert dup["r1-b"]["kind"] == "item" and (dup["r1-b"]["key"], dup["r1-b"]["benchmark"]) == ("c1", "C")
    assert not dup["r1-b"]["parent"]
    assert dup["r1-c"] is None
    assert dup["r2-a"] == {"kind": "proposal", "child_key": "r1-c", "jaccard": dup["r2-a"]["jaccard"]}
    assert dup["r2-a"]["jaccard"] >= 0.8


def reviewable(tmp_path):
    """The store of :func:`_store` with two proposals for q1 waiting for review (judged valid and calibrated), in
    this order: r1-a nearly duplicates q1, r1-c is fresh. Returns the database."""
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
    return db


def test_the_review_shows_the_mark(tmp_path, monkeypatch):
    db = reviewable(tmp_path)
    rc, out, err = run_cli(["review", "--json", "--db", db])
    assert rc == 0, err
    rows = json.loads(out)
    rows = rows if isinstance(rows, list) else [dict(zip(rows["columns"], r)) for r in rows["data"]]
    marks = {r["child_key"]: r["duplicate_of"] for r in rows}
    assert marks["r1-a"].startswith("near-duplicate of its parent item q1 (Jaccard 0.")
    assert marks["r1-c"] is None
    monkeypatch.setattr(sys, "stdin", io.StringIO("s\ns\n"))
    rc, out, err = run_cli(["review", "--db", db])
    assert rc == 0, err
    assert out.count("warning: near-duplicate") == 1  # r1-a's, not the fresh r1-c's
    assert "warning: near-duplicate of its parent item q1" in out
