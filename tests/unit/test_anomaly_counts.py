"""Residuals on binomial cells and with a known chance level; item-level and precision@k detection metrics
(issue 14: fix 1 outside the fit, guessing-aware detection, Fig. 3 / App. K item level)."""

import numpy as np
import pytest

from benchloupe.engine.anomaly import (
    _n_inject,
    contamination_experiment,
    detection_metrics,
    precision_at_k,
    residuals,
    static_candidates,
    static_residuals,
)
from benchloupe.engine.joint import JointConfig, StaticData, fit_joint
from benchloupe.engine.stats import auroc


def test_binomial_residual_formula():
    p = np.array([[0.5, 0.2]])
    r = static_residuals(p, np.array([[5.0, 0.0]]), np.ones((1, 2), bool), trials=np.array([[10, 4]]))
    np.testing.assert_allclose(r, [[0.0, (0 - 0.8) / np.sqrt(4 * 0.16 + 1e-6)]])
    # one trial: the paper's residual
    np.testing.assert_allclose(static_residuals(p, np.array([[1.0, 0.0]]), np.ones((1, 2), bool)),
                               [[0.5 / np.sqrt(0.25 + 1e-6), -0.2 / np.sqrt(0.16 + 1e-6)]])


def test_precision_at_k_and_item_level():
    assert precision_at_k(np.array([3.0, 2.0, 1.0, 0.0]), np.array([True, False, True, False]), 2) == (0.5, 0.5)
    # 2 models x 3 items; injected cells (0,1) and (1,1): item 1 is contaminated and holds the top scores
    score = np.array([0.1, 5.0, 0.2, 0.3, 4.0, -1.0])
    labels = np.zeros(6, bool)
    labels[[1, 4]] = True
    m = detection_metrics(score, labels, np.arange(6), n_cols=3)
    assert m["precision_at_k"] == 1.0 and m["item_auroc"] == 1.0 and m["n_items_contaminated"] == 1
    assert m["item_precision_at_k"] == 1.0


def test_binomial_cells_residuals_and_protocol():
    rng = np.random.default_rng(0)
    theta, b = rng.normal(size=30), rng.normal(size=120)
    p = 1 / (1 + np.exp(-(theta[:, None] - b)))
    n = np.full(p.shape, 10)
    s = rng.binomial(n, p)
    S = StaticData(s, np.ones(p.shape, bool), trials=n)
    res = fit_joint(S, None, JointConfig(mode="static"))
    r = residuals(res, S, None).static
    # binomial residuals are standardised: about unit variance, not the majority-collapsed 0/1 residuals
    assert 0.8 < np.nanstd(r) < 1.25
    tab = contamination_experiment(S, None, JointConfig(mode="static"), rates=(0.02,), seeds=(0,),
                                   detectors=("clean_reference",), clean=res)
    assert tab.auroc.iloc[0] > 0.95 and {"item_auroc", "precision_at_k"} <= set(tab.columns)


def test_guessing_aware_residuals_reach_the_oracle_on_multiple_choice_data():
    """Simulated four-way multiple choice (c = .25).  With the chance level in the fit, a success is never more
    surprising than sqrt((1-c)/c), and the clean-reference AUROC matches the one the *true* probabilities give:
    the residual loses nothing to guessing it could recover.  That oracle is about .93, not .99: an injected flip
    in a cell where p is near c looks exactly like a lucky guess (docs/DUALEVAL.md)."""
    rng = np.random.default_rng(0)
    n_m, n_i, c = 60, 400, 0.25
    theta, b, a = rng.normal(size=n_m), rng.normal(0.5, 1.2, n_i), np.exp(rng.normal(0.4, 0.3, n_i))
    p = c + (1 - c) / (1 + np.exp(-a * (theta[:, None] - b)))
    y = (rng.random(p.shape) < p).astype(float)
    S = StaticData(y, np.ones_like(y, bool), chance=np.full(n_i, c))
    cfg = JointConfig(mode="static")
    res = fit_joint(S, None, cfg)
    r = residuals(res, S, None).static
    assert np.nanmax(r) <= np.sqrt((1 - c) / c) + 1e-6
    tab = contamination_experiment(S, None, cfg, rates=(0.01, 0.05), seeds=(0, 1), detectors=("clean_reference",),
                                   clean=res)
    cand, n_all = static_candidates(S), int(S.mask.sum())
    for rate, got in tab.groupby("rate").auroc.mean().items():
        oracle = []
        for seed in (0, 1):
            inj = np.random.default_rng(seed).choice(cand, _n_inject(rate, n_all, len(cand)), replace=False)
            yy = y.copy().ravel()
            yy[inj] = 1
            lab = np.zeros(yy.size, bool)
            lab[inj] = True
            oracle.append(auroc(static_residuals(p, yy.reshape(y.shape), S.mask).ravel(), lab))
        assert got == pytest.approx(np.mean(oracle), abs=0.015)


def test_ece_weights_count_every_trial():
    from benchloupe.engine.joint import ece

    # one cell of 10 trials at rate .3 predicted .3 and one 0/1 cell predicted .9 that failed
    assert ece(np.array([0.3, 0.9]), np.array([0.3, 0.0]), weight=np.array([10, 1])) == pytest.approx(0.9 / 11)
    assert ece(np.array([0.3, 0.9]), np.array([0.3, 0.0])) == pytest.approx(0.45)


def test_bootstrap_and_subsets_keep_trials_and_chance():
    from benchloupe.engine.joint.subsets import static_columns, static_rows

    S = StaticData(np.array([[3, 1], [0, 2]]), np.ones((2, 2), bool), trials=np.array([[4, 1], [2, 2]]),
                   chance=np.array([0.25, 0.5]))
    c = static_columns(S, np.array([1, 1]))
    np.testing.assert_array_equal(c.trials, [[1, 1], [2, 2]])
    np.testing.assert_allclose(c.chance, [0.5, 0.5])
    r = static_rows(S, [1])
    np.testing.assert_array_equal(r.correct, [[0, 2]])
    np.testing.assert_array_equal(r.trials, [[2, 2]])
    np.testing.assert_allclose(r.chance, [0.25, 0.5])


def test_static_accuracy_on_binomial_cells_counts_trials():
    rng = np.random.default_rng(5)
    theta, b = rng.normal(size=20), rng.normal(size=60)
    p = 1 / (1 + np.exp(-(theta[:, None] - b)))
    n = np.full(p.shape, 8)
    S = StaticData(rng.binomial(n, p), np.ones(p.shape, bool), trials=n)
    res = fit_joint(S, None, JointConfig(mode="static"))
    logit = res.a_static * (res.theta[:, None] - res.b_static)
    rate = S.correct / n
    expected = np.mean(np.where(logit >= 0, rate, 1 - rate))
    assert res.metrics["static_accuracy"] == pytest.approx(expected)


def test_screen_model_with_counts_and_chance():
    from dataclasses import replace as dc_replace

    from benchloupe.engine.anomaly import screen_model

    rng = np.random.default_rng(8)
    theta, b = rng.normal(size=30), rng.normal(size=100)
    p = 0.25 + 0.75 / (1 + np.exp(-(theta[:, None] - b)))
    n = np.full(p.shape, 10)
    S = StaticData(rng.binomial(n, p), np.ones(p.shape, bool), trials=n, chance=np.full(100, 0.25))
    clean = fit_joint(S, None, JointConfig(mode="static"))
    frozen = dc_replace(clean, theta=np.zeros(1))
    new = rng.binomial(10, 0.25 + 0.75 / (1 + np.exp(-(-1.0 - b))))
    hardest = np.argsort(b)[-3:]
    new[hardest] = 10  # a weak newcomer that solves the three hardest items every time
    out = screen_model(frozen, new, np.ones(100, bool), new_trials=np.full(100, 10))
    assert set(hardest) <= set(out.candidates["item_idx"])
    assert (out.candidates["observed"] <= 1).all()  # rates, not counts
    assert np.all(out.candidates["expected_p"] >= 0.25 - 1e-9)  # the guessing floor
