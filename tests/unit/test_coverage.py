"""Coverage metrics of paper 3 checked against hand computations from the definitions (section 2.2, C.3, C.4,
Appendix D) and against independent reference implementations written here in plain loops."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
from scipy import stats

from benchloupe.engine.common import Cancelled, EngineError
from benchloupe.engine.coverage import (
    DiagnosticsConfig,
    TargetDistribution,
    UncertaintyConfig,
    analyse,
    calibration_sweep,
    coverage_report,
    ddm,
    diagnostics,
    gap_table,
    max_gap,
    metric_uncertainty,
    minmax_normalise,
    normalise_new,
    quantile_match,
    topk_gap_sum,
    uniform_max_gap_expectation,
)
from benchloupe.engine.irt import fit_1pl

# ----------------------------------------------------------------------------------------------- DDM, gaps


def test_ddm_hand_case():
    # z = (0, .1, .2, 1); u = (1/8, 3/8, 5/8, 7/8): |.125| + |.275| + |.425| + |.125| = .95 -> .2375
    assert ddm(np.array([0.0, 0.1, 0.2, 1.0])) == pytest.approx(0.2375, abs=1e-15)
    # n = 3 evenly spaced: z = (0, .5, 1), u = (1/6, 1/2, 5/6): (1/6 + 0 + 1/6) / 3 = 1/9
    assert ddm(np.array([1.0, 0.5, 0.0])) == pytest.approx(1 / 9, abs=1e-15)
    # the uniform midpoints themselves: 0
    assert ddm((np.arange(1, 11) - 0.5) / 10) == pytest.approx(0.0, abs=1e-15)


def test_ddm_is_w1_to_the_midpoint_measure():
    z = np.random.default_rng(0).beta(0.5, 2.0, 57)
    u = (np.arange(1, 58) - 0.5) / 57
    assert ddm(z) == pytest.approx(stats.wasserstein_distance(z, u), abs=1e-12)


def test_ddm_against_a_target():
    z = np.random.default_rng(1).random(40)
    beta = stats.beta(2, 5)
    q = beta.ppf((np.arange(1, 41) - 0.5) / 40)
    assert ddm(z, beta) == pytest.approx(np.mean(np.abs(np.sort(z) - q)), abs=1e-12)
    assert ddm(z, stats.uniform(0, 1)) == pytest.approx(ddm(z), abs=1e-12)
    assert ddm(z, TargetDistribution.from_samples(z)) == pytest.approx(0.0, abs=1e-15)
    half = stats.uniform(0, 0.5)  # a uniform target that is not U(0, 1)
    report = coverage_report(z, target=half)
    assert report.target == "uniform(0, 0.5)"
    assert report.ddm == pytest.approx(ddm(report.normalised, half)) and report.ddm != pytest.approx(
        report.ddm_uniform
    )
    with pytest.raises(EngineError, match=r"\[0, 1\]"):
        ddm(z, stats.norm())


def test_max_gap_and_topk_hand_case():
    z = np.array([0.3, 0.5])  # gaps with the end points: .3, .2, .5
    assert max_gap(z) == pytest.approx(0.5)
    assert topk_gap_sum(z, 2) == pytest.approx(0.8)
    assert topk_gap_sum(z, 5) == pytest.approx(1.0)  # fewer gaps than k: all of them
    t = gap_table(z)
    assert t.width.tolist() == pytest.approx([0.5, 0.3, 0.2])
    assert t.iloc[0][["lo", "hi", "midpoint", "lo_item", "hi_item"]].tolist() == pytest.approx(
        [0.5, 1, 0.75, 1, -1]
    )
    assert t.iloc[1][["lo_item", "hi_item"]].tolist() == [-1, 0]


def test_coverage_report_from_raw_difficulties():
    b = np.array([2.0, -1.0, 0.0, 5.0, 4.0])  # z = (1/2, 0, 1/6, 1, 5/6)
    r = coverage_report(b, k=2)
    np.testing.assert_allclose(r.normalised, [0.5, 0, 1 / 6, 1, 5 / 6])
    assert (r.b_min, r.b_max) == (-1.0, 5.0)
    assert r.max_gap == pytest.approx(1 / 3)
    assert r.topk_sum == pytest.approx(1 / 3 + 1 / 3)
    assert r.gaps.width.sum() == pytest.approx(1.0)
    assert r.ddm == pytest.approx(
        np.mean(np.abs(np.array([0, 1 / 6, 1 / 2, 5 / 6, 1]) - (np.arange(5) + 0.5) / 5))
    )
    assert r.ecdf.ecdf.tolist() == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    np.testing.assert_allclose(r.ecdf.target_cdf, r.ecdf.z)
    # default baseline "normalised": n - 1 = 4 uniform spacings, E = H_4 / 4 (issue 15); "raw": H_6 / 6
    assert r.baseline == "normalised"
    assert r.uniform_baseline_max_gap == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    raw = coverage_report(b, k=2, baseline="raw")
    assert raw.uniform_baseline_max_gap == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5 + 1 / 6) / 6)
    with pytest.raises(EngineError, match="same difficulty"):
        coverage_report(np.ones(4))
    with pytest.raises(EngineError, match="NaN"):
        coverage_report(np.array([0.0, np.nan, 1.0]))


def test_uniform_baseline_expectation_matches_simulation():
    rng = np.random.default_rng(0)
    for baseline in ("raw", "normalised"):
        u = rng.random((40000, 20))
        if baseline == "normalised":
            u = (u - u.min(1, keepdims=True)) / (u.max(1, keepdims=True) - u.min(1, keepdims=True))
        g = np.diff(
            np.concatenate([np.zeros((40000, 1)), np.sort(u, 1), np.ones((40000, 1))], 1), axis=1
        ).max(1)
        se = g.std() / np.sqrt(g.size)
        assert uniform_max_gap_expectation(20, baseline) == pytest.approx(g.mean(), abs=4 * se)


def test_uniform_exceed_probability_separates_gappy_from_uniform():
    rng = np.random.default_rng(3)
    gappy = np.concatenate([rng.random(200) * 0.4, 0.7 + rng.random(200) * 0.3])
    r = coverage_report(gappy, seed=1)
    assert r.uniform_exceed_prob == 0.0 and r.max_gap_ratio > 5
    flat = coverage_report(rng.random(400), seed=1)
    assert 0.02 < flat.uniform_exceed_prob < 0.98 and 0.4 < flat.max_gap_ratio < 2.5


def test_normalise_new_places_items_on_the_benchmark_scale():
    z, lo, hi = minmax_normalise(np.array([-2.0, 0.0, 2.0]))
    assert normalise_new(1.0, lo, hi) == pytest.approx(0.75)
    assert normalise_new(3.0, lo, hi) == pytest.approx(1.25)  # beyond the hardest item: not clipped
    with pytest.raises(EngineError):
        normalise_new(0.0, 1.0, 1.0)


# ----------------------------------------------------------------------------------------- diagnostics C.3


def _brute_force_inversions(p, obs, strength):
    """The C.3 definition in loops: units x contexts; ordered pairs of units with different strength."""
    inv = pairs = 0
    for c in range(p.shape[1]):
        for a, b in itertools.permutations(range(p.shape[0]), 2):
            if strength[a] < strength[b] and obs[a, c] and obs[b, c]:  # b is the stronger
                pairs += 1
                inv += p[b, c] < p[a, c]
    return inv / pairs


def _brute_force(successes, trials):
    obs = trials > 0
    p = np.where(obs, successes / np.where(obs, trials, 1), 0)
    pj = p.sum(1) / obs.sum(1)
    pi = p.sum(0) / obs.sum(0)
    return (
        np.mean(4 * pj * (1 - pj)),
        np.mean(4 * pi * (1 - pi)),
        _brute_force_inversions(p, obs, pj),
        _brute_force_inversions(p.T, obs.T, pi),
    )


def test_diagnostics_hand_case():
    y = np.array([[1, 1, 1], [1, 1, 0], [0, 1, 0]], float)
    d = diagnostics(y)
    # p_j = (1, 2/3, 1/3): 4p(1-p) = (0, 8/9, 8/9) -> 16/27; p_i = (2/3, 1, 1/3) -> 16/27 as well
    assert d.model_information == pytest.approx(16 / 27)
    assert d.item_information == pytest.approx(16 / 27)
    # the matrix is a perfect Guttman pattern: no inversions
    assert d.model_inversion_rate == 0.0 and d.item_inversion_rate == 0.0
    assert d.passed
    # the weakest model solves the hardest item that both stronger models fail: per item 3 ordered model pairs,
    # item 4 has 2 inversions -> 2/12; per model 4 ordered (easier, harder) item pairs, model 3 has 2 -> 2/12
    y2 = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 1]], float)
    d2 = diagnostics(y2)
    assert d2.model_inversion_rate == pytest.approx(1 / 6)
    assert d2.item_inversion_rate == pytest.approx(1 / 6)
    ref = _brute_force(y2, np.ones_like(y2))
    assert (d2.model_information, d2.item_information, d2.model_inversion_rate, d2.item_inversion_rate) == (
        pytest.approx(ref)
    )


def test_diagnostics_match_brute_force_with_missing_and_binomial():
    rng = np.random.default_rng(4)
    for _ in range(5):
        trials = rng.integers(0, 5, size=(9, 14)).astype(float)  # 0 trials = missing cell
        successes = np.floor(rng.random(trials.shape) * (trials + 1))
        d = diagnostics(None, successes=successes, trials=trials)
        ref = _brute_force(successes, trials)
        assert (d.model_information, d.item_information, d.model_inversion_rate, d.item_inversion_rate) == (
            pytest.approx(ref, abs=1e-12)
        )


def test_diagnostics_thresholds_fail_a_saturated_matrix():
    rng = np.random.default_rng(0)
    y = (rng.random((20, 50)) < 0.97).astype(float)  # nearly everything solved
    d = diagnostics(y)
    assert d.model_information < 0.3 and not d.checks["model_information"] and not d.passed
    strict = diagnostics(y, config=DiagnosticsConfig(min_model_information=0.0, min_item_information=0.0))
    assert strict.passed


def test_diagnostics_irt_ordering():
    rng = np.random.default_rng(1)
    theta, b = rng.normal(0, 1, 30), rng.normal(0, 1, 60)
    y = (rng.random((30, 60)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    by_truth = diagnostics(y, None, theta, b, config=DiagnosticsConfig(ordering="irt"))
    by_reversed = diagnostics(y, None, -theta, -b, config=DiagnosticsConfig(ordering="irt"))
    assert by_truth.model_inversion_rate < 0.3 < by_reversed.model_inversion_rate
    with pytest.raises(EngineError, match="theta and b"):
        diagnostics(y, config=DiagnosticsConfig(ordering="irt"))


# --------------------------------------------------------------------------------- Algorithm 1 (App. D)


def _brute_force_algorithm1(z, q):
    unused = list(range(z.size))
    out = []
    for qt in q:
        i = min(unused, key=lambda j: (abs(z[j] - qt), z[j]))
        unused.remove(i)
        out.append(i)
    return np.array(out)


def test_quantile_match_is_algorithm_1():
    rng = np.random.default_rng(2)
    for n, k in ((7, 3), (30, 30), (200, 57)):
        z = np.round(rng.beta(0.6, 1.5, n), 2)  # rounding creates ties
        plan = quantile_match(z, k=k)
        np.testing.assert_allclose(plan.q, (np.arange(1, k + 1) - 0.5) / k)
        ref = _brute_force_algorithm1(z, plan.q)
        np.testing.assert_allclose(z[plan.keep], z[ref])
        assert plan.keep_mask.sum() == k and len(set(plan.keep.tolist())) == k
        assert plan.weights.sum() == pytest.approx(1.0)


def test_quantile_match_hand_case_and_target():
    z = np.array([0.0, 0.1, 0.12, 0.5, 0.9, 1.0])
    plan = quantile_match(z, k=2)  # q = (.25, .75): nearest .12, then .9 (|.15| < |.25|)
    assert plan.keep.tolist() == [2, 4]
    assert plan.w1_after == pytest.approx((0.13 + 0.15) / 2)
    tgt = stats.beta(5, 2)
    plan_t = quantile_match(z, tgt, k=2)
    np.testing.assert_allclose(plan_t.q, tgt.ppf([0.25, 0.75]))
    with pytest.raises(EngineError, match="subset size"):
        quantile_match(z, k=7)


def test_calibration_reduces_w1_on_skewed_benchmarks():
    rng = np.random.default_rng(5)
    z, *_ = minmax_normalise(rng.normal(0, 1, 2000))
    plan = quantile_match(z)  # k = n / 2: W1 0.129 -> 0.069
    assert plan.w1_after < 0.6 * plan.w1_before
    sweep = calibration_sweep(z)  # smaller subsets fit the target better: k = 200 reaches 0.013
    assert sweep.k.is_monotonic_increasing and sweep.k.iloc[-1] == 2000
    assert sweep.w1_after.is_monotonic_increasing and sweep.w1_after.iloc[0] < 0.15 * plan.w1_before
    assert sweep.w1_after.iloc[-1] == pytest.approx(plan.w1_before)  # k = n keeps everything
    beta = stats.beta(2, 2)
    assert quantile_match(z, beta).w1_after < ddm(z, beta)


# ----------------------------------------------------------------------------------------- uncertainty C.6


def _small_benchmark(seed=0):
    rng = np.random.default_rng(seed)
    theta, b = rng.normal(0, 1, 25), rng.normal(0, 1, 150)
    y = (rng.random((25, 150)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    return y


def test_metric_uncertainty_laplace_and_bootstrap():
    y = _small_benchmark()
    fit = fit_1pl(y)
    cfg = UncertaintyConfig(n_draws=400, seed=3)
    lap = metric_uncertainty(fit, config=cfg)
    again = metric_uncertainty(fit, config=cfg)
    assert lap.draws.equals(again.draws)  # same seed, same draws
    report = coverage_report(fit.b)
    assert 0 < lap.ddm_sd < 0.05 and 0 < lap.max_gap_sd < 0.2
    assert abs(lap.ddm_mean - report.ddm) < 4 * lap.ddm_sd + 0.02
    assert 0.0 <= lap.prob_max_gap_exceeds_uniform <= 1.0 and lap.max_gap_ratio_median > 0
    boot = metric_uncertainty(
        fit, config=UncertaintyConfig(method="bootstrap", n_draws=30, seed=1), correct=y
    )
    assert len(boot.draws) == 30
    assert 0.3 < boot.ddm_sd / lap.ddm_sd < 3.0  # two approximations of one posterior spread
    with pytest.raises(EngineError, match="observation pattern"):
        metric_uncertainty(fit, config=UncertaintyConfig(method="bootstrap", n_draws=3))


def test_cancel_and_progress():
    y = _small_benchmark(2)
    seen = []
    fit = fit_1pl(y, progress=lambda done, total, msg: seen.append(msg))
    assert seen and all(m.startswith("1PL MAP Newton step") for m in seen)
    stop = threading.Event()
    stop.set()
    with pytest.raises(Cancelled):
        analyse(y, cancel=stop)
    with pytest.raises(Cancelled):
        metric_uncertainty(fit, cancel=stop)


def test_analyse_runs_fit_report_and_diagnostics():
    y = _small_benchmark(1)
    a = analyse(y, k=3)
    assert a.fit.converged and a.report.k == 3 and a.diagnostics.n_items == 150
    np.testing.assert_allclose(a.report.normalised, minmax_normalise(a.fit.b)[0])
