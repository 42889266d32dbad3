"""Question-level cluster bootstrap (paper 000, Appendix D)."""

from __future__ import annotations

import numpy as np
import pytest

from benchloupe.engine.bootstrap import cluster_bootstrap
from benchloupe.engine.common import EngineError
from benchloupe.engine.joint import JointConfig, StaticData
from tests.unit._joint_sim import simulate


def test_bootstrap_reproducible_and_sensible():
    truth, S, A = simulate(10, 60, 40, seed=8)
    S = StaticData(S.correct, S.mask, item_source=np.repeat(["x", "y"], 30))
    r1 = cluster_bootstrap(S, A, JointConfig(), B=8, seed=3)
    r2 = cluster_bootstrap(S, A, JointConfig(), B=8, seed=3)
    np.testing.assert_array_equal(r1.thetas, r2.thetas)  # same seed, same result
    assert r1.thetas.shape == (8, 10) and r1.failed == 0
    assert np.all(r1.se > 0)
    np.testing.assert_allclose(r1.ci_high - r1.ci_low, 2 * 1.96 * r1.se)
    assert np.all((r1.rank_low >= 1) & (r1.rank_high <= 10) & (r1.rank_low <= r1.rank_high))
    # the best model's rank interval covers its full-data rank
    best = int(np.argmax(r1.theta))
    assert r1.rank_low[best] == 1


def test_bootstrap_needs_two_replicates():
    truth, S, A = simulate(6, 20, 10, seed=1)
    with pytest.raises(EngineError):
        cluster_bootstrap(S, A, JointConfig(), B=1)


def test_rank_percentiles_match_numpy_with_missing_replicates():
    import warnings

    from benchloupe.engine.bootstrap import _nan_percentiles

    rng = np.random.default_rng(0)
    a = rng.normal(size=(37, 50))
    a[rng.random(a.shape) < 0.2] = np.nan
    a[:, 3] = np.nan  # a model no replicate could fit
    a[1:, 4] = np.nan  # one replicate only
    lo, hi = _nan_percentiles(a, (2.5, 97.5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(lo, np.nanpercentile(a, 2.5, axis=0), equal_nan=True)
        np.testing.assert_allclose(hi, np.nanpercentile(a, 97.5, axis=0), equal_nan=True)


def test_table4_bootstraps_bt_and_2pl_on_the_same_draws():
    from benchloupe.engine.bootstrap import method_bootstrap, table4
    from benchloupe.engine.joint import JointConfig, fit_bradley_terry
    from tests.unit._joint_sim import simulate

    _, S, A = simulate(n_models=12, n_static=60, n_arena=40, seed=9)
    cfg = JointConfig()
    res = {m: method_bootstrap(S, A, cfg, method=m, B=6, seed=3) for m in ("dualeval", "arena_bt", "static_2pl")}
    bt = res["arena_bt"]
    np.testing.assert_allclose(bt.theta, fit_bradley_terry(A, JointConfig(mode="arena")).scores)
    # replicate 0 of the BT bootstrap is BT on the arena columns DualEval's replicate 0 drew, from replicate 0's
    # own seed (issue 36: SeedSequence(3).spawn(B)[0])
    rng = np.random.default_rng(np.random.SeedSequence(3).spawn(6)[0])
    rng.choice(60, 60, replace=True)
    cols = rng.choice(40, 40, replace=True)
    from benchloupe.engine.joint import ArenaData

    np.testing.assert_allclose(bt.thetas[0], fit_bradley_terry(ArenaData(A.rewards[:, cols]),
                                                               JointConfig(mode="arena")).scores)
    rows = {r["method"]: r for r in table4(res)}
    assert set(rows) == {"dualeval", "arena_bt", "static_2pl"}
    assert all(r["median_rank_ci_width"] >= 0 and r["median_se"] > 0 for r in rows.values())


@pytest.mark.parametrize("kind", ["binary", "missing", "binomial", "chance"])
def test_weighted_replicate_is_the_fit_on_repeated_columns(kind):
    """A static replicate fits each distinct drawn column once with its draw count as weight
    (``fit_static_weighted``): same objective, same optimum as ``fit_joint`` on the matrix with the repeats."""
    from dataclasses import replace

    from benchloupe.engine.backend import Backend
    from benchloupe.engine.joint import fit_joint
    from benchloupe.engine.joint.optimise import fit_static_weighted
    from benchloupe.engine.joint.subsets import static_columns

    truth, S, _ = simulate(30, 80, 5, seed=4, missing=0.2 if kind == "missing" else 0.0)
    rng = np.random.default_rng(1)
    if kind == "binomial":
        n = rng.integers(1, 6, S.shape)
        S = StaticData(rng.binomial(n, 0.5), np.ones(S.shape, bool), trials=n)
    if kind == "chance":
        S = StaticData(S.correct, S.mask, chance=np.full(S.shape[1], 0.25))
    cfg = JointConfig(mode="static", ftol=1e-14)
    full = fit_joint(S, None, cfg)
    idx = rng.choice(S.shape[1], S.shape[1], replace=True)
    cols, counts = np.unique(idx, return_counts=True)
    assert counts.max() > 1
    f64 = Backend("numpy", "cpu", "float64")
    dup = fit_joint(static_columns(S, idx), None, cfg, device=f64,
                    init={"theta": full.theta, "b_static": full.b_static[idx], "k_static": full.k_static[idx]})
    th = fit_static_weighted(static_columns(S, cols), counts, cfg, device=f64,
                             init={"theta": full.theta, "b_static": full.b_static[cols],
                                   "k_static": full.k_static[cols]})
    np.testing.assert_allclose(th, dup.theta, atol=1e-6)
    # from the rate start too (the Table 4 static 2PL bootstrap starts there)
    cold = fit_static_weighted(static_columns(S, cols), counts, replace(cfg, ftol=1e-14), device=f64)
    np.testing.assert_allclose(cold, fit_joint(static_columns(S, idx), None, cfg, device=f64).theta, atol=1e-5)


def test_static_bootstrap_replicates_match_repeated_column_fits():
    """cluster_bootstrap's static replicates (weighted distinct columns, warm start, REPLICATE_FTOL) agree with
    fitting each replicate's repeated-column matrix to a tight tolerance: within 1e-3 in theta (on metabench GSM8K
    the largest deviation from the float64 optimum is 3e-4, 0.5 % of the median bootstrap SE; docs/BENCHMARKS.md)."""
    from benchloupe.engine.joint import fit_joint
    from benchloupe.engine.joint.subsets import static_columns

    _, S, _ = simulate(60, 120, 5, seed=6)
    cfg = JointConfig(mode="static")
    full = fit_joint(S, None, cfg)
    r = cluster_bootstrap(S, None, cfg, B=4, seed=2, full=full)
    for b, seed in enumerate(np.random.SeedSequence(2).spawn(4)):
        rng = np.random.default_rng(seed)
        idx = rng.choice(np.arange(S.shape[1]), S.shape[1], replace=True)
        tight = fit_joint(static_columns(S, idx), None, JointConfig(mode="static", ftol=1e-14))
        np.testing.assert_allclose(r.thetas[b], tight.theta, atol=1e-3)
