"""The mean item response curve ``m(theta) = mean_j [c_j + (1 - c_j) sigmoid(a_j (theta - b_j))]`` of a calibration
as a table of Taylor expansions, for the many abilities ``compress --validate`` asks it at (issue 34).

The plain estimators (:func:`benchloupe.engine.estimate.plain_estimators`) need ``m`` at every model's MAP ability,
for the training and the held-out models of every size and selection of every fold: 32 times 2,001 abilities a
fold, each a pass over all 14,000 items (a quarter of a 2,000 x 14,000 ``--validate``).  Here ``m`` and its first
four derivatives are evaluated once, on a uniform grid over the calibration's ability grid, and ``m`` anywhere in
it is the order-4 Taylor polynomial about the nearest grid point (blocks of the grid computed when first needed).  The step is chosen so that the remainder
``|m^(5)| (step / 2)^5 / 5!`` is below :data:`TOLERANCE`, with ``|m^(5)| <= mean_j (1 - c_j) |a_j|^5 / 4`` (the
logistic's fifth derivative is at most 1/4): the values are the direct ones to 1e-13, inside the 1e-12 to which
``tests/unit/test_estimate_same_numbers.py`` holds every number of ``--validate`` to the code before.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

TOLERANCE = 1e-13
MAX_POINTS = 20_000  # sharper items than this allows are evaluated directly (the table would cost more)
BLOCK = 64  # grid points computed together, when an ability first falls among them


class MeanCurve:
    """The table of ``m`` over ``[lo, hi]`` (:func:`table`), its blocks of grid points computed as abilities first
    fall in them (the abilities of a calibration's models cover half of its grid); :meth:`at` evaluates it."""

    def __init__(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, lo: float, step: float, n: int):
        self.a, self.b, self.c, self.lo, self.step = a, b, c, lo, step
        self.w = 1.0 - c
        self.wa = [self.w * a**r for r in range(5)]  # (1 - c) a^r: the r-th derivative's factor
        self.base = float(np.mean(c))
        self.coef = np.empty((n, 5))
        self.ready = np.zeros(-(-n // BLOCK), bool)

    def inside(self, theta: np.ndarray) -> np.ndarray:
        """Which abilities the table covers."""
        return (theta >= self.lo) & (theta <= self.lo + self.step * (len(self.coef) - 1))

    def at(self, theta: np.ndarray) -> np.ndarray:
        """``m(theta)`` for abilities :meth:`inside` the table."""
        i = np.clip(np.rint((theta - self.lo) / self.step).astype(np.intp), 0, len(self.coef) - 1)
        for blk in np.unique(i // BLOCK):
            if not self.ready[blk]:
                self._fill(int(blk))
        d = theta - (self.lo + self.step * i)
        c = self.coef[i]
        return c[:, 0] + d * (c[:, 1] + d * (c[:, 2] + d * (c[:, 3] + d * c[:, 4])))

    def _fill(self, blk: int) -> None:
        """m and its derivatives / r! at one block's grid points: sigmoid's derivatives are v, v t, v (1 - 6 v) and
        v t (1 - 12 v) (v = s (1 - s), t = 1 - 2 s), each times (1 - c) a^r, averaged over the items."""
        rows = slice(blk * BLOCK, min((blk + 1) * BLOCK, len(self.coef)))
        g = self.lo + self.step * np.arange(rows.start, rows.stop)
        s = expit(self.a * (g[:, None] - self.b))
        v = s - s * s
        t = 1.0 - 2.0 * s
        vt = v * t
        v2 = v * v
        n = len(self.a)
        wa = self.wa
        out = self.coef[rows]
        out[:, 0] = self.base + s @ wa[0] / n
        out[:, 1] = v @ wa[1] / n
        out[:, 2] = vt @ wa[2] / (2 * n)
        out[:, 3] = (v @ wa[3] - 6.0 * (v2 @ wa[3])) / (6 * n)
        out[:, 4] = (vt @ wa[4] - 12.0 * ((v2 * t) @ wa[4])) / (24 * n)
        self.ready[blk] = True


def table(a: np.ndarray, b: np.ndarray, c: np.ndarray, lo: float, hi: float) -> MeanCurve | None:
    """The Taylor table of the mean curve of items (a, b, c) over [lo, hi]; None when its step would need more than
    :data:`MAX_POINTS` points."""
    bound = 0.25 * float(np.mean((1.0 - c) * np.abs(a) ** 5)) / 120
    step = 2 * (TOLERANCE / bound) ** 0.2 if bound > 0 else max(hi - lo, 1.0)
    if not np.isfinite(step) or (hi - lo) / step + 1 > MAX_POINTS:
        return None
    return MeanCurve(a, b, c, lo, step, int(np.ceil((hi - lo) / step)) + 1)
