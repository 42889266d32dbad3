"""A wrong chance is warned, and a shared lower asymptote can be estimated from the data (issue 23, must-fix 4).

Ground truth: data simulated with a known lower asymptote c; the marginal-ML estimate recovers it within .03
(2,000 respondents x 60 items, N(0, 1) abilities) and its 95 % interval covers it; the empirical floor of data
with c = .25 sits near .25 (no warning), of data with no floor near 0 (a warning naming both numbers)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from benchloupe.engine.irt.asymptote import (
    chance_lr_test,
    check_chance,
    empirical_floor,
    estimate_lower_asymptote,
)


def _sim(c: float, n_models: int = 2000, n_items: int = 60, seed: int = 0):
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_models)
    b, a = rng.normal(0, 1, n_items), np.exp(rng.normal(0.2, 0.3, n_items))
    p = c + (1 - c) * expit(a * (theta[:, None] - b))
    y = (rng.random(p.shape) < p).astype(float)
    return y, np.ones_like(y)


@pytest.mark.parametrize("c", [0.0, 0.25, 0.5])
def test_shared_asymptote_recovers_the_simulated_one(c):
    y, k = _sim(c, seed=int(c * 100))
    est = estimate_lower_asymptote(y, k)
    assert est.c == pytest.approx(c, abs=0.03)
    assert est.ci[0] - 0.005 <= c <= est.ci[1] + 0.005
    assert est.items_used == 60 and est.loglik >= est.loglik_c0 - 1e-6


def test_floor_and_warning():
    y, k = _sim(0.25, seed=1)
    fl = empirical_floor(y, k, chance=0.25)
    assert 0.15 < fl.floor < 0.3 and fl.stated == 0.25 and fl.n_models == 200 and fl.n_items == 12
    assert check_chance(fl) is None
    y0, k0 = _sim(0.0, seed=2)
    fl0 = empirical_floor(y0, k0, chance=0.25)
    assert fl0.floor < 0.05
    msg = check_chance(fl0)
    assert msg is not None and "0.250" in msg and f"{fl0.floor:.3f}" in msg
    assert check_chance(empirical_floor(y0, k0)) is None  # no stated chance: nothing to check


def test_missing_cells_and_binomial_counts():
    y, k = _sim(0.25, n_models=300, n_items=30, seed=3)
    k[::7, ::3] = 0
    y = np.where(k > 0, y, 0)
    fl = empirical_floor(y * 4, k * 4, chance=0.25)  # 4 trials a cell, same rates
    assert fl.floor == pytest.approx(empirical_floor(y, k, chance=0.25).floor)
    with pytest.raises(Exception, match="at least two items"):
        estimate_lower_asymptote(np.zeros((5, 3)), np.ones((5, 3)))


def test_likelihood_ratio_test_of_the_stated_chance_false_warnings_and_power():
    """Issue 32: the stated chance is tested against the data.  Seeded small version of bench/bench_chance_test.py:
    true .25 stated .25 -> no warning; true .12 stated .25 -> a warning every time, with both numbers and a gain."""
    for seed in range(4):
        y, k = _sim(0.25, n_models=300, n_items=50, seed=100 + seed)
        t = chance_lr_test(y, k, 0.25)
        assert not t.rejected and t.stated == 0.25
    for seed in range(4):
        y, k = _sim(0.12, n_models=300, n_items=50, seed=200 + seed)
        t = chance_lr_test(y, k, 0.25)
        assert t.rejected and t.p_value < 1e-3 and t.gain > 5.4  # chi2_1(.999) / 2
        assert t.ci[0] <= 0.12 + 0.02 and t.ci[1] < 0.25 and abs(t.estimate - 0.12) < 0.05


def test_chance_test_with_mixed_levels_subsamples_and_skips_items_without_one():
    y, k = _sim(0.1, n_models=500, n_items=60, seed=7)
    stated = np.where(np.arange(60) % 2, 0.25, 0.2)
    stated[:10] = 0.0  # no stated chance: not tested
    t = chance_lr_test(y, k, stated, max_models=200, max_items=40)
    assert t.subsampled and t.n_models == 200 and t.n_items == 40 and t.rejected
    assert t.stated == pytest.approx(0.225, abs=0.01)
    assert chance_lr_test(y, k, np.zeros(60)) is None  # nothing stated, nothing to test
