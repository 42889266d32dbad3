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
