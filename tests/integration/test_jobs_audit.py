"""The near-tie audit through the jobs bridge and the CLI: stored tables, reversal flags with driving items,
the report, determinism of the stored results, and bad input that leaves nothing behind."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from benchloupe import jobs
from benchloupe.cli.main import main
from benchloupe.engine.common import EngineError
from benchloupe.engine.neartie import AuditConfig
from benchloupe.jobs.audit import resolve_groups
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
    arts = [(n, re.sub(rf"(run #|--run ){rid}\b", r"\1N", d) if isinstance(d, str) else d) for n, d in arts]
    return [tuple(r) for r in items], [tuple(r) for r in models], arts, [tuple(r) for r in flags]


def test_audit_run_flags_report_and_determinism(demo_db, tmp_path):
    rid = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem", report=tmp_path / "r.md")
    conn = connect(demo_db)
    m = runs.get_run(conn, rid)["metrics"]
    assert m["status"] and m["k_discovery"] >= 1 and "table1" in m
    flags = curation.flags(conn, run_id=rid, kind="reversal")
    assert len(flags) == m["eligible_pairs"]
    assert flags["score"].is_monotonic_decreasing  # reversed pairs come first
    rev = flags[flags["score"] == 1.0]
    for payload in flags["payload"]:  # per-pair robustness under the matched-random recompositions
        assert 0.0 <= payload["random_reversal_fraction"] <= 1.0 and 0.0 <= payload["random_tie_fraction"] <= 1.0
    for payload in rev["payload"]:
        assert payload["reversed"] and payload["top_items"]
        assert payload["owner_a"] != payload["owner_b"] and payload["family_a"] != payload["family_b"]
    report = (tmp_path / "r.md").read_text()
    assert "Reversed near-tie pairs" in report and "demo-chem" in report
    rid2 = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem")
    assert _stored(conn, rid) == _stored(conn, rid2)


def test_audit_bad_input_names_the_shortfall_and_the_option_and_leaves_no_run(demo_db):
    conn = connect(demo_db)
    before = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    with pytest.raises(EngineError, match="short of the minimum 26.*--drop-small-families"):
        jobs.ANALYSES["neartie"].run(demo_db, "demo-chem", AuditConfig(min_family_models=26))
    assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == before


def test_drop_small_families_leaves_them_out(demo_db):
    rid = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem", AuditConfig(min_family_models=26, drop_small_families=True))
    conn = connect(demo_db)
    pop = runs.load_artifact(conn, rid, "population")
    dropped = pop[pop["why"] == "family below minimum 26"]
    assert len(dropped) and not dropped["kept"].any()
    assert runs.get_run(conn, rid)["metrics"]["families"] < 5


def test_timings_cover_the_whole_job(demo_db):
    rid = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem")
    t = runs.get_run(connect(demo_db), rid)["timings"]
    assert {"audit_s", "tables_s", "store_s", "total_s"} <= set(t)
    assert t["total_s"] >= t["audit_s"] + t["tables_s"] + t["store_s"]


def test_the_run_records_when_the_power_iterations_ran_in_float32(demo_db, monkeypatch):
    """The stored compute provenance said float64 even when the randomized SVDs' power iterations ran in float32
    (above dif.F32_SVD_CELLS cells): it names the power iterations' dtype (float32 only when an audit half's
    items x models matrix, the largest SVD input, is at least that size)."""
    from benchloupe.engine import dif

    rid = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem")
    assert runs.get_run(connect(demo_db), rid)["metrics"]["compute"]["power_iterations"] == "float64"
    monkeypatch.setattr(dif, "F32_SVD_CELLS", 320 * 60)  # demo-chem: 320 items x 64-65 audit models per half
    rid = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem")
    assert runs.get_run(connect(demo_db), rid)["metrics"]["compute"]["power_iterations"] == "float32"


def test_family_source_is_an_option_and_the_report_names_it(demo_db):
    conn = connect(demo_db)
    # a stored label that disagrees with the name rules, and stored architectures
    ids = [r[0] for r in conn.execute("SELECT m.id FROM models m JOIN benchmark_models bm ON bm.model_id = m.id "
                                      "JOIN benchmarks b ON b.id = bm.benchmark_id WHERE b.name = 'demo-chem' "
                                      "AND m.family = 'phi'")]
    with conn:
        conn.executemany("UPDATE models SET family = 'gemma', metadata = '{\"arch\": \"GemmaForCausalLM\"}' "
                         "WHERE id = ?", [(i,) for i in ids])
        conn.execute("UPDATE models SET metadata = '{\"arch\": \"LlamaForCausalLM\"}' WHERE family = 'llama'")
    by_name = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem")
    by_column = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem", AuditConfig(family_from="column"))
    by_arch = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem", AuditConfig(family_from="arch"))
    fam = {rid: set(runs.load_artifact(conn, rid, "population").query("kept")["family"])
           for rid in (by_name, by_column, by_arch)}
    assert fam[by_name] == {"gemma", "llama", "mistral", "phi", "qwen"}
    assert fam[by_column] == {"gemma", "llama", "mistral", "qwen"}
    assert fam[by_arch] == {"gemma", "llama"}
    assert "(family source column)" in runs.load_artifact(conn, by_column, "report")
    assert "model-name rules" in runs.load_artifact(conn, by_name, "report")


def test_item_groups_from_subject_index_ids():
    items = pd.DataFrame({"key": ["algebra.0", "algebra.1", "anatomy.0", "anatomy.12"], "group": [None] * 4})
    groups, source = resolve_groups(items)
    assert groups == ["algebra", "algebra", "anatomy", "anatomy"] and "<subject>.<index>" in source
    assert resolve_groups(items.assign(group=["g", "g", "h", "h"]))[0] == ["g", "g", "h", "h"]
    assert resolve_groups(items.assign(key=["q1", "q2", "q3", "q4"]))[0] == ["all"] * 4


def test_audit_cli_as_a_new_user_types_it(demo_db, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BENCHLOUPE_DB", str(demo_db))
    assert main(["audit", "neartie", "demo-chem"]) == 0
    out = capsys.readouterr().out
    assert "report stored with run" in out
    assert not list(tmp_path.glob("*.md"))  # nothing written unasked
    assert main(["audit", "neartie", "demo-chem", "--json", "--report", str(tmp_path / "r.md")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["table1"]) >= {"rate", "random_median", "excess_pp", "p", "status", "tau_b"}
    assert out["report"] == str(tmp_path / "r.md") and (tmp_path / "r.md").read_text().startswith("# Family-DIF")


def test_audit_cli_bad_report_path_fails_before_the_run_is_stored(demo_db, capsys):
    conn = connect(demo_db)
    before = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert main(["audit", "neartie", "demo-chem", "--db", str(demo_db), "--report", "/no/such/dir/r.md"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "/no/such/dir" in err[0] and "does not exist" in err[0]
    assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == before


def test_full_protocol_is_stored_with_the_run(demo_db):
    cfg = AuditConfig(protocol="full", controls=99, bootstrap=50, dimensions=(1, 2, 4), split_seeds=2)
    rid = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem", cfg)
    conn = connect(demo_db)
    names = set(runs.artifact_names(conn, rid))
    assert {"protocol_table2_replication", "protocol_table5_matched_controls", "protocol_table9_population_robustness",
            "protocol_table10_family_shifts", "protocol_table4_direct_mirt", "secondary_composition bootstrap",
            "split_seeds", "split_edges"} <= names
    m = runs.get_run(conn, rid)["metrics"]
    assert 0 <= m["protocol"]["table2_replication"]["p_overlap"] <= 1
    report = runs.load_artifact(conn, rid, "report")
    assert "## Table 9:" in report and "## Table 5:" in report


def test_cli_gap_curve_takes_percentage_points(demo_db, capsys):
    """Cousin of the report defect: --gap-curve 1 is the primary 1 pp band (the CLI used to divide by 100
    and the engine again, so '1' meant 0.01 pp)."""
    assert main(["audit", "neartie", "demo-chem", "--db", str(demo_db), "--json", "--gap-curve", "1,2"]) == 0
    rid = json.loads(capsys.readouterr().out)["run_id"]
    conn = connect(demo_db)
    curve = runs.load_artifact(conn, rid, "secondary_gap-threshold curve")
    m = runs.get_run(conn, rid)["metrics"]
    assert curve["gap_pp"].tolist() == [1.0, 2.0]
    assert curve["pairs"].iloc[0] == m["eligible_pairs"] and curve["pairs"].iloc[1] >= m["eligible_pairs"]


def test_cli_report_in_a_read_only_folder_fails_first(demo_db, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        import os

        if os.access(ro, os.W_OK):  # root ignores the mode bits
            pytest.skip("running as root: a read-only folder is still writable")
        assert main(["audit", "neartie", "demo-chem", "--db", str(demo_db), "--report", str(ro / "r.md")]) == 1
        assert "not writable" in capsys.readouterr().err
    finally:
        ro.chmod(0o700)


def test_exact_common_model_check_against_another_benchmark(demo_db):
    left = jobs.ANALYSES["neartie"].run(demo_db, "demo-math", AuditConfig(min_family_models=6))
    rid = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem", compare="demo-math")
    conn = connect(demo_db)
    table = runs.load_artifact(conn, rid, "protocol_table10_exact_common")
    reps_left = runs.load_artifact(conn, left, "population").query("representative")["model_id"]
    reps_right = runs.load_artifact(conn, rid, "population").query("representative")["model_id"]
    assert 0 < table["n"].sum() <= len(set(reps_left) & set(reps_right))
    assert (table["ci_lo"] <= table["diff_pp"]).all() and (table["diff_pp"] <= table["ci_hi"]).all()
    np.testing.assert_allclose(table["diff_pp"], table["right_pp"] - table["left_pp"], atol=1e-9)
    assert "## Table 10 (exact-common models): demo-math / demo-chem" in runs.load_artifact(conn, rid, "report")
    with pytest.raises(EngineError, match="no finished near-tie run"):
        jobs.ANALYSES["neartie"].run(demo_db, "demo-chem", compare="demo-arena")
