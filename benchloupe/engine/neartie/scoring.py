"""Scoring, near-tie pairs, reversal counts, matched-random controls and the randomization test (3.4, C.6, D.1)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from benchloupe.engine.dif import threaded_matmul

from .config import STATUS_DETECTED, STATUS_INSUFFICIENT, STATUS_NOT_DETECTED, STATUS_UNDEFINED


def exact_scale(cells: np.ndarray, selected: np.ndarray, n_items: int) -> int | None:
    """Least common multiple of the per-cell anchor counts, so that weight x scale is an integer.

    With integer weights the weighted sums are exact in float64 whatever the summation order, so two models
    tie under the anchor score exactly when their scores are mathematically equal.  ``None`` when the
    integers could exceed 2**50 (then plain float arithmetic is used).
    """
    scale = 1
    for cell in np.unique(cells):
        scale = math.lcm(scale, int(selected[cells == cell].sum()))
        if scale * n_items > 2**50:
            return None
    return scale


def _scores(y: np.ndarray, obs: np.ndarray | None, weights: np.ndarray, scale: int | None = None) -> np.ndarray:
    """Weighted mean score per model (rows) for one or several weight columns.

    ``scale`` (see :func:`exact_scale`) turns the weights into exact integers for complete data.
    """
    if obs is None:
        if scale is not None:  # integer weights: every sum is exact, so the threaded product is the same number
            weights = np.rint(weights * scale)
            product = threaded_matmul(y, weights) if weights.ndim == 2 else y @ weights
            return product / weights.sum(axis=0)
        return (y @ weights) / weights.sum(axis=0)
    return ((y * obs) @ weights) / (obs @ weights)


def float_scores(y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Anchor scores in the reference's float arithmetic (``anchor_ties="float"``, complete data only).

    ``y @ w / sum(w)`` with ``y`` the representatives x items matrix (rows contiguous), one weight vector (one
    control replicate) at a time: float ties depend on the summation order, and this matrix-vector product
    is the one that reproduces the reference's outputs best (ARC: the control pair count of 63% / 94% of the
    replicates per fold, every replicate on GSM8K; the rest is BLAS kernel rounding, docs/NEARTIE.md).  One
    matrix product for all replicates rounds differently (ARC fold 0: 8% equal).
    """
    y = np.ascontiguousarray(y)
    w2 = weights[:, None] if weights.ndim == 1 else weights
    out = np.empty((y.shape[0], w2.shape[1]))
    for r in range(w2.shape[1]):
        w = np.ascontiguousarray(w2[:, r])
        out[:, r] = (y @ w) / w.sum()
    return out[:, 0] if weights.ndim == 1 else out


@dataclass(frozen=True)
class PairSet:
    """Pairs i<j of target representatives with the masks the reversal rules need."""

    i: np.ndarray
    j: np.ndarray
    d_full: np.ndarray
    eligible: np.ndarray  # different owners
    cross: np.ndarray  # and different families
    close: np.ndarray  # |d_full| <= gap (+ tolerance)


def make_pairs(full: np.ndarray, owners: np.ndarray, families: np.ndarray, gap: float, tol: float) -> PairSet:
    i, j = np.triu_indices(full.size, k=1)
    d_full = full[i] - full[j]
    eligible = owners[i] != owners[j]
    cross = eligible & (families[i] != families[j])
    close = np.abs(d_full) <= gap + tol if tol else np.abs(d_full) <= gap
    return PairSet(i, j, d_full, eligible, cross, close)


def count_reversals(pairs: PairSet, low: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(non-tied pairs, strict reversals) among ``mask`` pairs; ``low`` may have replicate columns.

    Replicate columns are processed in chunks so memory stays at pairs x 64 whatever R is.
    """
    sel_i, sel_j, d_full = pairs.i[mask], pairs.j[mask], pairs.d_full[mask]
    low2 = low[:, None] if low.ndim == 1 else low
    ok_all = np.zeros(low2.shape[1], dtype=np.int64)
    flip_all = np.zeros(low2.shape[1], dtype=np.int64)
    full_ok = (d_full != 0)[:, None]
    for start in range(0, low2.shape[1], 64):
        chunk = low2[:, start:start + 64]
        d_low = chunk[sel_i] - chunk[sel_j]
        ok = full_ok & (d_low != 0)
        ok_all[start:start + 64] = ok.sum(axis=0)
        flip_all[start:start + 64] = (ok & ((d_full[:, None] * d_low) < 0)).sum(axis=0)
    return ok_all, flip_all


def control_weights(cells: np.ndarray, selected: np.ndarray, r: int, seed: int) -> np.ndarray:
    """R blueprint-matched random weight vectors (items x R): same count per cell, weight n_cell/n_sel (C.6)."""
    rng = np.random.default_rng(seed)
    out = np.zeros((r, cells.size))
    groups = [(np.flatnonzero(cells == c), int(selected[cells == c].sum())) for c in np.unique(cells)]
    groups = [(idx, idx.size, n_sel, idx.size / n_sel) for idx, n_sel in groups]
    choice = rng.choice
    for row in out:
        for idx, n_cell, n_sel, weight in groups:
            row[idx[choice(n_cell, n_sel, replace=False)]] = weight
    return out.T



def pool_folds(per_fold: list[tuple[int, int, np.ndarray]]) -> tuple[int, int, np.ndarray, np.ndarray]:
    """Sum (pairs, reversals, control R x 2 counts) over folds: rates come from pooled counts (C.6)."""
    pairs = sum(p for p, _, _ in per_fold)
    flips = sum(r for _, r, _ in per_fold)
    ctrl = sum(c for _, _, c in per_fold)
    return int(pairs), int(flips), ctrl[:, 0], ctrl[:, 1]




def randomization_test(pairs: int, flips: int, ctrl_pairs: np.ndarray, ctrl_flips: np.ndarray,
                       alpha: float = 0.05) -> dict:
    """Pooled rate, control median, excess (pp), one-sided p and the reference's status word (B.6, C.6)."""
    r = ctrl_pairs.size
    if pairs == 0:
        return {"rate": None, "random_median": None, "excess_pp": None, "p": None, "status": STATUS_INSUFFICIENT}
    rate = flips / pairs
    if (ctrl_pairs == 0).any():
        return {"rate": rate, "random_median": None, "excess_pp": None, "p": None, "status": STATUS_UNDEFINED}
    ctrl_rate = ctrl_flips / ctrl_pairs
    median = float(np.median(ctrl_rate))
    excess = 100.0 * (rate - median)
    p = (1 + int((ctrl_rate >= rate).sum())) / (r + 1)
    status = STATUS_DETECTED if excess > 0 and p <= alpha else STATUS_NOT_DETECTED
    return {"rate": rate, "random_median": median, "excess_pp": excess, "p": p, "status": status}


def _rate(flips: int, pairs: int) -> float | None:
    return flips / pairs if pairs else None


def _median_rate(counts: np.ndarray) -> float | None:
    if (counts[:, 0] == 0).any():
        return None
    return float(np.median(counts[:, 1] / counts[:, 0]))


