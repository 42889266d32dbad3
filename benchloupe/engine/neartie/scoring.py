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
    """R blueprint-matched random weight vectors (items x R): same count per cell, weight n_cell/n_sel (C.6).

    Replicate by replicate, cell by cell, ``rng.choice(n_cell, n_sel, replace=False)`` of a
    ``default_rng(seed)`` picks each cell's items (the reference's draws).  :func:`_floyd_weights` makes
    the same draws for all replicates at once (2 x 1,000 replicates x 228 cells was 456,000 calls, 4.3 s at
    5,000 x 14,000, issue 26); where it cannot (a Lemire redraw, a cell over 10,000 items, or its first replicate
    differing from ``choice``'s, as a numpy that drew otherwise would), this loop runs.
    """
    groups = [(np.flatnonzero(cells == c), int(selected[cells == c].sum())) for c in np.unique(cells)]
    groups = [(idx, idx.size, n_sel, idx.size / n_sel) for idx, n_sel in groups]
    fast = _floyd_weights(groups, r, seed, cells.size)
    if fast is not None and np.array_equal(fast[:, 0], _choice_weights(groups, 1, seed, cells.size)[:, 0]):
        return fast
    return _choice_weights(groups, r, seed, cells.size)


def _choice_weights(groups: list, r: int, seed: int, n_items: int) -> np.ndarray:
    """:func:`control_weights` by ``rng.choice``, one replicate and one cell at a time."""
    rng = np.random.default_rng(seed)
    out = np.zeros((r, n_items))
    choice = rng.choice
    for row in out:
        for idx, n_cell, n_sel, weight in groups:
            row[idx[choice(n_cell, n_sel, replace=False)]] = weight
    return out.T


def _floyd_weights(groups: list, r: int, seed: int, n_items: int) -> np.ndarray | None:
    """:func:`_choice_weights` for all replicates at once, or None where it cannot be the same draws.

    For a population of n <= 10,000, numpy's ``Generator.choice(n, k, replace=False)`` (numpy 1.17 to 2.x) is
    Floyd's algorithm: for j = n - k .. n - 1, t uniform on 0..j (no draw when j = 0); j joins the sample if t is
    in it already, else t; then (``shuffle=True``) a Fisher-Yates pass over the k picks, k - 1 more draws that
    change their order, not the set.  Each bounded draw is Lemire's on one 32-bit word u (``m = u (j + 1)``, the
    value m >> 32, redrawn while m's low word is below 2**32 mod (j + 1)), and PCG64's 32-bit words are the low,
    then the high half of each 64-bit output.  Every replicate makes the same number of draws, so the stream is
    one (replicates x draws) block and each Floyd step one vectorised operation over the replicates.  A redraw
    anywhere would shift the stream (then None: the loop runs).
    """
    if any(n > 10000 for _, n, _, _ in groups) or np.little_endian is False:
        return None
    counts = [(k - (n == k), k - 1) for _, n, k, _ in groups]  # (Floyd, shuffle) draws per cell
    per_replicate = sum(a + b for a, b in counts)
    by_item = np.zeros((n_items, r))  # filled a cell's item rows at a time (contiguous writes)
    # the 32-bit words, low half first: a view of the 64-bit outputs on a little-endian machine
    words = np.random.default_rng(seed).bit_generator.random_raw(-(-r * per_replicate // 2)).view(np.uint32)
    words = words[:r * per_replicate].reshape(r, per_replicate)
    reps = np.arange(r)
    column = 0
    for (idx, n, k, weight), (floyd, shuffle) in zip(groups, counts, strict=True):
        scale = np.arange(n - floyd, n + 1, dtype=np.uint64)  # j + 1 for j = n - floyd .. n - 1 (j > 0)
        m = words[:, column:column + floyd].astype(np.uint64) * scale[1:] if floyd else None
        column += floyd
        shuffled = np.arange(k, 1, -1, dtype=np.uint64)  # the shuffle's bounds, only checked for redraws
        tail = words[:, column:column + shuffle].astype(np.uint64) * shuffled
        column += shuffle
        low = np.uint64(0xFFFFFFFF)
        redraw = bool(((tail & low) < ((1 << 32) % shuffled)).any())
        if redraw or (m is not None and ((m & low) < ((1 << 32) % scale[1:])).any()):
            return None
        values = np.ascontiguousarray((m >> np.uint64(32)).T.astype(np.intp)) if floyd else None
        member = np.zeros((r, n), dtype=bool)
        step = 0
        for j in range(n - k, n):
            if j == 0:
                t = np.zeros(r, dtype=np.intp)
            else:
                t = values[step]
                step += 1
            member[reps, np.where(member[reps, t], j, t)] = True
        by_item[idx] = np.where(member.T, weight, 0.0)
    return np.ascontiguousarray(by_item.T).T  # the loop's layout: replicates x items, C-ordered, transposed


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


