"""1PL MAP of paper 3 (section 3.1, C.3): recovery on simulated data with known parameters, optimality for the
paper's objective, the guessing and binomial variants, the Laplace posterior and online calibration (4.1).

Tolerances: with 60 models an item's posterior SD is about 0.29 (the Fisher information of 60 Bernoulli
answers near p = 0.5 plus the N(0, 1) prior), so we ask RMSE <= 0.33 and Spearman >= 0.94 for 800 items;
the seeds are fixed, so these are margins over the values the estimator reaches (0.29, 0.957), not flaky
bounds. A wrong sign, missing prior, or a mis-scaled guessing term moves them far past the bounds.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, special, stats

from benchloupe.engine.common import EngineError
from benchloupe.engine.irt import OnePLConfig, fit_1pl, online_difficulty


def _sim(m=60, n=800, seed=11, chance=0.0):
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, m)
    b = rng.normal(0, 1, n)
    p = chance + (1 - chance) * special.expit(theta[:, None] - b[None, :])
    return theta, b, p, rng


def _rmse(x, y):
    return float(np.sqrt(np.mean((x - y) ** 2)))


def test_recovers_simulated_difficulties_and_calibrated_se():
    theta, b, p, rng = _sim()
    y = (rng.random(p.shape) < p).astype(float)
    fit = fit_1pl(y)
    assert fit.converged and fit.iterations < 20
    assert stats.spearmanr(fit.b, b)[0] >= 0.94
    assert _rmse(fit.b, b) <= 0.33
    assert np.corrcoef(fit.theta, theta)[0, 1] >= 0.99
    # posterior SEs are honest: about 95% of the truth within 1.96 SE (0.946 here), z-scores with SD ~ 1
    z = (fit.b - b) / fit.b_se
    assert 0.92 <= np.mean(np.abs(z) < 1.96) <= 0.97
    assert 0.9 <= z.std() <= 1.1


def test_map_is_the_mode_of_the_papers_posterior():
    """Gradient of -log posterior (Bernoulli likelihood, N(0,1) priors) vanishes, and an independent
    L-BFGS minimisation of the same objective reaches the same point and value."""
    _, _, p, rng = _sim(m=12, n=40, seed=2)
    y = (rng.random(p.shape) < p).astype(float)
    y[rng.random(y.shape) < 0.1] = np.nan
    obs = np.isfinite(y)
    fit = fit_1pl(y)

    def objective(x):
        th, bb = x[:12], x[12:]
        eta = th[:, None] - bb[None, :]
        ll = np.where(
            obs, np.nan_to_num(y) * -np.logaddexp(0, -eta) + (1 - np.nan_to_num(y)) * -np.logaddexp(0, eta), 0
        )
        return -ll.sum() + 0.5 * np.sum(th**2) + 0.5 * np.sum(bb**2)

    sol = optimize.minimize(
        objective, np.zeros(52), method="L-BFGS-B", options={"gtol": 1e-10, "ftol": 1e-15}
    )
    assert fit.objective == pytest.approx(sol.fun, abs=1e-7)
    assert objective(np.r_[fit.theta, fit.b]) == pytest.approx(fit.objective, abs=1e-9)
    np.testing.assert_allclose(np.r_[fit.theta, fit.b], sol.x, atol=1e-4)


def test_guessing_variant_recovers_difficulties_under_guessing():
    """Four-option items (g = 0.25): the guessing fit recovers b (RMSE 0.37, Spearman 0.93) and beats the
    plain 1PL on the same data (RMSE 0.44), which confuses guessing with ease."""
    _, b, p, rng = _sim(chance=0.25)
    y = (rng.random(p.shape) < p).astype(float)
    with_g = fit_1pl(y, chance=0.25)
    without = fit_1pl(y)
    assert with_g.converged
    assert stats.spearmanr(with_g.b, b)[0] >= 0.91
    assert _rmse(with_g.b, b) <= 0.40
    assert _rmse(with_g.b, b) < _rmse(without.b, b) - 0.04
    np.testing.assert_array_equal(with_g.chance, np.full(b.size, 0.25))


def test_per_item_chance_levels():
    """Mixed benchmark: free-response items (g = 0) next to two-option items (g = 0.5)."""
    rng = np.random.default_rng(5)
    theta, b = rng.normal(0, 1, 80), rng.normal(0, 1, 300)
    g = np.where(np.arange(300) % 2 == 0, 0.0, 0.5)
    p = g + (1 - g) * special.expit(theta[:, None] - b[None, :])
    y = (rng.random(p.shape) < p).astype(float)
    fit = fit_1pl(y, chance=g)
    for sel in (g == 0, g == 0.5):
        assert stats.spearmanr(fit.b[sel], b[sel])[0] >= 0.85
    assert abs(np.mean(fit.b[g == 0.5]) - np.mean(b[g == 0.5])) < 0.25  # no systematic shift from guessing


def test_binomial_likelihood_known_parameters():
    """8 rollouts per cell: the information grows 8-fold, RMSE drops to ~0.11."""
    theta, b, p, rng = _sim()
    c = rng.binomial(8, p).astype(float)
    fit = fit_1pl(None, successes=c, trials=np.full_like(c, 8.0))
    assert stats.spearmanr(fit.b, b)[0] >= 0.99
    assert _rmse(fit.b, b) <= 0.13
    assert np.corrcoef(fit.theta, theta)[0, 1] >= 0.998


def test_binomial_with_one_trial_equals_bernoulli_and_mask_equals_nan():
    _, _, p, rng = _sim(m=20, n=100, seed=4)
    y = (rng.random(p.shape) < p).astype(float)
    miss = rng.random(y.shape) < 0.2
    a = fit_1pl(np.where(miss, np.nan, y))
    b = fit_1pl(y, ~miss)
    c = fit_1pl(None, successes=np.where(miss, 0, y), trials=np.where(miss, 0, 1.0))
    np.testing.assert_allclose(a.b, b.b, atol=1e-10)
    np.testing.assert_allclose(a.b, c.b, atol=1e-10)


def test_unobserved_and_perfect_items_stay_finite():
    y = np.array([[1, 1, 0, np.nan], [1, 0, 0, np.nan], [1, 1, 1, np.nan]], float)
    fit = fit_1pl(y)
    assert np.all(np.isfinite(fit.b))
    assert fit.b[3] == pytest.approx(0.0, abs=1e-8)  # no data: the prior mean
    assert fit.b[0] < fit.b[1] < fit.b[2]


def _rngs(seed: int, n: int) -> list:
    """One generator per draw, as the C.6 draws use them."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n)]


def test_laplace_draws_match_posterior_se():
    _, _, p, rng = _sim(m=30, n=200, seed=9)
    y = (rng.random(p.shape) < p).astype(float)
    fit = fit_1pl(y)
    draws = fit.laplace.sample_b(_rngs(0, 4000))
    np.testing.assert_allclose(draws.std(axis=0), fit.b_se, rtol=0.08)  # 4000 draws: SD of an SD ~1.1%
    np.testing.assert_allclose(draws.mean(axis=0), fit.b, atol=4 * fit.b_se.max() / np.sqrt(4000))
    # the more-models-than-items branch (Schur complement on the item side) gives the same kind of answer
    fit_t = fit_1pl(y[:, :20])
    d_t = fit_t.laplace.sample_b(_rngs(1, 4000))
    np.testing.assert_allclose(d_t.std(axis=0), fit_t.b_se, rtol=0.08)


def test_mml_method_cross_check():
    theta, b, p, rng = _sim(m=400, n=30, seed=3)
    y = (rng.random(p.shape) < p).astype(float)
    mml = fit_1pl(y, config=OnePLConfig(method="mml"))
    assert mml.method == "mml"
    assert stats.spearmanr(mml.b, b)[0] >= 0.97
    assert _rmse(mml.b, b) <= 0.2


def test_online_difficulty_is_the_section_4_1_argmax():
    rng = np.random.default_rng(0)
    theta = rng.normal(0, 1, 12)
    k = np.full(12, 4.0)
    for chance, true_b in ((0.0, 0.7), (0.25, -0.3)):
        p = chance + (1 - chance) * special.expit(theta - true_b)
        c = rng.binomial(4, p).astype(float)

        def negll(bb, c=c, chance=chance):
            q = chance + (1 - chance) * special.expit(theta - bb)
            return -np.sum(c * np.log(q) + (k - c) * np.log1p(-q))

        ref = optimize.minimize_scalar(negll, bounds=(-8, 8), method="bounded", options={"xatol": 1e-10}).x
        assert online_difficulty(theta, c, k, chance=chance) == pytest.approx(ref, abs=1e-6)
    # many annotators: recovers the true difficulty
    theta = rng.normal(0, 1.5, 2000)
    c = rng.binomial(4, special.expit(theta - 0.4)).astype(float)
    assert online_difficulty(theta, c, np.full(2000, 4.0)) == pytest.approx(0.4, abs=0.08)


def test_online_difficulty_perfect_score_needs_prior():
    theta = np.array([-1.0, 0.0, 1.0])
    with pytest.raises(EngineError, match="prior_sd_b"):
        online_difficulty(theta, np.array([2.0, 2, 2]), np.array([2.0, 2, 2]))
    b = online_difficulty(theta, np.array([2.0, 2, 2]), np.array([2.0, 2, 2]), prior_sd_b=1.0)
    assert np.isfinite(b) and b < -0.5


def test_bad_input_is_one_clear_error():
    with pytest.raises(EngineError, match="between 0 and trials"):
        fit_1pl(None, successes=np.array([[3.0]]), trials=np.array([[2.0]]))
    with pytest.raises(EngineError, match="no observed cell"):
        fit_1pl(np.full((2, 2), np.nan))
    with pytest.raises(EngineError, match="chance"):
        fit_1pl(np.eye(3), chance=1.0)
    with pytest.raises(EngineError, match="mask shape"):
        fit_1pl(np.eye(3), np.ones((2, 3), bool))
