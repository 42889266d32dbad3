"""Binomial cells and chance levels travel from the store into every DualEval job (issue 14)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchloupe.cli.main import main
from benchloupe.jobs.data import load_joint
from benchloupe.store.db import connect


@pytest.fixture
def db(tmp_path):
    rng = np.random.default_rng(2)
    theta, b = rng.normal(size=20), rng.normal(size=80)
    p = 0.25 + 0.75 / (1 + np.exp(-(theta[:, None] - b)))
    succ = rng.binomial(10, p)
    pd.DataFrame([{"model": f"m{i}", "item": f"q{q}", "successes": succ[i, q], "trials": 10}
                  for i in range(20) for q in range(80)]).to_csv(tmp_path / "r.csv", index=False)
    pd.DataFrame({"key": [f"q{q}" for q in range(80)], "chance": 0.25}).to_csv(tmp_path / "i.csv", index=False)
    path = tmp_path / "w.db"
    assert main(["import", "long", str(tmp_path / "r.csv"), "--db", str(path), "--benchmark", "b"]) == 0
    assert main(["import", "items", str(tmp_path / "i.csv"), "--db", str(path), "--benchmark", "b"]) == 0
    return path, succ


def test_load_joint_gives_successes_of_trials_and_chance(db):
    path, succ = db
    conn = connect(path)
    try:
        S = load_joint(conn, "b").static
    finally:
        conn.close()
    assert S.trials is not None and int(S.trials.max()) == 10
    np.testing.assert_array_equal(np.sort(S.correct.ravel()), np.sort(succ.ravel()))
    np.testing.assert_allclose(S.chance, 0.25)


def test_anomaly_protocol_shows_the_effect_of_guessing(db, capsys):
    path, _ = db
    capsys.readouterr()
    assert main(["anomalies", "b", "--db", str(path), "--protocol", "yes", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metrics"]["protocol_min_auroc_clean_reference_static"] > 0.5
    conn = connect(path)
    try:
        from benchloupe.store import runs

        summ = runs.load_artifact(conn, out["run_id"], "contamination_summary")
    finally:
        conn.close()
    assert set(summ["p_model"]) == {"guessing", "2pl"}
    assert {"item_auroc", "precision_at_k"} <= set(summ.columns)
