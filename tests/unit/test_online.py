"""Online calibration of one new item (paper 003, section 4.1 and footnote 4) against simulated truth."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from benchloupe.engine.common import EngineError
from benchloupe.engine.online import DifficultyScale, OnlineCalibrationConfig, calibrate_item

THETA = np.linspace(-3.0, 3.0, 12)


def simulate(b: float, trials: int, guessing: float = 0.0, seed: int = 0) -> np.ndarray:
    p = guessing + (1 - guessing) * expit(THETA - b)
    return np.random.default_rng(seed).binomial(trials, p)


def test_recovers_true_difficulty_within_three_standard_errors():
    # 12 models x 2000 trials: the MLE is consistent; 3 SE bounds a false failure at ~0.3 %.
    for b in (-1.5, 0.0, 0.8, 2.0):
        fit = calibrate_item(THETA, simulate(b, 2000, seed=int(10 * b + 50)), np.full(12, 2000))
        assert abs(fit.b - b) < 3 * fit.se
        assert 0.005 < fit.se < 0.1
        assert not fit.at_bound


def test_estimate_solves_the_score_equation_of_section_4_1():
    # d/db sum c log s + (K - c) log(1 - s) = -sum (c_j - K_j s_j): zero at the maximiser (g = 0).
    c, k = simulate(0.3, 4, seed=1), np.full(12, 4)
    fit = calibrate_item(THETA, c, k)
    assert abs(np.sum(c - k * expit(THETA - fit.b))) < 1e-5
    for delta in (-1e-3, 1e-3):  # and it is the maximum, not a minimum
        ll = np.sum(c * np.log(expit(THETA - fit.b - delta)) + (k - c) * np.log1p(-expit(THETA - fit.b - delta)))
        assert ll < fit.log_likelihood


def test_guessing_parameter_is_needed_for_multiple_choice():
    # Data from the 3PL-style model with chance level 1/4 (footnote 4): ignoring g makes the item look easier.
    c, k = simulate(1.0, 3000, guessing=0.25, seed=3), np.full(12, 3000)
    with_g = calibrate_item(THETA, c, k, guessing=0.25)
    without = calibrate_item(THETA, c, k)
    assert abs(with_g.b - 1.0) < 3 * with_g.se
    assert without.b < with_g.b - 0.3


def test_all_correct_hits_the_bound_and_the_prior_keeps_it_finite():
    k = np.full(12, 4)
    mle = calibrate_item(THETA, k, k)
    assert mle.at_bound and mle.b < THETA.min() - 7
    map_fit = calibrate_item(THETA, k, k, config=OnlineCalibrationConfig(prior_sd=1.0))
    assert not map_fit.at_bound and -4 < map_fit.b < 0


def test_models_without_trials_are_masked():
    c, k = simulate(0.5, 8, seed=4), np.full(12, 8)
    k2, c2 = k.copy(), c.copy()
    k2[[2, 7]], c2[[2, 7]] = 0, 0
    theta2 = THETA.copy()
    theta2[[2, 7]] = np.nan  # a missing ability is fine where there are no trials
    keep = np.ones(12, bool)
    keep[[2, 7]] = False
    assert calibrate_item(theta2, c2, k2).b == pytest.approx(calibrate_item(THETA[keep], c[keep], k[keep]).b)


@pytest.mark.parametrize("theta,c,k,g", [
    (THETA, np.zeros(12), np.zeros(12), 0.0),
    (THETA, np.full(12, 5), np.full(12, 4), 0.0),
    (THETA, np.zeros(12), np.full(12, 4), 1.0),
    (THETA[:3], np.zeros(12), np.full(12, 4), 0.0),
])
def test_degenerate_input_is_one_clear_error(theta, c, k, g):
    with pytest.raises(EngineError):
        calibrate_item(theta, c, k, guessing=g)


def test_scale_is_the_benchmarks_min_max_and_is_not_clipped():
    scale = DifficultyScale.from_difficulties(np.array([-2.0, 0.0, 2.0]))
    assert scale.to_unit(0.0) == 0.5 and scale.to_unit(-3.0) == -0.25
    assert scale.from_unit(scale.to_unit(1.3)) == pytest.approx(1.3)
    with pytest.raises(EngineError):
        DifficultyScale(1.0, 1.0)


def test_agrees_with_the_irt_modules_online_difficulty():
    # Two independent implementations of the same section 4.1 argmax must agree to the optimiser tolerance.
    irt = pytest.importorskip("benchloupe.engine.irt")
    if not hasattr(irt, "online_difficulty"):
        pytest.skip("benchloupe.engine.irt has no online_difficulty")
    for g, seed in ((0.0, 11), (0.25, 12)):
        c, k = simulate(0.4, 6, guessing=g, seed=seed), np.full(12, 6)
        assert calibrate_item(THETA, c, k, guessing=g).b == pytest.approx(
            irt.online_difficulty(THETA, c, k, chance=g), abs=1e-5)
