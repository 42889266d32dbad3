"""Fisher scores and subset recovery (paper 000, section 4.2)."""

from __future__ import annotations

import numpy as np
import pytest

from benchloupe.engine.common import EngineError
from benchloupe.engine.informativeness import (
    fisher_scores,
    lowest_information,
    subset_recovery,
    summarise_recovery,
    top_fisher_subset,
)
from benchloupe.engine.joint import JointConfig, fit_joint, pair_probabilities
from tests.unit._chembench import chembench_static
from tests.unit._joint_sim import simulate


@pytest.fixture(scope="module")
def fitted():
    truth, S, A = simulate(18, 120, 80, seed=7)
    return S, A, fit_joint(S, A, JointConfig())


def test_fisher_scores_follow_section_4_2_formulas(fitted):
    S, A, res = fitted
    cfg = JointConfig(lambda_static=2.0, lambda_pref=0.5)
    sc = fisher_scores(res, S, A, cfg)
    assert sc.shape == (120 + 80,)
    p = res.p_static()
    q = 3
    expected = 2.0 * np.mean(res.a_static[q] ** 2 * p[:, q] * (1 - p[:, q]))
    assert sc[q] == pytest.approx(expected, rel=1e-12)
    # arena prompt 5: brute-force average over its decisive pairs of the trace formula
    pr = res.pairs
    sel = (pr.prompt == 5) & pr.decisive
    P = res.p_arena()
    mu = pair_probabilities(res)[sel]
    a = res.a_arena[5]
    pi, pj = P[pr.i[sel], 5], P[pr.j[sel], 5]
    info = mu * (1 - mu) * res.gamma ** 2 * ((a * pi * (1 - pi)) ** 2 + (a * pj * (1 - pj)) ** 2)
    assert sc[120 + 5] == pytest.approx(0.5 * info.mean(), rel=1e-12)
    assert np.all(sc >= 0)


def test_subset_selection_helpers():
    s = np.array([0.1, 0.9, 0.5, 0.3])
    np.testing.assert_array_equal(top_fisher_subset(s, 0.5), [1, 2])
    np.testing.assert_array_equal(top_fisher_subset(s, 0.01), [1])  # at least one item
    np.testing.assert_array_equal(lowest_information(s, 2), [0, 3])
    with pytest.raises(EngineError):
        top_fisher_subset(s, 0.0)


def test_subset_recovery_table_and_full_fraction(fitted):
    S, A, res = fitted
    tab = subset_recovery(res, S, A, fractions=(0.1, 1.0), seeds=(0, 1))
    assert set(tab.strategy) == {"targeted", "targeted_log", "top_fisher", "top_sharpness", "difficulty_matched", "random",
                                 "random_2pl_bt"}
    full = tab[(tab.fraction == 1.0) & (tab.strategy != "random_2pl_bt")]
    # all items, frozen items: the refit must reproduce the full-data ranking almost exactly
    assert full.spearman.min() > 0.98
    summ = summarise_recovery(tab)
    assert {"spearman_mean", "kendall_mean"} <= set(summ.columns)
    top = summ[(summ.strategy == "top_fisher") & (summ.fraction == 0.1)].spearman_mean.iloc[0]
    rnd = summ[(summ.strategy == "random") & (summ.fraction == 0.1)].spearman_mean.iloc[0]
    assert top > 0.8 and top >= rnd - 0.05


def test_subset_recovery_refits_each_distinct_subset_once(fitted):
    """Issue 26: at 100 % every strategy and seed selects every item; the curve refits that subset once per kind
    (frozen items; the 2PL+BT baseline) and the rows share its numbers, equal to a refit of their own."""
    from benchloupe.engine.informativeness import kendall, recovery_refits, spearman
    from benchloupe.engine.joint.optimise import fit_abilities

    S, A, res = fitted
    tab = subset_recovery(res, S, A, fractions=(0.1, 1.0), seeds=(0, 1, 2))
    full = tab[tab.fraction == 1.0]
    frozen, base = full[full.strategy != "random_2pl_bt"], full[full.strategy == "random_2pl_bt"]
    assert frozen.reused.tolist() == [False] + [True] * (len(frozen) - 1)
    assert base.reused.tolist() == [False, True, True]
    own = fit_abilities(S, A, res, res.config)
    assert frozen.spearman.tolist() == [spearman(own, res.theta)] * len(frozen)
    assert frozen.kendall.tolist() == [kendall(own, res.theta)] * len(frozen)
    assert not tab[tab.fraction == 0.1].reused.any()  # different subsets: each its own refit
    counts = recovery_refits(tab)
    assert counts["frozen_item_refits"] == (tab.strategy != "random_2pl_bt").sum() - (len(frozen) - 1)
    assert counts["subset_2pl_fits"] == 3 + 1 and counts["rows_reusing_an_earlier_refit"] == len(frozen) - 1 + 2


@pytest.mark.shared_data
def test_chembench_top10_fisher_recovers_ranking():
    """Issue 3: the top-10 % Fisher subset recovers the full-data ChemBench ranking at Spearman >= 0.9."""
    S = chembench_static()
    res = fit_joint(S, None, JointConfig(mode="static"))
    tab = subset_recovery(res, S, None, fractions=(0.10,), strategies=("top_fisher",))
    assert tab.spearman.iloc[0] >= 0.9


def test_random_2pl_bt_is_scored_against_full_dualeval_by_default(fitted):
    from benchloupe.engine.informativeness import _baseline_scores
    from benchloupe.engine.stats import spearman

    S, A, res = fitted
    tab = subset_recovery(res, S, A, fractions=(0.2,), strategies=("random_2pl_bt",), seeds=(0,))
    own = subset_recovery(res, S, A, fractions=(0.2,), strategies=("random_2pl_bt",), seeds=(0,),
                          baseline_reference="own")
    n = 200
    idx = np.random.default_rng(0).choice(n, int(np.ceil(0.2 * n)), replace=False)
    s_sel, a_sel = np.zeros(120, bool), np.zeros(80, bool)
    s_sel[idx[idx < 120]] = True
    a_sel[idx[idx >= 120] - 120] = True
    est = _baseline_scores(S, A, res.config, s_sel, a_sel)
    assert tab.spearman.iloc[0] == pytest.approx(spearman(est, res.theta))
    full = _baseline_scores(S, A, res.config, np.ones(120, bool), np.ones(80, bool))
    assert own.spearman.iloc[0] == pytest.approx(spearman(est, full))
    with pytest.raises(EngineError):
        subset_recovery(res, S, A, fractions=(0.2,), strategies=("random",), baseline_reference="x")


def test_information_matrix_means_are_the_fisher_scores(fitted):
    from benchloupe.engine.informativeness import information_matrix

    S, A, res = fitted
    info = information_matrix(res, S, A)
    np.testing.assert_allclose(info.mean(axis=0), fisher_scores(res, S, A), rtol=1e-10, atol=1e-14)


def test_target_weights_and_errors():
    from benchloupe.engine.informativeness import target_weights

    th = np.array([0.0, 2.0, -1.0, np.nan, 1.0])
    np.testing.assert_array_equal(target_weights(th, "all"), [1, 1, 1, 0, 1])
    np.testing.assert_array_equal(target_weights(th, "top:2"), [0, 1, 0, 0, 1])
    np.testing.assert_array_equal(target_weights(th, "theta:-0.5,1.5"), [1, 0, 0, 0, 1])
    for bad in ("top:x", "top:1", "theta:5,6", "nope"):
        with pytest.raises(EngineError):
            target_weights(th, bad)


def _crowded(seed=0, n_items=300):
    """Most models in a narrow ability band, a few spread far; item difficulties wide (real-leaderboard shape)."""
    from benchloupe.engine.joint import StaticData

    rng = np.random.default_rng(seed)
    theta = np.concatenate([rng.normal(0, 0.3, 160), rng.normal(0, 2.0, 40)])
    b, a = rng.normal(0, 1.5, n_items), np.exp(rng.normal(0.3, 0.4, n_items))
    p = 1 / (1 + np.exp(-a * (theta[:, None] - b)))
    y = (rng.random(p.shape) < p).astype(float)
    return theta, StaticData(y, np.ones_like(y, bool))


def test_targeted_order_spreads_over_the_target_range_and_beats_random():
    from benchloupe.engine.informativeness import targeted_order

    theta, S = _crowded()
    res = fit_joint(S, None, JointConfig(mode="static"))
    tab = subset_recovery(res, S, None, fractions=(0.05, 0.1, 0.3), strategies=("targeted", "targeted_log", "random"),
                          seeds=tuple(range(5)))
    s = summarise_recovery(tab).pivot(index="fraction", columns="strategy", values="spearman_mean")
    assert (s["targeted"] > s["random"]).all() and (s["targeted_log"] > s["random"]).all()
    # targeting the top 20 models puts the subset's difficulties among the top models' abilities
    from benchloupe.engine.informativeness import information_matrix, target_weights

    order = targeted_order(information_matrix(res, S), target_weights(res.theta, "top:20"))
    top_lo = np.sort(res.theta)[-20]
    assert np.median(res.b_static[order[:30]]) > np.median(res.b_static)
    assert np.median(res.b_static[order[:30]]) > top_lo - 1.0
    assert sorted(order) == list(range(S.shape[1]))  # a full nested order


def _greedy_by_hand(info, w, eps, criterion):
    """Plain greedy, every gain recomputed at every step (the definition the lazy order must equal)."""
    keep = w > 0
    info, w = info[keep], w[keep] / w[keep].sum()
    cur = np.full(info.shape[0], max(eps, 1e-12))
    left, order = list(range(info.shape[1])), []
    while left:
        x = info[:, left]
        c = cur[:, None]
        g = w @ (np.log1p(x / c) if criterion == "log" else 1 / c - 1 / (c + x))
        best = left[int(np.argmax(g))]  # the first of equal gains: the smallest index, as the heap breaks ties
        order.append(best)
        left.remove(best)
        cur += info[:, best]
    return order


@pytest.mark.parametrize("criterion", ["log", "rank"])
def test_targeted_order_is_the_plain_greedy_order(criterion):
    """The lazy order (batched re-evaluations of stale gains, items as contiguous rows; issue 26: the one-at-a-time
    re-evaluation was 5.9 s of a 2,000 x 5,000 compress) picks what the plain greedy picks, step by step, on
    generated cases with tied items, zero-weight models and items of no information."""
    from benchloupe.engine.informativeness import targeted_order

    rng = np.random.default_rng(7)
    for case in range(12):
        m, n = int(rng.integers(2, 40)), int(rng.integers(1, 90))
        info = rng.gamma(0.5, 0.2, (m, n)) * (rng.random((m, n)) < 0.8)
        if n > 3:
            info[:, 1] = info[:, 0]  # a tied pair
            info[:, 2] = 0.0  # an item no model learns from
        w = rng.random(m) * (rng.random(m) < 0.8)
        w[0] = max(w[0], 0.1)
        eps = float(rng.choice([0.05, 1.0, 3.0]))
        got = targeted_order(info, w, eps, criterion=criterion).tolist()
        assert got == _greedy_by_hand(info, w, eps, criterion), case


def test_targeted_order_with_a_limit_is_the_first_items_of_the_whole_order():
    """``compress --validate`` asks for 100 of 14,000 items: the greedy stops there, with the same first items."""
    from benchloupe.engine.informativeness import targeted_order

    rng = np.random.default_rng(3)
    info, w = rng.random((120, 400)), rng.random(120)
    for criterion in ("log", "rank"):
        whole = targeted_order(info, w, 1.0, criterion=criterion)
        part = targeted_order(info, w, 1.0, criterion=criterion, limit=25)
        assert len(whole) == 400 and np.array_equal(part, whole[:25])
