"""What the numpy pass (:mod:`benchloupe.engine.backend`) and the torch pass (:mod:`benchloupe.engine.backend_torch`)
share: the sums one fused pass returns and the cell-free part of its loss.  Both backends import this module, so
neither imports the other back (issue 27).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class PassResult:
    """The sums of one fused pass (float64 arrays); see the docstring of :mod:`benchloupe.engine.backend`."""

    g_theta: np.ndarray | None
    h_theta: np.ndarray | None
    loss: np.ndarray | None  # per item
    s0R: np.ndarray | None
    s1R: np.ndarray | None
    s0V: np.ndarray | None
    s1V: np.ndarray | None
    s2V: np.ndarray | None

    def item_blocks(self, a: np.ndarray, b: np.ndarray):
        """Per-item gradient (b, k) and 2x2 Hessian (bb, bk, kk) of the data term from the moments."""
        gb = -a * self.s0R
        gk = a * (self.s1R - b * self.s0R)
        c11 = a * a * self.s0V
        sum_u = a * (self.s1V - b * self.s0V) + self.s0R  # sum of V X + R
        c12 = -a * sum_u
        c22 = a * a * (self.s2V - 2.0 * b * self.s1V + b * b * self.s0V) + gk
        return gb, gk, c11, c12, c22


def relu_sums(theta: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum_i max(theta_i - b_q, 0) per item from the sorted abilities (prefix sums; no pass over the cells)."""
    ts = np.sort(theta)
    tail = np.r_[np.cumsum(ts[::-1])[::-1], 0.0]  # tail[j] = sum of ts[j:]
    j = np.searchsorted(ts, b, side="right")
    return tail[j] - b * (len(ts) - j)
