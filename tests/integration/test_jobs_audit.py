"""The near-tie audit through the jobs bridge and the CLI: stored tables, reversal flags with driving items,
the report, determinism of the stored results, and bad input that leaves nothing behind."""

from __future__ import annotations

import json

import pytest

from benchloupe import jobs
from benchloupe.cli.main import main
from benchloupe.engine.common import EngineError
from benchloupe.jobs.audit import demo_config
from benchloupe.store import curation, runs
from benchloupe.store.db import connect


def _stored(conn, rid):
    items = conn.execute("SELECT item_id, difficulty, dif_range, extra FROM run_items WHERE run_id = ? ORDER BY item_id",
                         (rid,)).fetchall()
    models = conn.execute("SELECT model_id, theta, extra FROM run_models WHERE run_id = ? ORDER BY model_id",
                          (rid,)).fetchall()
    arts = conn.execute("SELECT name, data FROM run_artifacts WHERE run_id = ? ORDER BY name", (rid,)).fetchall()
    flags = conn.execute("SELECT kind, model_id, model_b_id, score, payload FROM flags WHERE run_id = ? ORDER BY id",
                         (rid,)).fetchall()
    arts = [(n, d.replace(f"run #{rid}", "run #N") if isinstance(d, str) else d) for n, d in arts]
    return [tuple(r) for r in items], [tuple(r) for r in models], arts, [tuple(r) for r in flags]


def test_audit_run_flags_report_and_determinism(demo_db, tmp_path):
    rid = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem", demo_config(), report=tmp_path / "r.md")
    conn = connect(demo_db)
    m = runs.get_run(conn, rid)["metrics"]
    assert m["status"] and m["k_discovery"] >= 1 and "table1" in m
    flags = curation.flags(conn, run_id=rid, kind="reversal")
    assert len(flags) == m["eligible_pairs"]
    assert flags["score"].is_monotonic_decreasing  # reversed pairs come first
    rev = flags[flags["score"] == 1.0]
    for payload in rev["payload"]:
        assert payload["reversed"] and payload["top_items"]
        assert payload["owner_a"] != payload["owner_b"] and payload["family_a"] != payload["family_b"]
    report = (tmp_path / "r.md").read_text()
    assert "Reversed near-tie pairs" in report and "demo-chem" in report
    rid2 = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem", demo_config())
    assert _stored(conn, rid) == _stored(conn, rid2)


def test_audit_bad_input_names_the_shortfall_and_leaves_no_run(demo_db):
    conn = connect(demo_db)
    before = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    with pytest.raises(EngineError, match="short of the minimum 20"):
        jobs.ANALYSES["neartie"].run(demo_db, "demo-chem")
    assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == before


def test_audit_cli_prints_table1_and_writes_report(demo_db, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["audit", "neartie", "demo-chem", "--db", str(demo_db), "--min-family-models", "6", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["table1"]) >= {"rate", "random_median", "excess_pp", "p", "status", "tau_b"}
    assert (tmp_path / out["report"]).exists()
