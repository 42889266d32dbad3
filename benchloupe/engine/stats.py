"""Small statistics shared by several engine methods: rank correlations and detection metrics.

Helpers append functions here; each works on finite entries common to its inputs.
"""

from __future__ import annotations

import numpy as np


def _scipy_stats():
    """scipy.stats, imported on first use: ~0.35 s that a command using none of these (``anomalies`` without a
    protocol or stored truth) should not pay at start-up (issue 26)."""
    from scipy import stats

    return stats


def _common_finite(a, b):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    return a[ok], b[ok]


def spearman(a, b) -> float:
    """Spearman rank correlation over entries finite in both; NaN with fewer than 3 or a constant input."""
    x, y = _common_finite(a, b)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(_scipy_stats().spearmanr(x, y).statistic)


def kendall(a, b) -> float:
    """Kendall tau-b over entries finite in both; NaN with fewer than 3 or a constant input."""
    x, y = _common_finite(a, b)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(_scipy_stats().kendalltau(x, y).statistic)


def auroc(scores, labels) -> float:
    """P(s+ > s-) + P(s+ = s-)/2 via average ranks (Mann-Whitney; paper 000 Appendix K)."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    r = _scipy_stats().rankdata(s)
    return float((r[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def auprc(scores, labels) -> float:
    """Average precision: sum over positives of precision at their score threshold (>=, ties grouped)."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=bool)
    n_pos = int(y.sum())
    if n_pos == 0:
        return float("nan")
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]
    tp = np.cumsum(y)
    last = np.r_[s[1:] != s[:-1], True]  # end of each tie group
    tp_g = tp[last]
    n_g = np.flatnonzero(last) + 1
    d_tp = np.diff(np.r_[0, tp_g])
    return float(np.sum(d_tp * tp_g / n_g) / n_pos)
