"""The oracle ceiling of the synthetic contamination protocol (issue 23): the protocol on data simulated from a
fit's probabilities (chance included), scored with those true probabilities.

Ground truth: on data drawn from known four-way multiple-choice probabilities (c = .25), the guessing-aware
clean-reference detector is within .01 of the oracle ceiling computed from the true p at every rate, and both
are far below the paper's .995 (an injected success where p is near c is a success the model could have
guessed).  Without guessing (c = 0) the same data-generating process gives a ceiling near 1."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchloupe.engine.anomaly import RATES, contamination_experiment, oracle_ceiling, simulate_static
from benchloupe.engine.joint import JointConfig, StaticData, fit_joint


def _truth(c: float, seed: int = 0, n_m: int = 60, n_i: int = 400):
    rng = np.random.default_rng(seed)
    theta, b, a = rng.normal(size=n_m), rng.normal(0.5, 1.2, n_i), np.exp(rng.normal(0.4, 0.3, n_i))
    p = c + (1 - c) / (1 + np.exp(-a * (theta[:, None] - b)))
    mask = np.ones(p.shape, bool)
    template = StaticData(np.zeros(p.shape, np.int32), mask, chance=np.full(n_i, c) if c else None)
    return p, template


def test_detector_reaches_the_ceiling_on_data_from_the_true_model():
    """Per seed s: the data the oracle draws for s (simulate_static), the guessing-aware fit on them, and the
    protocol's injections of seed s; the fitted detector and the true probabilities then score the same cells."""
    p, template = _truth(0.25)
    cfg = JointConfig(mode="static")
    ceiling = oracle_ceiling(template, p)
    assert len(ceiling) == len(RATES) * 5 and set(ceiling.rate) == set(RATES)
    tool = []
    for seed in range(5):
        S = simulate_static(template, p, seed)
        res = fit_joint(S, None, cfg)
        tool.append(contamination_experiment(S, None, cfg, seeds=(seed,), clean=res))
    got = pd.concat(tool).groupby(["detector", "rate"]).auroc.mean()
    ceil = ceiling.groupby("rate").auroc.mean()
    for (detector, rate), auc in got.items():
        # the paper's detector (clean reference) within .01 below the ceiling; it can sit a little above it, having
        # seen the injected cells as failures (its p there is below the truth: .939 vs .927 at 0.5 %). The
        # contaminated fit learns from the injections it must find and loses up to .011 (5 %: .917 vs .928).
        below = 0.01 if detector == "clean_reference" else 0.015
        assert ceil[rate] - below <= auc <= ceil[rate] + 0.02, (detector, rate, auc, ceil[rate])
    assert ceil.max() < 0.97  # the paper's .995 is out of reach under guessing
    again = oracle_ceiling(template, p)
    np.testing.assert_array_equal(again.auroc, ceiling.auroc)  # same seeds, same ceiling


def test_without_guessing_the_ceiling_is_near_one():
    p, template = _truth(0.0)
    ceil = oracle_ceiling(template, p, rates=(0.01,), seeds=(0, 1)).auroc.mean()
    assert ceil > 0.98


def test_simulated_data_keep_mask_trials_and_chance():
    p, template = _truth(0.25, n_m=20, n_i=30)
    mask = template.mask.copy()
    mask[::3, ::2] = False
    t = np.where(mask, 5, 0)
    tmpl = StaticData(np.zeros(p.shape, np.int32), mask, trials=t, chance=template.chance)
    sim = simulate_static(tmpl, p, seed=0)
    assert (sim.correct[~mask] == 0).all() and (sim.correct <= t).all()
    np.testing.assert_array_equal(sim.trials, t)
    assert abs(sim.correct[mask].sum() / t[mask].sum() - p[mask].mean()) < 0.05
    np.testing.assert_array_equal(sim.chance, template.chance)
