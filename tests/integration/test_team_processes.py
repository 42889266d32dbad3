"""Issue 25, as two curators would: two workbenches, each ``benchloupe open`` in its own process in its own
tmux pane (keys in with send-keys, the screen out with capture-pane), plus CLI processes, on one database file.

- B's decision reaches A's open card; A's decision on the card B changed meanwhile is refused naming B and
  overwrites nothing; A's undo after B changed A's flag is refused.
- Two reviewers on one BenchFill session: a proposal one holds shows "is reviewing" to the other and cannot be
  decided by them; each proposal is decided once, no item is made twice; a killed reviewer's lease expires.

The time from B's key to A's screen showing it is printed (``-s`` shows it); it is measured, not asserted
(bench/bench_team.py records it with the key latency)."""

from __future__ import annotations

import os
import signal
import sqlite3
import time

import pytest

from tests.tmux_app import HAVE_TMUX, TmuxApp
from tests.tui.conftest import add_flags
from tests.tui.team import audit_rows, candidate_rows, flag_rows, small_session

pytestmark = [pytest.mark.skipif(not HAVE_TMUX, reason="tmux is not installed"),
              pytest.mark.timeout(600, method="thread")]


def _workspace(db) -> None:
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        curation.put_setting(conn, "tui.last_benchmark", "demo-math")
    finally:
        conn.close()


def _open(app: TmuxApp, key: str, ready: str) -> None:
    app.wait_for("demo-math", 90)
    app.keys(key)
    app.wait_for(ready, 90)


def test_two_workbenches_live_view_conflict_and_undo(demo_db):
    add_flags(demo_db)
    _workspace(demo_db)
    first = int(flag_rows(demo_db, "anomaly").index[0])
    with TmuxApp(demo_db, "ann") as a, TmuxApp(demo_db, "bea") as b:
        _open(a, "5", "Anomaly 1 of 12")
        _open(b, "5", "Anomaly 1 of 12")
        assert "demo-math · ann" in a.screen() and "demo-math · bea" in b.screen()

        # 1. bea dismisses #1: ann's open card says so
        t0 = time.monotonic()
        b.keys("d", pause=0)
        a.wait_for("dismissed by bea", 30)
        print(f"\nbea's key to ann's card: {time.monotonic() - t0:.2f} s")
        assert "changed while you looked: dismissed by bea" in a.screen()

        # 2. ann begins a note on #1 (the card then said "dismissed by bea"); while she types, bea changes #1
        # again; ann's note, made on the flag as she saw it, is refused naming bea and overwrites nothing
        a.keys("e")
        a.wait_for("Note on anomaly", 30)
        b.keys("k", "u")  # bea: back to #1, unsure
        deadline = time.monotonic() + 30
        while flag_rows(demo_db, "anomaly").loc[first, "state"] != "unsure":
            assert time.monotonic() < deadline, b.screen()
            time.sleep(0.05)
        a.type("agree, noise")
        a.keys("Enter")
        a.wait_for("Refused", 30)
        assert "bea" in a.screen()
        a.wait_for("unsure by bea", 30)
        flags = flag_rows(demo_db, "anomaly")
        assert (flags.loc[first, "state"], flags.loc[first, "updated_by"]) == ("unsure", "bea")
        assert flags.loc[first, "note"] == ""
        assert [r["actor"] for r in audit_rows(demo_db, "flag") if r["entity_id"] == first] == ["bea", "bea"]

        # 3. ann dismisses #2; bea, seeing it on her card, confirms it; ann's undo is refused
        a.keys("j")
        second = int(flags.index[1])
        a.wait_for(f"#{second} open", 30)
        a.keys("d")
        b.wait_for(f"#{second} dismissed by ann", 30)
        b.keys("c")
        deadline = time.monotonic() + 30
        while flag_rows(demo_db, "anomaly").loc[second, "state"] != "confirmed":
            assert time.monotonic() < deadline, b.screen()
            time.sleep(0.05)
        a.keys("z")
        a.wait_for("after your decision", 30)
        flags = flag_rows(demo_db, "anomaly")
        assert (flags.loc[second, "state"], flags.loc[second, "updated_by"]) == ("confirmed", "bea")
        assert [r["action"] for r in audit_rows(demo_db, "flag") if r["entity_id"] == second] == [
            "flag:dismissed", "flag:confirmed"]


def test_two_reviewers_on_one_benchfill_session(demo_db):
    sid = small_session(demo_db, n=4)
    _workspace(demo_db)
    cands = candidate_rows(demo_db, sid)
    ids = list(cands.sort_values(["distance", "id"]).index)
    label = {i: f"#{i} ({cands.loc[i, 'child_key']})" for i in ids}  # the card's first line
    with TmuxApp(demo_db, "ann") as a, TmuxApp(demo_db, "bea") as b:
        _open(a, "8", "Proposal 1 of 4")
        time.sleep(1.0)  # ann's lease on the first proposal is written
        _open(b, "8", "Proposal 1 of 4")
        b.wait_for("is reviewing", 30)  # the first proposal is ann's
        assert "ann (since" in b.screen()
        b.keys("a")
        b.wait_for("reviewing it", 30)  # refused at once: no note asked for
        assert "Accept proposal" not in b.screen()
        b.keys("Escape", "l")  # skip to the second, which is free
        b.wait_for(label[ids[1]], 30)
        b.keys("r")
        b.wait_for("Reject proposal", 30)
        b.keys("Enter")
        a.keys("r")
        a.wait_for("Reject proposal", 30)
        a.keys("Enter")
        deadline = time.monotonic() + 60
        while not (candidate_rows(demo_db, sid).loc[ids[:2], "review_state"] == "rejected").all():
            assert time.monotonic() < deadline, a.screen() + b.screen()
            time.sleep(0.1)
        # both move on to the third: whoever got there first holds it, the other sees "... is reviewing"; then
        # the holder's process is killed and the other can decide it
        a.wait_for(label[ids[2]], 30)
        b.wait_for(label[ids[2]], 30)
        deadline = time.monotonic() + 30
        while True:
            conn = sqlite3.connect(demo_db)
            try:
                holder = conn.execute("SELECT holder FROM fill_reviews WHERE candidate_id = ?",
                                      (ids[2],)).fetchone()
            finally:
                conn.close()
            if holder is not None:
                break
            assert time.monotonic() < deadline, a.screen() + b.screen()
            time.sleep(0.1)
        gone, other = (a, b) if holder[0] == "ann" else (b, a)
        other.wait_for(f"{gone.actor} (since", 30)
        other.wait_for("is reviewing", 30)
        os.kill(gone.pid, signal.SIGKILL)
        other.wait_for("is reviewing", 30, gone=True)  # the lease went with its process
        other.keys("r")
        other.wait_for("Reject proposal", 30)
        other.keys("Enter")
        deadline = time.monotonic() + 60
        while candidate_rows(demo_db, sid).loc[ids[2], "review_state"] != "rejected":
            assert time.monotonic() < deadline, other.screen()
            time.sleep(0.1)
    cands = candidate_rows(demo_db, sid)
    assert [cands.loc[i, "decided_by"] for i in ids[:3]] == ["ann", "bea", other.actor]
    decisions = [r for r in audit_rows(demo_db, "fill_candidate") if r["action"] in ("fill:accept", "fill:reject")]
    assert sorted(r["entity_id"] for r in decisions) == sorted(ids[:3])  # each decided once
