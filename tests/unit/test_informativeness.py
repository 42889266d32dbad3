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
    assert set(tab.strategy) == {"top_fisher", "top_sharpness", "difficulty_matched", "random", "random_2pl_bt"}
    full = tab[(tab.fraction == 1.0) & (tab.strategy != "random_2pl_bt")]
    # all items, frozen items: the refit must reproduce the full-data ranking almost exactly
    assert full.spearman.min() > 0.98
    summ = summarise_recovery(tab)
    assert {"spearman_mean", "kendall_mean"} <= set(summ.columns)
    top = summ[(summ.strategy == "top_fisher") & (summ.fraction == 0.1)].spearman_mean.iloc[0]
    rnd = summ[(summ.strategy == "random") & (summ.fraction == 0.1)].spearman_mean.iloc[0]
    assert top > 0.8 and top >= rnd - 0.05


@pytest.mark.shared_data
def test_chembench_top10_fisher_recovers_ranking():
    """Issue 3: the top-10 % Fisher subset recovers the full-data ChemBench ranking at Spearman >= 0.9."""
    S = chembench_static()
    res = fit_joint(S, None, JointConfig(mode="static"))
    tab = subset_recovery(res, S, None, fractions=(0.10,), strategies=("top_fisher",))
    assert tab.spearman.iloc[0] >= 0.9
