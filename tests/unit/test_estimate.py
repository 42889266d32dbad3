"""Full-benchmark accuracy from a few items (issue 34): the estimator, its interval's coverage on held-out models,
the misfit variance and the estimation subsets (benchloupe.engine.estimate)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchloupe.engine import estimate as E
from benchloupe.engine.common import EngineError
from tests.conftest import need_shared


def _world(seed=0, n_models=2400, n_items=200, chance=0.25, misfit=0.0):
    """Responses simulated from the 3PL with known chance; ``misfit`` > 0 gives every model a second ability on
    half the items (sd ``misfit`` around its first): a person misfit the 1-D curves cannot explain."""
    rng = np.random.default_rng(seed)
    a = np.exp(rng.normal(0.2, 0.35, n_items))
    b = rng.normal(0, 1.2, n_items)
    c = np.full(n_items, chance)
    theta = rng.normal(0, 1, n_models)
    th2 = np.where(np.arange(n_items)[None, :] < n_items // 2, theta[:, None],
                   theta[:, None] + misfit * rng.normal(size=(n_models, 1)))
    p = c + (1 - c) / (1 + np.exp(-a * (th2 - b)))
    y = (rng.random(p.shape) < p).astype(float)
    return a, b, c, theta, y, p


def _held_out(y, theta, a, b, c, n_train=1200, tau=True):
    cal = E.calibration(a, b, c, theta[:n_train])
    if tau:
        cal.tau2 = E.misfit_variance(cal, y[:n_train], np.ones_like(y[:n_train], bool))
    return cal, y[n_train:]


def _random_mask(shape, k, seed):
    rng = np.random.default_rng(seed)
    m = np.zeros(shape, bool)
    for i in range(shape[0]):
        m[i, rng.choice(shape[1], k, replace=False)] = True
    return m


@pytest.mark.parametrize("k", [10, 40])
def test_interval_covers_the_true_accuracy_of_held_out_models(k):
    a, b, c, theta, y, _ = _world()
    cal, te = _held_out(y, theta, a, b, c)
    mask = _random_mask(te.shape, k, 1)
    est = E.estimate(cal, te, mask)
    truth = te.mean(axis=1)
    cover = np.mean((truth >= est.lo) & (truth <= est.hi))
    assert 0.93 <= cover <= 0.975, cover
    # the estimate beats the plain mean of the same items
    assert np.mean(np.abs(est.accuracy - truth)) < 0.85 * np.mean(np.abs(est.observed - truth))


def test_misfit_is_measured_and_the_interval_still_covers():
    a, b, c, theta, y, _ = _world(seed=4)  # the 3PL's own data: no misfit to find
    assert E.misfit_variance(E.calibration(a, b, c, theta[:1200]), y, np.ones_like(y, bool)) < 1e-4
    a, b, c, theta, y, _ = _world(seed=3, misfit=0.8)  # two abilities: the 1-D curves miss part of each model
    cal, te = _held_out(y, theta, a, b, c)
    assert cal.tau2 > 2e-4
    truth = te.mean(axis=1)
    for k in (20, 60, 150):
        est = E.estimate(cal, te, _random_mask(te.shape, k, 2))
        assert 0.93 <= np.mean((truth >= est.lo) & (truth <= est.hi)) <= 0.975


def test_a_fully_answered_model_gets_its_observed_accuracy_and_no_width():
    a, b, c, theta, y, _ = _world(n_models=300, n_items=60)
    cal = E.calibration(a, b, c, theta, tau2=1e-3)
    est = E.estimate(cal, y[:5], np.ones((5, 60), bool))
    assert np.allclose(est.accuracy, y[:5].mean(axis=1), atol=1e-9)
    assert np.allclose(est.lo, est.accuracy, atol=1e-6) and np.allclose(est.hi, est.accuracy, atol=1e-6)


def test_seen_items_count_as_observed_and_more_items_narrow_the_interval():
    a, b, c, theta, y, _ = _world(n_models=400, n_items=100)
    cal = E.calibration(a, b, c, theta)
    widths = [float(np.mean(E.estimate(cal, y, _random_mask(y.shape, k, 0)).hi
                            - E.estimate(cal, y, _random_mask(y.shape, k, 0)).lo)) for k in (10, 30, 90)]
    assert widths[0] > widths[1] > widths[2]


def test_bad_input_is_refused():
    a, b, c, theta, y, _ = _world(n_models=50, n_items=30)
    cal = E.calibration(a, b, c, theta)
    m = np.ones((2, 30), bool)
    m[1] = False
    with pytest.raises(EngineError, match="answered none"):
        E.estimate(cal, y[:2], m)
    with pytest.raises(EngineError, match="items"):
        E.estimate(cal, y[:2, :10], m[:, :10])
    with pytest.raises(EngineError, match="k must lie"):
        E.curve_points(cal, 31)
    with pytest.raises(EngineError, match="k must lie"):
        E.anchor_points(cal, 0)
    with pytest.raises(EngineError, match="finite"):
        E.calibration(np.array([1.0, np.nan]), np.zeros(2), None, theta)


@pytest.mark.parametrize("pick", [E.anchor_points, E.curve_points])
def test_estimation_subsets_are_k_distinct_items_with_cluster_weights(pick):
    a, b, c, theta, y, _ = _world(n_models=300, n_items=120)
    cal = E.calibration(a, b, c, theta)
    sel = pick(cal, 15, seed=1)
    assert len(np.unique(sel.items)) == 15 and np.isclose(sel.weights.sum(), 1) and np.all(sel.weights > 0)
    assert np.array_equal(sel.items, pick(cal, 15, seed=1).items)  # seeded


def test_curve_subset_with_its_weights_beats_a_random_subset_on_average():
    a, b, c, theta, y, _ = _world(seed=5)
    cal, te = _held_out(y, theta, a, b, c)
    truth = te.mean(axis=1)
    sel = E.curve_points(cal, 20)
    m = np.zeros(te.shape, bool)
    m[:, sel.items] = True
    curve = E.estimate(cal, te, m, weights=E.full_weights(sel, cal.n_items))
    rnd = E.estimate(cal, te, _random_mask(te.shape, 20, 9))
    assert np.mean(np.abs(curve.accuracy - truth)) < np.mean(np.abs(rnd.accuracy - truth))


def test_plain_estimators_and_gp_lambda():
    a, b, c, theta, y, _ = _world(n_models=600, n_items=80)
    cal = E.calibration(a, b, c, theta[:300])
    m = _random_mask((300, 80), 20, 3)
    out = E.plain_estimators(cal, y[300:], m)
    truth = y[300:].mean(axis=1)
    assert np.allclose(out["mean"], (y[300:] * m).sum(axis=1) / 20)
    assert np.mean(np.abs(out["pirt"] - truth)) < np.mean(np.abs(out["mean"] - truth))
    lam = E.gp_lambda(out["mean"], out["pirt"], truth)
    assert 0 <= lam < 0.5
    assert E.gp_lambda(truth, out["pirt"], truth) == 1.0  # a perfect mean takes all the weight


def test_metabench_arc_held_out_coverage():
    """Real data (Open LLM Leaderboard ARC, 100 items): 2PL calibrated on 400 models, 200 others with 25 random
    items each; the interval covers 93-98 % and the error beats the plain mean."""
    path = need_shared("data", "metabench", "arc-2PL-MAP-0.005-seed=1.responses.csv.gz")
    from benchloupe.engine.joint import JointConfig, StaticData, fit_joint

    y = pd.read_csv(path, index_col=0).to_numpy(float)
    rows = np.random.default_rng(0).permutation(len(y))[:1000]
    tr, te = y[rows[:600]], y[rows[600:]]
    res = fit_joint(StaticData(tr.astype(np.int8), np.ones_like(tr, bool)), None, JointConfig(mode="static"))
    cal = E.calibration(res.a_static, res.b_static, None, res.theta)
    cal.tau2 = E.misfit_variance(cal, tr, np.ones_like(tr, bool))
    m = _random_mask(te.shape, 25, 4)
    est = E.estimate(cal, te, m)
    truth = te.mean(axis=1)
    cover = np.mean((truth >= est.lo) & (truth <= est.hi))
    assert 0.92 <= cover <= 0.985, cover
    assert np.mean(np.abs(est.accuracy - truth)) < 0.8 * np.mean(np.abs(est.observed - truth))


def test_interval_scale_replays_the_patterns_on_the_calibration_models():
    a, b, c, theta, y, _ = _world(seed=7)
    cal, te = _held_out(y, theta, a, b, c)
    mask = _random_mask(te.shape, 25, 5)
    sc = E.interval_scale(cal, y[:1200], np.ones((1200, 200), bool), mask)
    assert E.SCALE_RANGE[0] <= sc <= E.SCALE_RANGE[1]
    truth = te.mean(axis=1)
    est = E.estimate(cal, te, mask, scale=sc)
    assert 0.93 <= np.mean((truth >= est.lo) & (truth <= est.hi)) <= 0.975
    wide = E.estimate(cal, te, mask, scale=1.4)
    assert np.all(wide.hi - wide.lo >= est.hi - est.lo - 1e-12) or sc > 1.4
    assert E.interval_scale(cal, y[:20], np.ones((20, 200), bool), mask) == 1.0  # too few full models: no change


def test_interval_scale_is_the_conformal_quantile_of_the_replayed_ratios():
    """The replay's stretch makes the interval cover ``level`` of the replayed models, all of them up to 1,000
    (split conformal: the ceil((n + 1) 0.95)-th smallest ratio).  The rule before it aimed at 96.7 % on 400 of
    them, and held out its intervals covered 97.3 % at ARC and GSM8K k = 50 (docs/ESTIMATE.md); here it covered
    97.0 % of the 900 replayed models (873)."""
    assert E.conformal_quantile(np.arange(1.0, 20.0)) == 19.0  # rank ceil(20 x .95) = 19 of 19
    assert E.conformal_quantile(np.arange(1.0, 11.0)) == 10.0  # rank 11 of 10: the largest
    a, b, c, theta, y, _ = _world(seed=7)
    cal, _ = _held_out(y, theta, a, b, c)
    full = y[:900]
    sel = E.curve_points(cal, 25)
    w = E.full_weights(sel, 200)
    sub = np.zeros((900, 200), bool)
    sub[:, sel.items] = True
    sc = E.interval_scale(cal, full, np.ones_like(sub), sub[:1], weights=w)
    assert E.SCALE_RANGE[0] < sc < E.SCALE_RANGE[1]
    est = E.estimate(cal, full, sub, weights=w, scale=sc)
    truth = full.mean(axis=1)
    covered = np.sum((truth >= est.lo - 1e-12) & (truth <= est.hi + 1e-12))
    assert covered in (856, 857), covered  # ceil(901 x .95) = 856 of 900 (857: a tie at the quantile)


def test_group_bootstrap_widens_the_interval_when_groups_move_together():
    """Items of a group share a model-specific shift: the clustered interval is wider than the item-level one, and
    with one item per group it agrees with it."""
    from benchloupe.engine.compare import group_bootstrap, paired

    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(20), 15)
    shift = rng.normal(0, 0.25, 20)[groups]
    ya = (rng.random(300) < 0.6 + shift).astype(float)
    yb = (rng.random(300) < 0.6 - shift).astype(float)
    plain = paired(ya, yb)
    gb = group_bootstrap(ya, yb, groups)
    assert gb["difference"] == pytest.approx(plain["difference"])
    assert gb["difference_hi"] - gb["difference_lo"] > 1.5 * (plain["difference_hi"] - plain["difference_lo"])
    single = group_bootstrap(ya, yb, np.arange(300))
    assert single["difference_hi"] - single["difference_lo"] == pytest.approx(
        plain["difference_hi"] - plain["difference_lo"], rel=0.15)
    with pytest.raises(EngineError, match="two item groups"):
        group_bootstrap(ya, yb, np.zeros(300))


def test_adaptive_stretch_is_measured_on_models_the_items_were_not_fitted_on():
    """A world where the in-sample stretch undercovers: 60 calibration models for 250 items (2PL answers, no
    misfit), so the fitted sharpness of many items is overstated by the very models it was fitted on, and the
    adaptive test takes exactly those items.  Replaying the pilot's item patterns on the calibration's own models
    (the stretch before the out-of-sample pilot) saw small errors there: pooled over four seeded worlds, 1,200
    held-out models, it covered 90.1 % (stretches 0.97-1.11).  The cross-fitted pilot (each group's items refitted
    without it) sees the overstatement: 92.7 % (stretches 1.07-1.21); no stretch: 88.8 %."""
    from benchloupe.engine import estimate_validate as ev

    covered = []
    for seed in (1, 2, 3, 4):
        *_, y, _ = _world(seed=seed, n_models=360, n_items=250, chance=0.0)
        train, test = y[:60], y[60:]
        cal, _, _ = ev.fold_calibration(train, np.ones_like(train, bool), None)
        sc = ev.cat_scale(train, np.ones_like(train, bool), None, target_se=0.02, seed=1)
        r = E.simulate_cat(cal, test, target_se=0.02, scale=sc)
        covered.append((r.truth >= r.lo) & (r.truth <= r.hi))
    assert 0.92 <= np.mean(covered) <= 0.975


def test_the_adaptive_pilot_takes_up_to_800_models_in_groups_of_100():
    """The stretch is the first crossing of a flat, noisy coverage curve, which lands early when the curve is
    estimated on few models: 400 pilot models in 4 groups gave TruthfulQA stretches of 1.58-2.40 between folds and
    93.4 % held out; every training model up to 800, in groups of 100 (each pilot calibration still leaves out 100),
    gave 1.98-2.24 and 94.0 % on the same held-out models (docs/ESTIMATE.md).  Small sets keep 4 groups."""
    from benchloupe.engine import estimate_validate as ev

    groups = ev.pilot_groups(np.arange(1000), seed=3)
    assert [len(g) for g in groups] == [100] * 8 and len(np.unique(np.concatenate(groups))) == 800
    assert [len(g) for g in ev.pilot_groups(np.arange(400))] == [100] * 4
    assert [len(g) for g in ev.pilot_groups(np.arange(60))] == [15] * 4
    assert sorted(np.concatenate(ev.pilot_groups(np.arange(60)))) == list(range(60))


def test_adaptive_testing_stops_at_the_target_and_beats_as_many_random_items():
    """The simulated study of docs/ESTIMATE.md, small: 3PL answers with guessing and a person misfit, items fitted
    as a 2PL without chance levels (the tails it misses are the items an adaptive test leaves unseen).  The
    stretch from the cross-fitted out-of-sample pilot keeps the held-out coverage in 93-97 %.  This world does not
    separate it from the in-sample replay it replaced (both cover here):
    ``test_adaptive_stretch_is_measured_on_models_the_items_were_not_fitted_on`` does."""
    from benchloupe.engine import estimate_validate as ev

    a, b, c, theta, y, _ = _world(seed=11, n_models=1600, n_items=80, misfit=0.3)
    train, test = y[:1000], y[1000:]
    cal, _, _ = ev.fold_calibration(train, np.ones_like(train, bool), None)
    sc = ev.cat_scale(train, np.ones_like(train, bool), None, target_se=0.02, seed=1)
    assert 0.75 <= sc <= 6
    r = E.simulate_cat(cal, test, target_se=0.02, scale=sc)
    assert r.reached.all() and (r.sd <= 0.02).all() and np.median(r.items) < 70
    assert 0.93 <= np.mean((r.truth >= r.lo) & (r.truth <= r.hi)) <= 0.97
    rnd = np.zeros(r.mask.shape, bool)
    rng = np.random.default_rng(0)
    for i, k in enumerate(r.items):
        rnd[i, rng.choice(80, int(k), replace=False)] = True
    e = E.estimate(cal, test, rnd)
    assert np.mean(np.abs(r.accuracy - r.truth)) < np.mean(np.abs(e.accuracy - r.truth))
    nxt = E.next_items(cal, test[:2], r.mask[:2], 3)
    assert nxt.shape == (2, 3) and not r.mask[0, nxt[0]].any()
