"""Binomial static cells and a known guessing level in the DualEval static term (issue 14, fix 1 and "anomaly
detection that knows about guessing"): simulated data with known parameters."""

from __future__ import annotations

import numpy as np
import pytest

from benchloupe.engine.common import EngineError
from benchloupe.engine.joint import JointConfig, StaticData, fit_joint
from benchloupe.engine.joint.objective import _Problem
from benchloupe.engine.stats import spearman


def _sim(n_models, n_items, trials, chance=0.0, seed=0):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    b = rng.normal(size=n_items)
    a = np.exp(rng.normal(0.3, 0.3, n_items))
    p = chance + (1 - chance) / (1 + np.exp(-a * (theta[:, None] - b)))
    y = rng.binomial(trials, p)
    return theta, b, a, y


def test_binomial_gradient_and_item_hessian_match_finite_differences():
    rng = np.random.default_rng(4)
    n = rng.integers(1, 6, size=(7, 9))
    y = rng.binomial(n, 0.6)
    mask = rng.random(n.shape) > 0.1
    for chance in (None, 0.2):
        cfg = JointConfig(mode="static")
        pr = _Problem(StaticData(y, mask, trials=n, chance=chance), None, 7, cfg)
        x = rng.normal(size=pr.n_params) * 0.5
        f, g = pr.value_grad(x)
        num = np.array([(pr.value(x + e) - pr.value(x - e)) / 2e-6 for e in np.eye(pr.n_params) * 1e-6])
        np.testing.assert_allclose(num, g, atol=1e-7)
        if chance is None:  # convex: the Newton system is the exact Hessian
            H = np.column_stack([(pr.value_grad(x + e)[1] - pr.value_grad(x - e)[1]) / 2e-6
                                 for e in np.eye(pr.n_params) * 1e-6])
            A, Bb, Bk, Cbb, Cbk, Ckk = pr.newton_system(x)
            M, Ns = pr.M, pr.Ns
            np.testing.assert_allclose(A, np.diag(H[:M, :M]), atol=1e-6)
            np.testing.assert_allclose(Bb, H[:M, M:M + Ns], atol=1e-6)
            np.testing.assert_allclose(Ckk, np.diag(H[M + Ns:, M + Ns:]), atol=1e-6)


def test_one_trial_binomial_equals_the_binary_fit():
    theta, b, a, y = _sim(40, 60, 1, seed=1)
    mask = np.ones(y.shape, bool)
    plain = fit_joint(StaticData(y, mask), None, JointConfig(mode="static"))
    binom = fit_joint(StaticData(y, mask, trials=np.ones_like(y)), None, JointConfig(mode="static"))
    np.testing.assert_allclose(binom.theta, plain.theta, atol=1e-8)
    assert abs(binom.objective - plain.objective) < 1e-12


@pytest.mark.parametrize("optimizer", ["newton", "block"])
def test_binomial_cells_recover_better_than_majority_cells(optimizer):
    theta, b, a, y = _sim(60, 300, 10, seed=2)
    mask = np.ones(y.shape, bool)
    cfg = JointConfig(mode="static", optimizer=optimizer)
    binom = fit_joint(StaticData(y, mask, trials=np.full(y.shape, 10)), None, cfg)
    major = fit_joint(StaticData((2 * y >= 10).astype(np.int8), mask), None, cfg)
    assert binom.converged
    # measured: binomial theta Spearman .998 / b .99; majority .98 / .95
    assert spearman(binom.theta, theta) > spearman(major.theta, theta)
    assert spearman(binom.b_static, b) > spearman(major.b_static, b)
    assert spearman(binom.theta, theta) > 0.99


@pytest.mark.parametrize("optimizer", ["newton", "block"])
def test_chance_aware_fit_recovers_3pl_with_known_chance(optimizer):
    theta, b, a, y = _sim(300, 150, 1, chance=0.25, seed=3)
    mask = np.ones(y.shape, bool)
    cfg = JointConfig(mode="static", optimizer=optimizer)
    aware = fit_joint(StaticData(y, mask, chance=0.25), None, cfg)
    naive = fit_joint(StaticData(y, mask), None, cfg)
    assert aware.converged
    assert np.allclose(aware.chance_static, 0.25)
    # the 2PL reads guessing as lower sharpness on the hard items; measured Spearman of a with the truth .74 (aware)
    # vs .45 (2PL), of b .989 vs .979, RMSE of p against the true p .049 vs .053
    assert spearman(aware.a_static, a) > spearman(naive.a_static, a) + 0.15
    assert spearman(aware.b_static, b) > spearman(naive.b_static, b)
    p_true = 0.25 + 0.75 / (1 + np.exp(-a * (theta[:, None] - b)))
    rmse = [np.sqrt(np.mean((r.p_static() - p_true) ** 2)) for r in (aware, naive)]
    assert rmse[0] < rmse[1]
    assert spearman(aware.theta, theta) > 0.97
    assert aware.p_static().min() >= 0.25  # predicted probabilities include the asymptote


def test_bad_counts_and_chance_levels_are_one_clear_error():
    y = np.array([[1, 2], [0, 3]])
    m = np.ones((2, 2), bool)
    with pytest.raises(EngineError, match="0/1"):
        StaticData(y, m)
    with pytest.raises(EngineError, match="0..trials"):
        StaticData(y, m, trials=np.array([[1, 1], [1, 3]]))
    with pytest.raises(EngineError, match="trials must be whole"):
        StaticData(y, m, trials=np.array([[1, 2], [0, 3]]))
    with pytest.raises(EngineError, match="chance"):
        StaticData(np.eye(2), m, chance=[0.2, 1.0])
    s = StaticData(y, m, trials=np.array([[2, 2], [1, 3]]))
    assert s.correct.dtype == np.int8 and s.trials.dtype == np.int8
    np.testing.assert_allclose(s.rate, [[0.5, 1.0], [0.0, 1.0]])
