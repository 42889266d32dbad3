"""Quantile-matching calibration of paper 003 Appendix D (Algorithm 1) and its sweep over the subset size."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchloupe.engine.common import EngineError

from .core import _finite_1d, _target_points, as_target, ddm

__all__ = ["CalibrationPlan", "calibration_sweep", "quantile_match"]


@dataclass(frozen=True)
class CalibrationPlan:
    """Algorithm 1's subset: ``keep`` (item positions in selection order t = 1..k), ``keep_mask``,
    ``weights`` (1/k on kept items: the calibrated benchmark's measure), the target locations ``q``, and W1 to
    the target before (all items) and after (kept items, same normalised scale; ``ddm_after_renormalised``
    re-normalises the kept items as a fresh coverage report would).
    """

    keep: np.ndarray
    keep_mask: np.ndarray
    weights: np.ndarray
    q: np.ndarray
    k: int
    target: str
    w1_before: float
    w1_after: float
    ddm_after_renormalised: float


def _greedy_nearest(z: np.ndarray, q: np.ndarray) -> np.ndarray:
    """For q_1..q_k in turn pick the unused item closest to q_t (a tie goes to the smaller difficulty).
    Sorted array + two union-find "next unused" pointers: O(n log n + k log n)."""
    order = np.argsort(z, kind="stable")
    zs = z[order]
    n = zs.size
    right = list(range(n + 1))  # right[i]: smallest unused index >= i (n = none)
    left = list(range(n + 1))  # node i + 1 stands for index i; root node r -> largest unused index r - 1

    def find(parent, i):
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:
            parent[i], i = root, parent[i]
        return root

    chosen = np.empty(q.size, dtype=int)
    pos = np.searchsorted(zs, q, side="left")
    for t, (qt, p) in enumerate(zip(q, pos, strict=True)):
        r = find(right, int(p))
        lft = find(left, int(p)) - 1  # left is offset by one: index i stored at i + 1
        if r == n or (lft >= 0 and qt - zs[lft] <= zs[r] - qt):
            pick = lft
        else:
            pick = r
        right[pick] = pick + 1
        left[pick + 1] = pick
        chosen[t] = order[pick]
    return chosen


def quantile_match(b_norm: np.ndarray, target=None, *, k: int | None = None) -> CalibrationPlan:
    """Appendix D, Algorithm 1: keep ``k`` items matched greedily to the target quantiles
    ``q_t = Q_mu((t - 1/2) / k)``. ``k`` defaults to half the benchmark (the paper leaves it open; see
    :func:`calibration_sweep`)."""
    z = _finite_1d(b_norm, "normalised difficulties")
    n = z.size
    k = n // 2 if k is None else int(k)
    if not 1 <= k <= n:
        raise EngineError(f"subset size k must be between 1 and the number of items ({n}); got {k}")
    tgt = as_target(target)
    q = _target_points(k, tgt)
    keep = _greedy_nearest(z, q)
    keep_mask = np.zeros(n, dtype=bool)
    keep_mask[keep] = True
    kept = np.sort(z[keep])
    renorm = (kept - kept[0]) / (kept[-1] - kept[0]) if k > 1 and kept[-1] > kept[0] else kept
    return CalibrationPlan(
        keep=keep,
        keep_mask=keep_mask,
        weights=keep_mask / k,
        q=q,
        k=k,
        target=tgt.name,
        w1_before=ddm(z, tgt),
        w1_after=float(np.mean(np.abs(kept - q))),
        ddm_after_renormalised=float(np.mean(np.abs(renorm - _target_points(k, tgt)))),
    )


def calibration_sweep(b_norm: np.ndarray, target=None, ks=None) -> pd.DataFrame:
    """W1 to the target after Algorithm 1 for each subset size in ``ks`` (default 10%, 20%, ..., 100%)."""
    z = _finite_1d(b_norm, "normalised difficulties")
    if ks is None:
        ks = sorted({max(2, int(round(f * z.size))) for f in np.linspace(0.1, 1.0, 10)})
    rows = []
    for k in ks:
        plan = quantile_match(z, target, k=k)
        rows.append((k, plan.w1_after, plan.ddm_after_renormalised))
    return pd.DataFrame(rows, columns=["k", "w1_after", "ddm_after_renormalised"])
