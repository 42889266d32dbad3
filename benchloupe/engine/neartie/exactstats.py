"""The three statistics the near-tie audit needs, exact and without ``scipy.stats`` (issue 13).

Why: importing ``scipy.stats`` costs ~0.4 s per process (its docstring processing), more than the whole ARC audit;
the audit needs only Kendall's tau-b (B.6: fold tau-b of full vs anchor scores), average ranks (Spearman in the
item-signature replication, percentiles in the family shifts) and a one-sided binomial sign test (D.3).

- :func:`kendall_tau_b` counts concordant, discordant and tied pairs as integers and combines them with scipy's
  own final expression ``(C - D) / sqrt(n0 - n1) / sqrt(n0 - n2)``, so the value equals ``scipy.stats.kendalltau``
  bit for bit (tests/unit/test_neartie_exactstats.py checks it, with ties).
- :func:`average_ranks` is ``rankdata(method="average")`` (ties get the mean of their positions).
- :func:`binomial_sf_greater` is P(X >= k) for X ~ Binomial(n, p) summed in exact rational arithmetic for p = 1/2
  (what the audit uses) and in float otherwise; scipy's value agrees to ~1e-15 relative.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np


def _dense_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    ranks = np.empty(values.size, dtype=np.intp)
    ranks[order] = np.r_[True, values[order][1:] != values[order][:-1]].cumsum()
    return ranks


def _tie_pairs(ranks: np.ndarray) -> int:
    cnt = np.bincount(ranks).astype(np.int64)
    return int((cnt * (cnt - 1) // 2).sum())


def _inversions(seq: np.ndarray) -> int:
    """Pairs i < j with seq_i > seq_j (non-negative integers), by bottom-up merges: at each level every pair of
    adjacent sorted runs is counted with one vectorised binary search, then merged with one sort."""
    arr = np.asarray(seq, dtype=np.int64)
    n = arr.size
    big = int(arr.max()) + 1 if n else 1
    idx = np.arange(n, dtype=np.int64)
    inv, width = 0, 1
    while width < n:
        run = idx // width
        pair = run // 2
        right = (run % 2) == 1
        key = pair * big + arr
        left_keys = key[~right]  # globally sorted: pair-major, each left run sorted
        r_pair, r_val = pair[right], arr[right]
        hi = np.searchsorted(left_keys, (r_pair + 1) * big, side="left")
        lo = np.searchsorted(left_keys, r_pair * big + r_val, side="right")
        inv += int((hi - lo).sum())
        key.sort()
        arr = key - (idx // (2 * width)) * big
        width *= 2
    return inv


def kendall_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b of two equal-length vectors; NaN when either is constant (as scipy)."""
    x, y = np.asarray(x).ravel(), np.asarray(y).ravel()
    if x.size != y.size:
        raise ValueError("x and y must have the same length")
    size = x.size
    if size == 0:
        return math.nan
    rx, ry = _dense_ranks(x), _dense_ranks(y)
    tot = size * (size - 1) // 2
    xtie, ytie = _tie_pairs(rx), _tie_pairs(ry)
    if xtie == tot or ytie == tot:
        return math.nan
    joint = np.unique(rx.astype(np.int64) * (int(ry.max()) + 1) + ry, return_counts=True)[1].astype(np.int64)
    ntie = int((joint * (joint - 1) // 2).sum())
    order = np.lexsort((ry, rx))
    dis = _inversions(ry[order])  # discordant pairs: sorted by (x, y), so tied x never count
    con_minus_dis = tot - xtie - ytie + ntie - 2 * dis
    tau = con_minus_dis / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
    return float(min(1.0, max(-1.0, tau)))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given the mean of their positions (``scipy.stats.rankdata``'s default)."""
    values = np.asarray(values).ravel()
    order = np.argsort(values, kind="mergesort")
    sorted_v = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_v[1:] != sorted_v[:-1]])
    ends = np.r_[starts[1:], values.size]
    mean_rank = (starts + ends + 1) / 2.0  # positions start+1 .. end, 1-based
    ranks = np.empty(values.size)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def binomial_sf_greater(k: int, n: int, p: float = 0.5) -> float:
    """One-sided binomial test p-value P(X >= k), X ~ Binomial(n, p) (``binomtest(..., "greater")``)."""
    if not 0 <= k <= n:
        raise ValueError(f"k must be in [0, n], got k={k}, n={n}")
    if p == 0.5:
        return float(Fraction(sum(math.comb(n, i) for i in range(k, n + 1)), 2**n))
    return float(min(1.0, sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))))
