"""BenchFill through the store against the real local OpenAI-compatible server: sessions, the review queue,
accept/reject with notes and the audit log, coverage recomputed after an accept, faults kept in the log."""

from __future__ import annotations

import numpy as np
import pytest

from benchloupe.engine.benchfill import BenchFillConfig
from benchloupe.engine.common import EngineError
from benchloupe.jobs import fill
from benchloupe.store import curation, read, runs
from benchloupe.store import fill as fillstore
from benchloupe.store.db import connect
from tests.fake_llm import fake_llm  # noqa: F401
from tests.fill_world import configure_endpoints, store_world

SHORT = BenchFillConfig(max_rounds=2)


def test_session_queue_accept_reject_and_coverage(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db = tmp_path / "f.db"
    bench = store_world(fake_llm, db)
    configure_endpoints(fake_llm, db, monkeypatch)
    sid = fill.start_fill(db, bench, fill.FillOptions(gap=1), config=SHORT)
    summary = fill.session_summary(db, sid)
    assert summary["state"] in ("proposed", "no_valid_child"), summary
    assert summary["children"] > 0 and summary["annotations"] > 0 and summary["llm_calls"] > 0
    conn = connect(db)
    queue = fillstore.candidates(conn, sid, state="pending")
    assert len(queue) >= 2
    assert (np.diff(queue["distance"].to_numpy()) >= 0).all()  # nearest the target first
    calls = fillstore.llm_calls(conn, sid)
    assert not calls["prompt"].str.contains("test-key-123").any() and not calls["response"].str.contains(
        "test-key-123").any()
    n_items = len(read.items(conn, bench))
    conn.close()
    best, worst = int(queue["id"].iloc[0]), int(queue["id"].iloc[-1])
    item_id = fill.decide_candidate(db, best, "accept", "fills the gap nicely")
    fill.decide_candidate(db, worst, "reject", "too close to its parent")
    conn = connect(db)
    its = read.items(conn, bench)
    assert len(its) == n_items + 1
    new = its[its["id"] == item_id].iloc[0]
    assert new["origin"] == "benchfill"
    assert queue["parent_item_id"].notna().all()  # every lineage is traced to a benchmark item
    assert new["parent_id"] == queue["parent_item_id"].iloc[0]
    cov = runs.get_run(conn, runs.latest_run(conn, read.benchmark_id(conn, bench), ("coverage",)))
    assert cov["metrics"]["n_benchfill_items"] == 1
    log = curation.audit_log(conn)
    assert {"fill:accept", "fill:reject"} <= set(log["action"])
    assert "too close to its parent" in set(log["note"])
    states = fillstore.candidates(conn, sid, reviewable_only=False).set_index("id")["review_state"]
    assert states[best] == "accepted" and states[worst] == "rejected"
    try:
        fill.decide_candidate(db, best, "reject")
        raise AssertionError("a second decision must be refused")
    except Exception as exc:  # noqa: BLE001
        assert "already accepted" in str(exc)
    assert fill.session_summary(db, sid)["table2"]["reduction_pct"] > 0


def test_missing_endpoints_are_one_clear_line(tmp_path, fake_llm):  # noqa: F811
    db = tmp_path / "f.db"
    bench = store_world(fake_llm, db)
    try:
        fill.start_fill(db, bench)
        raise AssertionError("expected an error")
    except EngineError as exc:
        assert "no rewriter endpoint configured" in str(exc) and "\n" not in str(exc)
    conn = connect(db)
    assert fillstore.sessions(conn).empty


def test_wrong_key_fails_the_session_keeps_state_and_inserts_nothing(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db = tmp_path / "f.db"
    bench = store_world(fake_llm, db)
    configure_endpoints(fake_llm, db, monkeypatch)
    monkeypatch.setenv("FAKE_LLM_KEY", "wrong-key")
    with pytest.raises(fill.FillStopped, match="failed: .*rejected the API key") as stopped:
        fill.start_fill(db, bench, config=SHORT)
    assert "finished" not in str(stopped.value) and "\n" not in str(stopped.value)
    sid = stopped.value.session_id
    s = fill.session_summary(db, sid)
    assert s["state"] == "failed" and "key" in s["message"].lower()
    assert any(e["level"] == "error" for e in s["events"])
    conn = connect(db)
    assert (read.items(conn, bench)["origin"] == "original").all()
