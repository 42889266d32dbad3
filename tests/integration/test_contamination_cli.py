"""``benchloupe contamination``: dates from an item-metadata file, cutoffs from a models file, a simulated window
found and flagged, nothing without dates (issue 14, beyond the paper)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchloupe.cli.main import main
from benchloupe.store import curation, runs
from benchloupe.store.db import connect


def _files(d, contaminate: bool):
    rng = np.random.default_rng(4)
    n_models, n_items = 16, 240
    theta, b = np.sort(rng.normal(size=n_models)), rng.normal(size=n_items)
    p = 1 / (1 + np.exp(-1.3 * (theta[:, None] - b)))
    y = (rng.random(p.shape) < p).astype(int)
    days = pd.to_datetime("2022-01-01") + pd.to_timedelta(rng.integers(0, 900, n_items), unit="D")
    cut = pd.to_datetime("2022-07-01") + pd.to_timedelta(rng.integers(0, 300, n_models), unit="D")
    if contaminate:
        pre = days <= cut[1]
        y[1, pre & (y[1] == 0) & (rng.random(n_items) < 0.5)] = 1
    names = [f"lab/m{i}" for i in range(n_models)]
    pd.DataFrame([{"model": names[i], "item": f"q{q}", "correct": y[i, q]} for i in range(n_models)
                  for q in range(n_items)]).to_csv(d / "res.csv", index=False)
    pd.DataFrame({"key": [f"q{q}" for q in range(n_items)], "date": days.strftime("%Y-%m-%d")}).to_csv(
        d / "items.csv", index=False)
    pd.DataFrame({"name": names, "cutoff": cut.strftime("%Y-%m-%d")}).to_csv(d / "models.csv", index=False)


def _import(d, db, dates=True):
    assert main(["import", "long", str(d / "res.csv"), "--db", str(db), "--benchmark", "b",
                 "--models-file", str(d / "models.csv")]) == 0
    if dates:
        assert main(["import", "items", str(d / "items.csv"), "--db", str(db), "--benchmark", "b"]) == 0


def test_a_window_is_flagged_with_its_plot_data(tmp_path, capsys):
    _files(tmp_path, contaminate=True)
    db = tmp_path / "w.db"
    _import(tmp_path, db)
    capsys.readouterr()
    assert main(["contamination", "b", "--db", str(db), "--n-boot", "300", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    m = out["metrics"]
    assert m["models_tested"] == 16 and m["dated_items"] == 240
    # which refits it made (issue 26): the fit and one warm leave-one-model-out refit per tested model
    assert m["refits"]["fits"] == 1 + m["leave_one_out_refits"] == 17 and "warm" in m["refits"]["start"]
    flagged = [w for w in out["windows"] if w["flagged"]]
    assert [w["model"] for w in flagged] == ["lab/m1"]
    assert flagged[0]["shift"] > 0 and flagged[0]["p_perm"] < 0.01 and flagged[0]["shift_loo"] > 0
    conn = connect(db)
    try:
        fl = curation.flags(conn, run_id=out["run_id"], kind="anomaly")
        cells = runs.load_artifact(conn, out["run_id"], "window_residuals")
    finally:
        conn.close()
    assert len(fl) == 1
    payload = fl.iloc[0]["payload"]
    assert payload["source"] == "contamination_window" and payload["plot_artifact"] == "window_residuals"
    assert len(payload["series"]["day"]) == len(payload["series"]["mean_residual"]) > 5
    assert {"model_id", "item_id", "item_day", "residual", "residual_loo", "pre_cutoff"} <= set(cells.columns)
    # the human-readable face prints the per-model table
    assert main(["contamination", "b", "--db", str(db), "--n-boot", "200", "--refit-without", "no"]) == 0
    assert "Per-model window tests" in capsys.readouterr().out


def test_no_window_without_contamination(tmp_path, capsys):
    _files(tmp_path, contaminate=False)
    db = tmp_path / "w.db"
    _import(tmp_path, db)
    capsys.readouterr()
    assert main(["contamination", "b", "--db", str(db), "--n-boot", "200", "--refit-without", "no", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metrics"]["models_flagged"] == 0


def test_missing_dates_is_one_clear_line_and_no_run(tmp_path, capsys):
    _files(tmp_path, contaminate=False)
    db = tmp_path / "w.db"
    _import(tmp_path, db, dates=False)
    capsys.readouterr()
    assert main(["contamination", "b", "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert "date" in err and "item-metadata" in err and "Traceback" not in err
    conn = connect(db)
    try:
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    finally:
        conn.close()


@pytest.mark.parametrize("bad", ["--alpha=-1"])
def test_bad_option(tmp_path, bad, capsys):
    _files(tmp_path, contaminate=False)
    db = tmp_path / "w.db"
    _import(tmp_path, db)
    assert main(["contamination", "b", "--db", str(db), bad]) == 1
