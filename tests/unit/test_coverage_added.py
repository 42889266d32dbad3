"""C.6 draws with items that have no responses (accepted BenchFill items at their online-calibrated
difficulty, issue 21 item 7): they are in every draw, so the metrics and the gap intervals describe the
benchmark as it now stands; none added leaves the draws exactly as before."""

from __future__ import annotations

import numpy as np

from benchloupe.engine.coverage import UncertaintyConfig, coverage_report, gap_locations, metric_uncertainty
from benchloupe.engine.irt import fit_1pl


def _fit():
    rng = np.random.default_rng(3)
    theta, b = rng.normal(size=60), np.r_[rng.uniform(-2, -0.5, 30), rng.uniform(1.0, 2.5, 30)]  # a hole at 0.2
    y = (rng.random((60, 60)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    return fit_1pl(y)


def test_no_added_items_leaves_the_draws_as_they_were():
    fit = _fit()
    cfg = UncertaintyConfig(n_draws=200, seed=1)
    a = metric_uncertainty(fit, config=cfg)
    b = metric_uncertainty(fit, config=cfg, added_b=np.zeros(0), added_se=np.zeros(0))
    assert a.draws.equals(b.draws) and a.max_gap_ci == b.max_gap_ci


def test_an_item_in_the_widest_gap_narrows_it_in_every_draw():
    fit = _fit()
    report = coverage_report(fit.b)
    widest = gap_locations(report, 1)[0]
    cfg = UncertaintyConfig(n_draws=200, seed=1)
    before = metric_uncertainty(fit, config=cfg)
    filled = coverage_report(np.r_[fit.b, widest])
    after = metric_uncertainty(fit, config=cfg, added_b=np.array([widest]), added_se=np.array([0.05]),
                               locations=gap_locations(filled, 5))
    assert after.max_gap_mean < before.max_gap_mean
    assert np.isfinite(after.max_gap_ci).all() and after.max_gap_ci[1] < before.max_gap_ci[1]
    assert after.location_widths.shape == (200, 5) and np.isfinite(after.location_widths).all()
    held = metric_uncertainty(fit, config=cfg, added_b=np.array([widest]))  # no se: held at its b
    assert np.isfinite(held.max_gap_ci).all()
