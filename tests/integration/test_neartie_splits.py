"""Issue 22 through the jobs bridge and the CLI: the owner split's knife edges and the split-stability reruns in
the report, the JSON, the run details and the stored artifacts; ``--report -`` is standard output."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchloupe.cli.main import main
from benchloupe.engine.neartie import AuditConfig, run_audit, run_primary
from benchloupe.store import runs
from benchloupe.store.db import connect
from tests.unit.test_neartie import simulate

FAST = ["--controls", "49", "--k-grid", "1,2,4"]


def _run_count(db) -> int:
    conn = connect(db)
    try:
        return conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        conn.close()


def test_split_seeds_default_follows_the_protocol():
    assert AuditConfig().resolved_split_seeds == 0
    assert AuditConfig(protocol="full").resolved_split_seeds == 20
    assert AuditConfig(protocol="full", split_seeds=0).resolved_split_seeds == 0
    assert AuditConfig(split_seeds=3).resolved_split_seeds == 3
    with pytest.raises(ValueError, match="split_seeds must be 0 or more, not -1"):
        AuditConfig(split_seeds=-1)


def test_each_split_is_the_primary_audit_under_the_next_population_seed():
    y, ids, fams, owners, groups = simulate(n_owners=70, n_items=120, seed=4)
    cfg = AuditConfig(dimensions=(1, 2, 4), controls=49, split_seeds=3)
    res = run_audit(y, ids, fams, owners, groups, cfg)
    table = res.tables["split_seeds"]
    assert table["family_seed"].tolist() == [cfg.family_seed + i for i in (1, 2, 3)]
    for row in table.records():
        if row["status"] == "not run":
            continue
        again = run_primary(y, ids, fams, owners, groups, AuditConfig(dimensions=(1, 2, 4), controls=49,
                                                                      family_seed=row["family_seed"]))
        assert {k: row[k] for k in ("eligible_pairs", "reversals", "p", "status")} == \
            {k: again.summary[k] for k in ("eligible_pairs", "reversals", "p", "status")}
    st = res.summary["split_stability"]
    assert st["splits"] == 3 and st["verdict"].startswith(("stable: ", "fragile: "))
    assert st["verdict"].split(": ")[1].startswith(f"{st['agree']} of 3 splits agree")
    ps = [p for p in table["p"] if p is not None]
    assert st["p_min"] == min(ps) and st["p_max"] == max(ps) and st["p_median"] == float(np.median(ps))
    assert "split_stability" not in run_audit(y, ids, fams, owners, groups, AuditConfig(dimensions=(1, 2, 4),
                                                                                      controls=49)).summary


def test_split_seeds_in_the_cli_json_report_run_details_and_artifacts(demo_db, capsys):
    assert main(["audit", "neartie", "demo-chem", "--db", str(demo_db), *FAST, "--split-seeds", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    st = out["summary"]["split_stability"]
    assert st["splits"] == 2 and out["split_verdict"].startswith(st["verdict"])
    assert {"split_decisions", "split_ties", "split_knife_edges"} <= set(out["summary"])
    conn = connect(demo_db)
    try:
        run = runs.get_run(conn, out["run_id"])
        assert run["metrics"]["split_verdict"] == out["split_verdict"]
        report = runs.load_artifact(conn, out["run_id"], "report")
        table = runs.load_table(conn, out["run_id"], "split_seeds")
        edges = runs.load_table(conn, out["run_id"], "split_edges")
    finally:
        conn.close()
    assert "## Split stability (beyond the paper)" in report and f"**{out['split_verdict']}.**" in report
    assert "## Owner split: knife-edge decisions" in report
    assert len(table) == 2 and len(edges) == out["summary"]["split_ties"] + out["summary"]["split_knife_edges"]
    assert main(["audit", "neartie", "demo-chem", "--db", str(demo_db), *FAST, "--split-seeds", "2"]) == 0
    text = capsys.readouterr().out
    assert "split stability: " in text and "owner split: " in text and "knife edges" in text


def test_split_seeds_below_zero_is_one_line_before_any_run(demo_db, capsys):
    before = _run_count(demo_db)
    assert main(["audit", "neartie", "demo-chem", "--db", str(demo_db), "--split-seeds", "-1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--split-seeds -1: must be a whole number from 0" in err[0]  # its stated range (issue 24)
    assert _run_count(demo_db) == before


def test_report_dash_is_standard_output(demo_db, tmp_path, monkeypatch, capsys):
    """It used to write a file named "-" in the current folder."""
    monkeypatch.chdir(tmp_path)
    assert main(["audit", "neartie", "demo-chem", "--db", str(demo_db), *FAST, "--report", "-"]) == 0
    captured = capsys.readouterr()
    assert not (tmp_path / "-").exists()
    assert captured.out.startswith("# Family-DIF near-tie audit: demo-chem (run #")
    assert "## Table 1" in captured.out and "(Table 1 row)" not in captured.out
    assert "report written to standard output" in captured.err and "(Table 1 row)" in captured.err


def test_report_dash_with_json_is_refused_before_any_run(demo_db, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = _run_count(demo_db)
    assert main(["audit", "neartie", "demo-chem", "--db", str(demo_db), "--report", "-", "--json"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "both write to standard output" in err[0]
    assert _run_count(demo_db) == before and not (tmp_path / "-").exists()


def test_robustness_report_dash_is_standard_output(demo_db, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    full = ["--protocol", "full", "--controls", "49", "--bootstrap", "10", "--k-grid", "1,2,4", "--split-seeds", "0"]
    assert main(["audit", "neartie", "demo-chem", "--db", str(demo_db), *full]) == 0
    capsys.readouterr()
    assert main(["audit", "robustness", "demo-chem", "--db", str(demo_db), "--need", "1", "--report", "-"]) == 0
    captured = capsys.readouterr()
    assert not (tmp_path / "-").exists()
    assert captured.out.lstrip().startswith("#") and "Table 9" in captured.out
    assert "population robustness across benchmarks" in captured.err
    assert main(["audit", "robustness", "demo-chem", "--db", str(demo_db), "--split-seeds", "3"]) == 1
    assert "--split-seeds applies to `audit neartie`" in capsys.readouterr().err
