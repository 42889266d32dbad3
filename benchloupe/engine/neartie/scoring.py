"""Scoring, near-tie pairs, reversal counts, matched-random controls and the randomization test (3.4, C.6, D.1)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from benchloupe.engine import dense
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

    ``scale`` (see :func:`exact_scale`) turns the weights into exact integers for complete data.  On a torch
    backend (``dense.use``) the control replicates' products (2-D ``weights``) run on its device: with integer
    weights the float64 sums are exact there too, so the scores are the same numbers; otherwise within rounding.
    """
    if obs is None:
        if scale is not None:  # integer weights: every sum is exact, so the threaded product is the same number
            weights = np.rint(weights * scale)
            product = threaded_matmul(y, weights) if weights.ndim == 2 else y @ weights
            return product / weights.sum(axis=0)
        return (y @ weights) / weights.sum(axis=0)
    if weights.ndim == 2 and dense.on_torch():
        return threaded_matmul(y * obs, weights) / threaded_matmul(obs, weights)
    return ((y * obs) @ weights) / (obs @ weights)


# The reference's BLAS call, emulated (anchor_ties="float"; docs/NEARTIE.md, "Float mode").  It scores with
# ``weights @ responses[:, reps]``: a Fortran-ordered items x models matrix, so numpy calls OpenBLAS dgemv_t (one dot
# product per model) and OpenBLAS (Haswell/Zen kernel) splits the models over two threads above its size threshold.
_GEMV_THREADS = 2
_GEMV_THREAD_MIN_CELLS = 2304 * 4  # OpenBLAS interface/gemv.c: one thread when items x models < 2304 * 4
_GEMV_ITEM_BLOCK = 2048  # dgemv_t_4.c NBMAX: items are summed in blocks of 2048, each block added to the result
_REPLICATE_CHUNK = 128  # replicates per pass, so the accumulators stay in cache


def _gemv_row_ranges(m: int, n_items: int) -> list[tuple[int, int]]:
    """The model ranges of OpenBLAS's threaded gemv_t (gemv_thread.c): widths ceil(rest / threads left), >= 4."""
    threads = 1 if m * n_items < _GEMV_THREAD_MIN_CELLS else _GEMV_THREADS
    ranges, start = [], 0
    for k in range(threads):
        width = min(max(-(-(m - start) // (threads - k)), 4), m - start)
        if width > 0:
            ranges.append((start, start + width))
            start += width
    return ranges


def _two_lane_rows(ranges: list[tuple[int, int]]) -> np.ndarray:
    """Rows that dgemv_t's 2-model kernel sums: in each range, the 2 models after the last full block of 4."""
    rows = [b - (b - a) % 4 + k for a, b in ranges if (b - a) % 4 >= 2 for k in (0, 1)]
    return np.asarray(rows, dtype=np.intp)


def _lane_sums(y: np.ndarray, w: np.ndarray, lo: int, hi: int, lanes: int) -> list[np.ndarray]:
    """Per lane l, the in-order sum over items lo + l, lo + l + lanes, ... < hi of ``y[:, j] * w[j]``."""
    acc = [np.zeros((y.shape[0], w.shape[1])) for _ in range(lanes)]
    for j in range(lo, hi):
        acc[(j - lo) % lanes] += y[:, j, None] * w[j]
    return acc


def float_scores(y: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Anchor scores ``y.w / sum(w)`` in the reference's exact float arithmetic (``anchor_ties="float"``).

    ``y`` is the representatives x items 0/1 matrix with the rows in the reference's layout (sorted by family,
    then owner: ``audit.run_fold``); ``weights`` one weight vector or items x replicates.  Each product
    ``y_ij * w_j`` is exact, so a score depends only on the order of the additions, and that order is the one of
    the reference's ``w @ Y`` (OpenBLAS dgemv_t, Haswell kernel, two threads; docs/NEARTIE.md):

    * the rows are split into two ranges (``_gemv_row_ranges``); in each range the rows in full blocks of 4, and
      a last single row, are summed in 4 lanes (lane l: items l, l+4, ... in order) combined as
      ``(L0 + L2) + (L1 + L3)``; the 2 rows after the last full block (range length % 4 in {2, 3}) in 2 lanes
      (even items, odd items) combined as ``E + O``;
    * items come in blocks of 2048 (the last one n & ~3 items long), each block's sum added to the result in
      order, then the last n % 4 items as ``score + ((t0 + t1) + t2)``;
    * the denominator is numpy's ``w.sum()`` (pairwise), one per replicate.

    This reproduces every exported ``low_dif_score`` of the reference on ARC (621 of 621, both target halves)
    and its per-replicate control counts (1,000 of 1,000 in both folds).  All replicates are summed in one
    vectorised pass: the arithmetic of each element is the same as one replicate at a time.
    """
    y = np.asarray(y, dtype=float)
    w2 = np.asarray(weights, dtype=float)
    w2 = w2[:, None] if w2.ndim == 1 else w2
    m, n = y.shape
    ranges = _gemv_row_ranges(m, n)
    two = _two_lane_rows(ranges)
    body = n - n % 4
    out = np.empty((m, w2.shape[1]))
    for c in range(0, w2.shape[1], _REPLICATE_CHUNK):
        w = w2[:, c:c + _REPLICATE_CHUNK]
        total = np.zeros((m, w.shape[1]))
        for lo in range(0, body, _GEMV_ITEM_BLOCK):
            hi = min(lo + _GEMV_ITEM_BLOCK, body)
            lane = _lane_sums(y, w, lo, hi, 4)
            block = (lane[0] + lane[2]) + (lane[1] + lane[3])
            if two.size:
                even, odd = _lane_sums(y[two], w, lo, hi, 2)
                block[two] = even + odd
            total += block
        if n > body:
            tail = y[:, body, None] * w[body]
            for j in range(body + 1, n):
                tail = tail + y[:, j, None] * w[j]
            total += tail
        out[:, c:c + _REPLICATE_CHUNK] = total / np.ascontiguousarray(w.T).sum(axis=1)
    return out[:, 0] if np.ndim(weights) == 1 else out


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


