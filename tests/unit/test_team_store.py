"""Issue 25 in the store: who decided (the actor), no lost updates (versions, expectations, all-or-none batches,
undo of one's own latest decision), review leases and approvals of BenchFill proposals, the migration of an
existing database, and the audit log replayed from empty. Real SQLite files; the concurrent accepts run in
separate processes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from benchloupe.store import actor, curation, fill, runners
from benchloupe.store.db import StoreError, connect
from tests.tui.conftest import add_flags
from tests.tui.team import small_session


@pytest.fixture
def db(demo_db):
    add_flags(demo_db)
    return demo_db


def _conn(db):
    return connect(db)


def _anomalies(conn) -> list[int]:
    return [int(i) for i in curation.flags(conn, kind="anomaly")["id"]]


# ------------------------------------------------------------------------------------------------ the actor
def test_actor_order_as_then_environment_then_login(monkeypatch):
    monkeypatch.setenv("BENCHLOUPE_USER", "env-name")
    assert actor.current() == "env-name"
    assert actor.set_actor("bea") == "bea" and os.environ["BENCHLOUPE_USER"] == "bea"
    actor.set_actor(None)
    monkeypatch.delenv("BENCHLOUPE_USER")
    assert actor.current() == actor.login()
    monkeypatch.setenv("BENCHLOUPE_USER", "bad\x1b]0;x\x07")  # not a usable name: refused, not the login (#37)
    with pytest.raises(ValueError, match=r"\$BENCHLOUPE_USER"):
        actor.current()
    for bad in ("", "  ", "a\nb", "x" * 41):
        with pytest.raises(ValueError):
            actor.set_actor(bad)


def test_every_audit_row_has_the_curator_not_the_login(db):
    conn = _conn(db)
    try:
        ids = _anomalies(conn)
        actor.set_actor("bea")
        curation.set_flag_state(conn, ids[0], "dismissed", "noise")
        curation.set_item_status(conn, int(conn.execute("SELECT id FROM items LIMIT 1").fetchone()[0]), "retired")
        rows = [dict(r) for r in conn.execute("SELECT actor, action FROM audit_log WHERE actor = 'bea'")]
    finally:
        conn.close()
    assert [r["action"] for r in rows] == ["flag:dismissed", "item:retire"]


def test_the_cli_as_option_names_the_actor_and_a_bad_one_is_one_line(db):
    env = {**os.environ, "BENCHLOUPE_USER": ""}
    out = subprocess.run([sys.executable, "-m", "benchloupe", "--db", str(db), "flags", "--set", "1", "unsure",
                          "--as", "dora"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    bad = subprocess.run([sys.executable, "-m", "benchloupe", "--db", str(db), "--as", "x\ty", "flags"],
                         capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "control characters" in bad.stderr
    conn = _conn(db)
    try:
        assert conn.execute("SELECT actor FROM audit_log ORDER BY id DESC LIMIT 1").fetchone()[0] == "dora"
    finally:
        conn.close()


# ------------------------------------------------------------------------------------- optimistic concurrency
def test_a_decision_on_a_stale_version_is_refused_and_changes_nothing(db):
    conn = _conn(db)
    try:
        fid = _anomalies(conn)[0]
        actor.set_actor("bea")
        saved = curation.set_flag_state(conn, fid, "dismissed", "other curator says noise", expect_version=0)
        assert saved.versions == {fid: 1}
        actor.set_actor("ann")
        before = conn.execute("SELECT count(*) FROM audit_log").fetchone()[0]
        with pytest.raises(curation.Conflict) as err:
            curation.set_flag_state(conn, fid, "confirmed", expect_version=0)
        assert "now dismissed by bea at " in str(err.value) and "other curator says noise" in str(err.value)
        assert err.value.changes[0]["by"] == "bea"
        row = conn.execute("SELECT state, note, version, updated_by FROM flags WHERE id = ?", (fid,)).fetchone()
        assert tuple(row) == ("dismissed", "other curator says noise", 1, "bea")
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone()[0] == before
    finally:
        conn.close()


def test_without_an_expectation_the_write_records_what_it_replaced(db):
    conn = _conn(db)
    try:
        fid = _anomalies(conn)[0]
        actor.set_actor("bea")
        curation.set_flag_state(conn, fid, "dismissed", "noise")
        actor.set_actor("ann")
        curation.set_flag_state(conn, fid, "confirmed")
        detail = json.loads(conn.execute("SELECT detail FROM audit_log ORDER BY id DESC LIMIT 1").fetchone()[0])
    finally:
        conn.close()
    assert detail["from"] == "dismissed" and detail["note_from"] == "noise"
    assert detail["replaced"]["by"] == "bea" and detail["replaced"]["version"] == 1 and detail["version"] == 2


def test_a_batch_is_all_or_none(db):
    conn = _conn(db)
    try:
        ids = _anomalies(conn)[:4]
        curation.set_flag_state(conn, ids[2], "unsure")
        with pytest.raises(curation.Conflict, match="1 of the 4 flags changed since you saw them"):
            curation.set_flag_states(conn, [(i, "dismissed", None) for i in ids], expect={i: 0 for i in ids})
        states = [conn.execute("SELECT state FROM flags WHERE id = ?", (i,)).fetchone()[0] for i in ids]
    finally:
        conn.close()
    assert states == ["open", "open", "unsure", "open"]


def test_undo_latest_takes_back_only_ones_own_decision_and_refuses_after_a_change(db):
    conn = _conn(db)
    try:
        ids = _anomalies(conn)
        actor.set_actor("bea")
        curation.set_flag_state(conn, ids[0], "dismissed", "noise")
        curation.set_flag_states(conn, [(ids[1], "confirmed", None), (ids[2], "confirmed", None)])
        actor.set_actor("ann")
        curation.set_flag_state(conn, ids[3], "unsure")
        actor.set_actor("bea")
        out = curation.undo_latest(conn)  # bea's latest: the batch, both flags at once
        assert sorted(out["flags"]) == sorted(ids[1:3])
        assert [conn.execute("SELECT state FROM flags WHERE id = ?", (i,)).fetchone()[0] for i in ids[:4]] == [
            "dismissed", "open", "open", "unsure"]
        actor.set_actor("ann")
        curation.set_flag_state(conn, ids[0], "confirmed")  # ann changes bea's remaining decision
        actor.set_actor("bea")
        with pytest.raises(curation.Conflict, match="changed after your decision: now confirmed by ann"):
            curation.undo_latest(conn)
        actor.set_actor("dora")
        with pytest.raises(StoreError, match="dora has no decision to undo"):
            curation.undo_latest(conn)
        actor.set_actor("ann")
        curation.undo_latest(conn)  # ann's confirm of ids[0]: back to bea's dismissal, shown as bea's
        row = conn.execute("SELECT state, note, updated_by FROM flags WHERE id = ?", (ids[0],)).fetchone()
        assert tuple(row) == ("dismissed", "noise", "bea")
        replay = curation.replay_flags(conn)
        assert replay["gaps"] == [] and replay["mismatches"] == []
    finally:
        conn.close()


def test_item_retire_on_a_stale_status_is_refused(db):
    conn = _conn(db)
    try:
        item = int(conn.execute("SELECT id FROM items LIMIT 1").fetchone()[0])
        actor.set_actor("bea")
        curation.set_item_status(conn, item, "retired", "duplicate")
        actor.set_actor("ann")
        with pytest.raises(curation.Conflict, match="is now retired by bea"):
            curation.set_item_status(conn, item, "retired", expect_status="active")
    finally:
        conn.close()


# --------------------------------------------------------------------------------------------- migration
def test_an_existing_database_migrates_with_versions_from_its_audit_log(tmp_path):
    from benchloupe.store import schema
    from benchloupe.store.db import _split

    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    for target, script in enumerate(schema.MIGRATIONS[:3]):  # up to the curators migration (4)
        for st in _split(script):
            raw.execute(st)
        raw.execute(f"PRAGMA user_version = {target + 1}")
    raw.execute("INSERT INTO benchmarks (name) VALUES ('b')")
    raw.execute("INSERT INTO flags (kind, benchmark_id, state, note) VALUES ('anomaly', 1, 'dismissed', 'n')")
    raw.execute("INSERT INTO flags (kind, benchmark_id) VALUES ('anomaly', 1)")
    for action, to, note in (("flag:confirmed", "confirmed", ""), ("flag:dismissed", "dismissed", "n")):
        raw.execute("INSERT INTO audit_log (actor, action, entity, entity_id, detail, note) VALUES"
                    " ('root', ?, 'flag', 1, ?, ?)", (action, json.dumps({"to": to}), note))
    raw.close()
    conn = connect(path)
    try:
        rows = [tuple(r) for r in conn.execute("SELECT id, version, updated_by FROM flags ORDER BY id")]
        assert rows == [(1, 2, "root"), (2, 0, "")]
        replay = curation.replay_flags(conn)
        assert replay["gaps"] == [] and replay["mismatches"] == []
    finally:
        conn.close()


# ---------------------------------------------------------------------------------- BenchFill review leases
def test_a_review_lease_holds_then_expires(demo_db):
    sid = small_session(demo_db, n=2)
    conn = _conn(demo_db)
    try:
        cid = int(fill.candidates(conn, sid)["id"].iloc[0])
        ann = runners.this_runner()
        actor.set_actor("ann")
        assert fill.claim_review(conn, cid, ann) is None
        bea = runners.this_runner()
        actor.set_actor("bea")
        busy = fill.claim_review(conn, cid, bea)
        assert busy is not None and busy["holder"] == "ann"
        with pytest.raises(fill.ReviewBusy, match="ann is reviewing proposal"):
            fill.decide(conn, cid, "reject", lease_token=bea["token"])
        # a reviewer on another host that stopped beating: expired after REVIEW_LEASE_S
        conn.execute("UPDATE fill_reviews SET runner = json_set(runner, '$.host', 'elsewhere')")
        later = time.time() + fill.REVIEW_LEASE_S + 1
        assert fill.review_holder(conn, cid, bea["token"], now=later) is None
        assert fill.claim_review(conn, cid, bea, now=later) is None
        # (seen at the same later time: a heartbeat ahead of the reader's clock expires, issue 37 #15)
        assert fill.review_holder(conn, cid, ann["token"], now=later)["holder"] == "bea"
        # a reviewer on this host whose process is gone: expired at once
        conn.execute("UPDATE fill_reviews SET runner = json_set(runner, '$.pid', 2147480000, '$.host', ?)",
                     (runners.this_runner()["host"],))
        assert fill.review_holder(conn, cid, ann["token"]) is None
        actor.set_actor("ann")
        assert fill.decide(conn, cid, "reject", lease_token=ann["token"]) is None
        assert conn.execute("SELECT count(*) FROM fill_reviews").fetchone()[0] == 0  # the decision released it
    finally:
        conn.close()


def test_two_approvals_before_an_item_is_created(demo_db):
    sid = small_session(demo_db, n=2, approvals=2)
    conn = _conn(demo_db)
    try:
        cid = int(fill.candidates(conn, sid)["id"].iloc[0])
        actor.set_actor("ann")
        assert fill.decide(conn, cid, "accept", "fine") is None
        assert conn.execute("SELECT review_state FROM fill_candidates WHERE id = ?", (cid,)).fetchone()[0] == "waiting"
        with pytest.raises(StoreError, match="ann already approved"):
            fill.decide(conn, cid, "accept")
        actor.set_actor("bea")
        item = fill.decide(conn, cid, "accept", "agreed")
        assert item is not None
        meta = json.loads(conn.execute("SELECT metadata FROM items WHERE id = ?", (item,)).fetchone()[0])
        assert meta["accepted_by"] == ["ann", "bea"]
        audit = [tuple(r) for r in conn.execute("SELECT actor, action FROM audit_log WHERE entity ="
                                                " 'fill_candidate' ORDER BY id")]
        assert audit == [("ann", "fill:approve"), ("bea", "fill:accept")]
        fill.undo_decision(conn, cid)  # bea takes back her approval: the item goes, ann's approval stays
        row = conn.execute("SELECT review_state, item_id FROM fill_candidates WHERE id = ?", (cid,)).fetchone()
        assert tuple(row) == ("waiting", None)
        assert [r[0] for r in conn.execute("SELECT actor FROM fill_approvals WHERE candidate_id = ?", (cid,))] == [
            "ann"]
    finally:
        conn.close()


ACCEPT = """
import sys, time
from benchloupe.store import actor, fill
from benchloupe.store.db import connect
actor.set_actor(sys.argv[3])
conn = connect(sys.argv[1])
while time.time() < float(sys.argv[4]):
    time.sleep(0.001)
try:
    print("item", fill.decide(conn, int(sys.argv[2]), "accept", "mine"))
except Exception as exc:
    print("refused", exc)
"""


def test_two_processes_accepting_one_proposal_create_one_item(demo_db):
    sid = small_session(demo_db, n=1)
    conn = _conn(demo_db)
    try:
        cid = int(fill.candidates(conn, sid)["id"].iloc[0])
    finally:
        conn.close()
    start = time.time() + 2.0
    procs = [subprocess.Popen([sys.executable, "-c", ACCEPT, str(demo_db), str(cid), who, str(start)],
                              stdout=subprocess.PIPE, text=True) for who in ("ann", "bea", "cy")]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert sum(o.startswith("item") for o in outs) == 1, outs
    assert sum("was already accepted by" in o for o in outs) == 2, outs
    conn = _conn(demo_db)
    try:
        assert conn.execute("SELECT count(*) FROM items WHERE origin = 'benchfill'").fetchone()[0] == 1
    finally:
        conn.close()
