"""Is model A really better than model B on a benchmark? (issue 34, part 4)

On the items both answered: the exact McNemar test (under H0 the discordant items split 50/50: a two-sided
binomial test on the A-right-B-wrong count among the discordant ones), and the paired difference in accuracy with
a normal interval from the per-item differences (their sd / sqrt(n)).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import binomtest, norm

from benchloupe.engine.common import EngineError


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p: the binomial test of ``a_only`` successes in ``a_only + b_only`` at 1/2."""
    n = int(a_only) + int(b_only)
    return 1.0 if n == 0 else float(binomtest(int(a_only), n, 0.5).pvalue)


def paired(ya: np.ndarray, yb: np.ndarray, level: float = 0.95) -> dict:
    """The paired comparison on common items (0/1 arrays of the same length)."""
    ya = np.asarray(ya, float)
    yb = np.asarray(yb, float)
    n = len(ya)
    if n == 0:
        raise EngineError("the two models have no item in common to compare on")
    d = ya - yb
    a_only, b_only = int(((ya == 1) & (yb == 0)).sum()), int(((ya == 0) & (yb == 1)).sum())
    diff = float(d.mean())
    se = float(d.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    z = float(norm.ppf((1 + level) / 2))
    return {"common_items": n, "accuracy_a": float(ya.mean()), "accuracy_b": float(yb.mean()), "difference": diff,
            "difference_lo": diff - z * se, "difference_hi": diff + z * se, "a_only": a_only, "b_only": b_only,
            "mcnemar_p": mcnemar_exact(a_only, b_only)}


def group_bootstrap(ya: np.ndarray, yb: np.ndarray, groups: np.ndarray, *, B: int = 2000, seed: int = 0,
                    level: float = 0.95) -> dict:
    """The paired difference's interval from a bootstrap clustered by item group: groups are drawn with
    replacement (all their common items with them), so items of one source that move together are not counted as
    independent.  Percentile interval and the two-sided share of replicates on the other side of 0."""
    d = np.asarray(ya, float) - np.asarray(yb, float)
    labels, inv = np.unique(np.asarray(groups, object).astype(str), return_inverse=True)
    G = len(labels)
    if G < 2:
        raise EngineError("a clustered bootstrap needs at least two item groups")
    sums = np.bincount(inv, weights=d, minlength=G)
    counts = np.bincount(inv, minlength=G).astype(float)
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, G, size=(B, G))
    reps = sums[draw].sum(axis=1) / counts[draw].sum(axis=1)
    lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    diff = float(d.mean())
    other = float(np.mean(reps <= 0)) if diff > 0 else float(np.mean(reps >= 0))
    return {"groups": int(G), "replicates": int(B), "difference": diff, "difference_lo": float(lo),
            "difference_hi": float(hi), "p_two_sided": min(1.0, 2 * other)}
