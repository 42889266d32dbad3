"""Issue 21 #9 and issue 25 ("exports include the actor"): the decisions export (W in the workbench) writes ids
as whole numbers, names the item an accepted proposal created (not the proposal's child label), and says who
made each decision and when."""

from __future__ import annotations

import csv
import json

from benchloupe.store import actor, curation, fill
from benchloupe.store.db import connect
from benchloupe.tui import export
from tests.tui.conftest import add_flags
from tests.tui.team import small_session


def _decide_some(db):
    add_flags(db)
    sid = small_session(db, n=3)
    conn = connect(db)
    try:
        flags = curation.flags(conn, kind="anomaly")
        actor.set_actor("bea")
        curation.set_flag_state(conn, int(flags["id"].iloc[0]), "dismissed", "other curator says noise")
        actor.set_actor("ann")
        curation.set_flag_state(conn, int(flags["id"].iloc[1]), "confirmed")
        cands = fill.candidates(conn, sid)
        accepted, rejected = int(cands["id"].iloc[0]), int(cands["id"].iloc[1])
        item = fill.decide(conn, accepted, "accept", "good rewrite")
        actor.set_actor("bea")
        fill.decide(conn, rejected, "reject", "too easy")
        key = conn.execute("SELECT key FROM items WHERE id = ?", (item,)).fetchone()[0]
        frame = export.decisions(conn, "demo-math")
    finally:
        conn.close()
        actor.set_actor(None)
    return frame, flags, accepted, rejected, key, sid


def test_json_export_has_whole_ids_the_created_item_and_the_actor(demo_db, tmp_path):
    frame, flags, accepted, rejected, key, sid = _decide_some(demo_db)
    out = export.write_frame(frame, tmp_path / "decisions.json")
    rows = json.loads(out.read_text(encoding="utf-8"))
    by_id = {(r["what"], r["id"]): r for r in rows}
    first = by_id[("flag", int(flags["id"].iloc[0]))]
    assert isinstance(first["run_id"], int) and not isinstance(first["run_id"], bool)  # not 3.0
    assert first["by"] == "bea" and first["state"] == "dismissed" and first["at"]
    assert by_id[("flag", int(flags["id"].iloc[1]))]["by"] == "ann"
    acc = by_id[("proposal", accepted)]
    assert acc["item"] == key == f"benchfill-{sid}-{accepted}"  # the created item, not "r1.s0.c0"
    assert acc["proposal"] == "r1.s0.c0" and acc["by"] == "ann" and isinstance(acc["session_id"], int)
    rej = by_id[("proposal", rejected)]
    assert rej["item"] is None and rej["by"] == "bea" and rej["note"] == "too easy"
    for r in rows:
        for k in ("id", "run_id", "session_id"):
            assert r[k] is None or type(r[k]) is int, (k, r[k])


def test_csv_export_writes_ids_without_a_decimal_point(demo_db, tmp_path):
    frame, flags, *_ = _decide_some(demo_db)
    out = export.write_frame(frame, tmp_path / "decisions.csv")
    with out.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        for k in ("id", "run_id", "session_id"):
            assert "." not in r[k], (k, r[k])
    assert {r["by"] for r in rows} == {"bea", "ann"}
