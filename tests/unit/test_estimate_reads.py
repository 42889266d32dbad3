"""``estimate`` reads only what it uses (issue 34, speed): the packed rows, every model's count of answered
calibrated items, then the matrix of the models to estimate and of a seeded 1,000 of the fully answered ones, and
the calibration's item parameters and abilities without the run's frames.  Its stored estimates are, bit for bit,
the ones of the whole-matrix reading it replaced (written out below as the oracle: the whole matrix as floats, the
run's item and model frames), on 0/1 results with chance levels, more fully answered models than the reference
sample and an item retired since the calibration, and on success/trial counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from benchloupe import jobs
from benchloupe.engine import estimate as est
from benchloupe.engine.joint import JointConfig
from benchloupe.jobs import estimate as job
from benchloupe.store import curation, read, runs
from benchloupe.store.db import connect
from benchloupe.store.importers.base import ParsedImport
from benchloupe.store.writer import write_import


def _workspace(db, *, n_full: int, n_part: int, n_items: int, binomial: bool, seed: int = 34) -> None:
    """Fully answered models, then partly evaluated ones that never answered item q0 (retired after the fit)."""
    rng = np.random.default_rng(seed)
    n = n_full + n_part
    a, b, th = np.exp(rng.normal(0.2, 0.3, n_items)), rng.normal(0, 1, n_items), rng.normal(0, 1, n)
    c = np.where(np.arange(n_items) % 3 == 0, 0.25, 0.0)
    p = c + (1 - c) * expit(a * (th[:, None] - b))
    seen = np.ones((n, n_items), bool)
    for i in range(n_full, n):
        seen[i] = False
        seen[i, 1 + rng.choice(n_items - 1, int(rng.integers(3, n_items // 2)), replace=False)] = True
    items = pd.DataFrame({"key": [f"q{j}" for j in range(n_items)], "chance": c})
    models = pd.DataFrame({"name": [f"lab/m{i}" for i in range(n)]})
    if binomial:
        trials = np.where(seen, 1 + np.arange(n_items) % 3, 0).astype(np.int32)
        parsed = ParsedImport("b", "static", items, models, successes=rng.binomial(trials, p).astype(np.int32),
                              trials=trials, source="test")
    else:
        parsed = ParsedImport("b", "static", items, models,
                              correct=np.where(seen, rng.random((n, n_items)) < p, -1).astype(np.int8), source="test")
    conn = connect(db)
    try:
        write_import(conn, parsed, fmt="test")
    finally:
        conn.close()
    jobs.ANALYSES["static"].run(db, "b", JointConfig(mode="static"), heldout=False)
    conn = connect(db)
    try:
        its = read.items(conn, "b", with_text=False)
        curation.set_item_status(conn, int(its.loc[its["key"] == "q0", "id"].iat[0]), "retired", "test")
    finally:
        conn.close()


def _whole_matrix_estimate(conn, rid: int) -> pd.DataFrame:
    """The reading before: the whole matrix with retired items, the run's item and model frames, every row as
    floats; the same engine calls."""
    sm = read.load_static(conn, "b", include_retired=True)
    run = runs.get_run(conn, rid)
    ri = runs.run_items(conn, rid)
    if "source" in ri:
        ri = ri[ri["source"].fillna("static") == "static"]
    params = ri.dropna(subset=["difficulty", "sharpness"]).set_index("item_id")
    cols = np.flatnonzero(np.isin(sm.items["id"], params.index) & (sm.items["status"] == "active").to_numpy())
    items = sm.items.iloc[cols].reset_index(drop=True)
    p = params.reindex(items["id"])
    cal = est.calibration(p["sharpness"].to_numpy(float), p["difficulty"].to_numpy(float),
                          job._chance(run, items), runs.run_models(conn, rid)["theta"].to_numpy(float))
    mask = sm.mask[:, cols]
    k = mask.sum(axis=1)
    targets = np.flatnonzero((k > 0) & (k < len(cols)))
    reference = np.flatnonzero(mask.all(axis=1))
    if len(reference) > job.REFERENCE_MODELS:
        reference = np.sort(np.random.default_rng(0).choice(reference, job.REFERENCE_MODELS, replace=False))
    y = (sm.correct if sm.trials is None else sm.successes)[:, cols].astype(float)
    trials = None if sm.trials is None else sm.trials[:, cols]
    yr = y[reference] if trials is None else y[reference] / trials[reference]
    cal.tau2 = est.misfit_variance(cal, yr, mask[reference])
    scale = 1.0 if trials is not None else est.interval_scale(cal, yr, mask[reference], mask[targets])
    e = est.estimate(cal, y[targets], mask[targets], trials=None if trials is None else trials[targets], scale=scale)
    return pd.DataFrame({"model_id": sm.models["id"].to_numpy()[targets], "theta": e.theta, "se": e.theta_sd,
                         "estimate": e.accuracy, "estimate_lo": e.lo, "estimate_hi": e.hi, "estimate_sd": e.sd,
                         "seen": e.k, "observed": e.observed})


@pytest.mark.parametrize("binomial, n_full", [(False, job.REFERENCE_MODELS + 60), (True, 200)])
def test_the_estimates_are_those_of_the_whole_matrix(tmp_path, binomial, n_full):
    db = tmp_path / "w.db"
    _workspace(db, n_full=n_full, n_part=25, n_items=40, binomial=binomial)
    rid = job.run_estimate(db, "b")
    conn = connect(db)
    try:
        calibration = runs.latest_run(conn, read.benchmark_id(conn, "b"), job.CALIBRATION_KINDS)
        before = _whole_matrix_estimate(conn, calibration)
        stored = runs.run_models(conn, rid).set_index("model_id").loc[before["model_id"]].reset_index()
        metrics = runs.get_run(conn, rid)["metrics"]
    finally:
        conn.close()
    assert len(before) == 25 and metrics["n_items"] == 39  # q0 retired: a column gathered, not the whole matrix
    assert metrics["reference_models"] == min(n_full, job.REFERENCE_MODELS)
    for col in before.columns:
        np.testing.assert_array_equal(stored[col].to_numpy(float), before[col].to_numpy(float), err_msg=col)
