"""DualEval diagnostics through the jobs bridge on the demo workspace, checked against its stored truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchloupe import jobs
from benchloupe.engine.common import EngineError
from benchloupe.engine.joint import JointConfig
from benchloupe.jobs.diagnostics import AnomalyConfig, BootstrapConfig, CompressConfig, ScreenConfig
from benchloupe.store import curation, read, runs
from benchloupe.store.db import connect
from benchloupe.store.importers.base import ParsedImport
from benchloupe.store.writer import write_import


def test_anomaly_flags_are_stored_as_the_record_by_record_writer_stored_them(demo_db):
    """The anomaly flags of a seeded workspace, written column-wise with their payload text built a column at a
    time (issue 26), are the rows the earlier writer stored: the same fit and candidates, each flag's payload dict
    (as ``_anomaly_flags`` built it) through ``_json``, ids and score as they were."""
    from benchloupe.engine import anomaly
    from benchloupe.jobs import diagnostics
    from benchloupe.jobs.data import auto_mode, load_joint, resolve_chance

    for bench in ("demo-math", "demo-chem"):
        rid = jobs.ANALYSES["anomalies"].run(demo_db, bench, AnomalyConfig())
        conn = connect(demo_db)
        inputs = load_joint(conn, bench)
        mode = auto_mode(inputs, "auto")
        inputs, _, _ = resolve_chance(inputs, "stated")
        cfg, res = diagnostics._fit(inputs, mode, lambda *a: None, None)
        static = inputs.static if cfg.uses_static else None
        cands = anomaly.anomaly_candidates(res, static, inputs.arena if cfg.uses_arena else None, threshold=3.5)
        bid = read.benchmark_id(conn, bench)
        want = []
        for c in cands.itertuples(index=False):
            items, bb, aa = ((inputs.static_items, res.b_static, res.a_static) if c.source == "static"
                             else (inputs.arena_items, res.b_arena, res.a_arena))
            payload = {"source": c.source, "residual": float(c.residual), "expected_p": float(c.expected_p),
                       "observed": float(c.observed), "theta": float(res.theta[c.model_idx]),
                       "b": float(bb[c.item_idx]), "a": float(aa[c.item_idx]), "mode": mode}
            want.append(("anomaly", bid, int(items["id"].iloc[c.item_idx]),
                         int(inputs.models["id"].iloc[c.model_idx]), None, float(c.residual), runs._json(payload)))
        got = [tuple(r) for r in conn.execute("SELECT kind, benchmark_id, item_id, model_id, model_b_id, score,"
                                              " payload FROM flags WHERE run_id = ? ORDER BY id", (rid,))]
        conn.close()
        assert len(got) > 10 and got == want, bench


def test_anomalies_find_the_injected_cells(demo_db):
    rid = jobs.ANALYSES["anomalies"].run(demo_db, "demo-math", AnomalyConfig())
    conn = connect(demo_db)
    m = runs.get_run(conn, rid)["metrics"]
    # 10 injected successes of weak models on the hardest items; |r| ranks them above almost every clean cell
    assert m["truth_injected_cells"] == 10 and m["truth_auroc"] >= 0.99
    flags = curation.flags(conn, run_id=rid, kind="anomaly")
    assert len(flags) == m["candidates"] and (flags["score"].abs() > 3.5).all()
    p = flags["payload"].iloc[0]
    assert {"expected_p", "observed", "residual", "theta", "b"} <= set(p)


def test_contamination_protocol_clean_reference_detector(demo_db):
    rid = jobs.ANALYSES["anomalies"].run(demo_db, "demo-math", AnomalyConfig(protocol=True))
    conn = connect(demo_db)
    summ = runs.load_artifact(conn, rid, "contamination_summary")
    clean = summ[(summ["target"] == "static") & (summ["detector"] == "clean_reference")]
    assert sorted(clean["rate"]) == [0.005, 0.01, 0.02, 0.05]
    assert (clean["auroc"] >= 0.99).all(), clean


def test_compress_exports_top_fisher_subset_and_retires(demo_db):
    cfg = CompressConfig(seeds=1, recovery=False, strategy="top_fisher", export_fraction=0.25,
                         export_name="math-top25", retire_lowest=5)
    rid = jobs.ANALYSES["compress"].run(demo_db, "demo-math", cfg)
    conn = connect(demo_db)
    m = runs.get_run(conn, rid)["metrics"]
    assert m["exported_items"] == 60 and m["retired_items"] == 5
    ri = runs.run_items(conn, rid).sort_values("fisher", ascending=False)
    sub = read.items(conn, "math-top25")
    assert set(sub["key"]) == set(ri["key"].head(60))
    retired = read.items(conn, "demo-math").query("status == 'retired'")
    assert set(retired["key"]) == set(ri["key"].tail(5))
    assert (curation.audit_log(conn)["action"] == "item:retire").sum() == 5


def test_compress_exports_the_targeted_subset_by_default(demo_db):
    from benchloupe.engine import informativeness
    from benchloupe.jobs.data import load_joint

    cfg = CompressConfig(seeds=2, recovery=True, export_fraction=0.1, export_name="math-t10", target="top:10")
    assert cfg.strategy == "targeted"
    rid = jobs.ANALYSES["compress"].run(demo_db, "demo-math", cfg)
    conn = connect(demo_db)
    m = runs.get_run(conn, rid)["metrics"]
    assert m["exported_items"] == 24 and "targeted_10pct_spearman" in m and "random_10pct_spearman" in m
    summ = runs.load_artifact(conn, rid, "recovery_summary")
    assert {"spearman_lo", "spearman_hi"} <= set(summ.columns)
    inputs = load_joint(conn, "demo-math")
    cfgj = JointConfig(mode="static")
    res = jobs.diagnostics.joint.fit_joint(inputs.static, None, cfgj)
    keep = informativeness.select_subset(res, inputs.static, None, cfgj, "targeted", 0.1, target="top:10")
    assert set(read.items(conn, "math-t10")["key"]) == set(inputs.static_items["key"].iloc[keep])
    with pytest.raises(EngineError, match="strategy"):
        CompressConfig(strategy="nope")


def test_bootstrap_intervals(demo_db):
    rid = jobs.ANALYSES["bootstrap"].run(demo_db, "demo-math", BootstrapConfig(B=20))
    conn = connect(demo_db)
    rm = runs.run_models(conn, rid)
    assert rm["se"].gt(0).all() and (rm["lo"] <= rm["theta"]).all() and (rm["theta"] <= rm["hi"]).all()
    assert (rm["rank_lo"] <= rm["rank"]).all() and (rm["rank"] <= rm["rank_hi"]).all()


def test_screen_a_new_model_against_a_frozen_clean_fit(demo_db):
    clean = jobs.ANALYSES["static"].run(demo_db, "demo-math", JointConfig(mode="static"), heldout=False)
    conn = connect(demo_db)
    sm = read.load_static(conn, "demo-math")
    ri = runs.run_items(conn, clean).set_index("key")
    weakest = int(np.argmin(sm.correct.sum(1)))
    row = sm.correct[weakest].copy()
    hardest = ri["difficulty"].sort_values().index[-5:]
    cols = [int(np.flatnonzero(sm.items["key"] == k)[0]) for k in hardest]
    row[cols] = 1  # the newcomer "knows" the five hardest items
    write_import(conn, ParsedImport("demo-math", "static", sm.items[["key"]],
                                    pd.DataFrame({"name": ["newlab/Llama-3-8B-leaky"]}), correct=row[None, :]),
                 fmt="test")
    rid = jobs.ANALYSES["screen"].run(demo_db, "demo-math", ScreenConfig(model="newlab/Llama-3-8B-leaky"))
    flags = curation.flags(conn, run_id=rid, kind="anomaly")
    assert set(hardest) <= set(flags["item_key"])
    assert runs.get_run(conn, rid)["metrics"]["clean_run"] == clean
    with pytest.raises(EngineError, match="was part of clean run"):
        jobs.ANALYSES["screen"].run(demo_db, "demo-math", ScreenConfig(model=sm.models["name"].iloc[0]))
