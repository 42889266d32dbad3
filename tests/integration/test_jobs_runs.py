"""Runs through the jobs bridge on the demo workspace: stored outputs, provenance, flags, failures."""

from __future__ import annotations

import json

import pytest

from benchloupe import jobs
from benchloupe.cli.main import main
from benchloupe.engine.common import EngineError
from benchloupe.engine.joint import JointConfig
from benchloupe.jobs.coverage import CalibrateConfig, CoverageConfig
from benchloupe.store import curation, read, runs
from benchloupe.store.db import StoreError, connect


def test_static_fit_stores_abilities_items_and_truth_recovery(demo_db):
    rid = jobs.ANALYSES["static"].run(demo_db, "demo-math", JointConfig(mode="static"), heldout=False)
    conn = connect(demo_db)
    run = runs.get_run(conn, rid)
    assert run["status"] == "done" and run["code_version"] and run["input_fingerprint"]
    assert run["metrics"]["truth_spearman_theta"] > 0.9 and run["metrics"]["truth_spearman_b"] > 0.85
    rm = runs.run_models(conn, rid)
    assert len(rm) == 40 and sorted(rm["rank"]) == list(range(1, 41))
    ri = runs.run_items(conn, rid)
    assert len(ri) == 240 and ri["sharpness"].gt(0).all()


def test_static_fit_heldout_splits_default_to_one_and_three_on_request(demo_db, capsys):
    """A static fit's held-out ECE takes one split by default (issue 26) and says so; ``--heldout-splits 3`` is the
    paper's Appendix E, the mean of the three single-split ECEs (seeds 0, 1, 2)."""
    one = [runs.get_run(connect(demo_db), jobs.ANALYSES["static"].run(
        demo_db, "demo-math", JointConfig(mode="static"), seed=s))["metrics"] for s in (0, 1, 2)]
    assert [(m["heldout_splits"], m["heldout_seeds"]) for m in one] == [(1, [0]), (1, [1]), (1, [2])]
    assert main(["fit", "static", "demo-math", "--db", str(demo_db), "--json", "--heldout-splits", "3"]) == 0
    three = json.loads(capsys.readouterr().out)["metrics"]
    assert (three["heldout_splits"], three["heldout_seeds"]) == (3, [0, 1, 2])
    assert three["static_ece"] == pytest.approx(sum(m["static_ece"] for m in one) / 3, rel=1e-12)
    assert main(["fit", "static", "demo-math", "--db", str(demo_db), "--heldout-splits", "0"]) != 0
    assert "--heldout-splits" in capsys.readouterr().err
    with pytest.raises(EngineError, match="1 to 20 splits"):
        jobs.ANALYSES["static"].run(demo_db, "demo-math", JointConfig(mode="static"), heldout_splits=21)


def test_joint_fit_cli_json_reports_truth(demo_db, capsys):
    assert main(["fit", "joint", "demo-chem", "--arena", "demo-arena", "--db", str(demo_db), "--json",
                 "--no-heldout"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"truth_spearman_theta", "truth_spearman_b", "gamma", "decisive_pairs"} <= set(out["metrics"])
    conn = connect(demo_db)
    roles = {r[0] for r in conn.execute("SELECT role FROM run_inputs WHERE run_id = ?", (out["run_id"],))}
    assert roles == {"static", "arena"}
    pairs = runs.load_artifact(conn, out["run_id"], "pairs")
    assert set(pairs) >= {"i", "j", "prompt", "tie", "both_bad"} and len(pairs["i"]) == out["metrics"]["pairs"]


def test_joint_without_arena_is_a_clear_error_and_a_failed_run_is_not_left(demo_db):
    with pytest.raises(EngineError, match="needs static results and arena rewards"):
        jobs.ANALYSES["joint"].run(demo_db, "demo-math")
    conn = connect(demo_db)
    assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_arena_baselines(demo_db):
    for kind in ("bt", "avg-reward"):
        rid = jobs.ANALYSES[kind].run(demo_db, "demo-arena")
        conn = connect(demo_db)
        assert runs.get_run(conn, rid)["metrics"]["truth_spearman_theta"] > 0.5
        # the adversarial model games the judge: the arena-only baselines rank it near the top
        rm = runs.run_models(conn, rid)
        assert rm.loc[rm["name"] == "gaming-lab/NullModel-constant", "rank"].iloc[0] <= 3


def test_coverage_finds_the_demo_gap_and_flags_it(demo_db):
    rid = jobs.ANALYSES["coverage"].run(demo_db, "demo-math", CoverageConfig(n_draws=200))
    conn = connect(demo_db)
    run = runs.get_run(conn, rid)
    m = run["metrics"]
    assert m["diagnostics_passed"] and 0 < m["ddm"] < 0.5 and m["max_gap"] > 2 * m["uniform_baseline_max_gap"]
    gaps = curation.flags(conn, run_id=rid, kind="gap")
    assert len(gaps) == 5 and gaps["payload"].iloc[0]["rank"] == 1
    # the largest gap sits where the simulation removed items (true b in 0.0 .. 2.0)
    ri = runs.run_items(conn, rid)
    truth = read.truth(conn, "demo-math", "item").query("name == 'b'").set_index("key")["value"]
    lo, hi = gaps["payload"].iloc[0]["lo"], gaps["payload"].iloc[0]["hi"]
    below = ri[ri["z"] <= lo + 1e-12]["key"].map(truth)
    above = ri[ri["z"] >= hi - 1e-12]["key"].map(truth)
    assert below.max() < 0.5 and above.min() > 1.5


def test_coverage_per_group_and_calibration_export(demo_db):
    rid = jobs.ANALYSES["coverage"].run(demo_db, "demo-math", CoverageConfig(group="algebra", uncertainty="none"))
    conn = connect(demo_db)
    assert runs.get_run(conn, rid)["metrics"]["n_items"] == 60
    with pytest.raises(EngineError, match="no item group 'nope'"):
        jobs.ANALYSES["coverage"].run(demo_db, "demo-math", CoverageConfig(group="nope"))
    jobs.ANALYSES["coverage"].run(demo_db, "demo-math", CoverageConfig(uncertainty="none"))
    cid = jobs.ANALYSES["calibrate"].run(demo_db, "demo-math", CalibrateConfig(k=80), name="math-uniform")
    m = runs.get_run(conn, cid)["metrics"]
    assert m["w1_after"] < m["w1_before"]
    sub = read.load_static(conn, "math-uniform")
    assert sub.shape == (40, 80) and (sub.items["origin"] == "derived").all()
    with pytest.raises((StoreError, ValueError), match="already exists"):
        jobs.ANALYSES["calibrate"].run(demo_db, "demo-math", CalibrateConfig(k=80), name="math-uniform")


def test_cancelled_run_is_marked(demo_db):
    import threading

    ev = threading.Event()
    ev.set()
    from benchloupe.engine.common import Cancelled

    with pytest.raises(Cancelled):
        jobs.ANALYSES["coverage"].run(demo_db, "demo-math", CoverageConfig(), cancel=ev)
    conn = connect(demo_db)
    assert conn.execute("SELECT status FROM runs ORDER BY id DESC").fetchone()[0] == "cancelled"
