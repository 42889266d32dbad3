"""The audit's own Kendall tau-b, average ranks and binomial sign test agree with scipy.stats (issue 13: the audit
no longer imports scipy.stats; scipy is imported here only as the reference)."""

import numpy as np
import pytest
from scipy import stats

from benchloupe.engine.neartie.exactstats import average_ranks, binomial_sf_greater, kendall_tau_b


@pytest.mark.parametrize("seed", range(12))
def test_tau_b_equals_scipy_bit_for_bit_with_and_without_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 900))
    levels = [3, 10, 50, 10**9][seed % 4]  # heavy ties ... no ties
    x = rng.integers(0, levels, n) / 7.0
    y = x + rng.integers(0, levels, n) / 3.0 if seed % 3 else rng.integers(0, levels, n) / 5.0
    assert kendall_tau_b(x, y) == scipy_tau(x, y)


def scipy_tau(x, y):
    return float(stats.kendalltau(x, y, variant="b").statistic)


def test_tau_b_edge_cases():
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == -1.0
    assert kendall_tau_b([1, 2, 3], [1, 2, 3]) == 1.0
    assert np.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))  # a constant vector: undefined, as scipy
    assert np.isnan(kendall_tau_b([], []))
    x = np.array([0.5, 0.5, 0.2, 0.9, 0.9, 0.1])
    y = np.array([0.3, 0.3, 0.3, 0.1, 0.8, 0.8])
    assert kendall_tau_b(x, y) == scipy_tau(x, y)
    with pytest.raises(ValueError):
        kendall_tau_b([1, 2], [1])


@pytest.mark.parametrize("seed", range(6))
def test_average_ranks_equal_rankdata(seed):
    rng = np.random.default_rng(seed)
    v = rng.integers(0, [2, 5, 100, 10**6, 3, 40][seed], int(rng.integers(1, 500))).astype(float)
    np.testing.assert_array_equal(average_ranks(v), stats.rankdata(v))


@pytest.mark.parametrize(("k", "n", "p"), [(0, 10, 0.5), (7, 10, 0.5), (10, 10, 0.5), (31, 50, 0.5), (3, 20, 0.3),
                                            (120, 200, 0.5)])
def test_binomial_sf_matches_binomtest(k, n, p):
    ref = stats.binomtest(k, n, p, alternative="greater").pvalue
    assert binomial_sf_greater(k, n, p) == pytest.approx(ref, rel=1e-12, abs=1e-300)
    with pytest.raises(ValueError):
        binomial_sf_greater(n + 1, n)
