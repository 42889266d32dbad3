"""Item-rest association tests: chance-aware rest scores, point-biserials, vectorised permutation p-values and
Benjamini-Hochberg q-values.

The rest score of model i for item j is its mean *formula score* over the other items it answered: a correct
answer on an item with guessing level c counts (1 - c)/(1 - c) = 1 and a wrong one -c/(1 - c), so a benchmark
mixing 2-choice and free-answer items does not reward guessing (chance-aware, as the issue asks). The
point-biserial of an indicator x (the item scored right, or one option chosen) with the rest score is its
Pearson correlation over the models that answered the item.

Permutation p-values (the test of itemwise and of classical item analysis): under the null the indicator is
exchangeable across the models that answered. All items are tested at once: one random permutation of the
model axis per replicate is shared by every item, and an item with n answers uses that permutation restricted
to its first n answers (a uniformly random permutation of them), so a replicate is one multiply-add over the
matrix. Where fewer than ``tail_min`` replicates reach the observed statistic, the Monte Carlo count cannot
resolve the tail a benchmark-wide FDR needs (1,000 replicates cannot show p < .001): the tail is then the normal
one with the statistic's exact permutation mean and variance (the permutational central limit theorem,
Hoeffding 1952). Benjamini & Hochberg (1995) step-up q.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from ..common import EngineError

# the normal tail alone (no Monte Carlo replicates) for a column of at least CLT_ANSWERS answers with at least
# CLT_MIN ones and CLT_MIN zeros; below that, as measured in docs/ITEMS.md, the replicates decide
CLT_MIN, CLT_ANSWERS = 50, 2000


def formula_scores(y: np.ndarray, chance: np.ndarray) -> np.ndarray:
    """Cells scored (y - c)/(1 - c): 1 right, -c/(1-c) wrong, NaN missing."""
    c = np.clip(np.nan_to_num(np.asarray(chance, float), nan=0.0), 0.0, 0.95)
    return (y - c) / (1.0 - c)


def rest_means(z: np.ndarray) -> np.ndarray:
    """Mean formula score of each model over the *other* answered items (NaN when it answered no other)."""
    obs = ~np.isnan(z)
    if obs.all():  # complete data: one pass
        n = z.shape[1]
        with np.errstate(invalid="ignore", divide="ignore"):
            rest = (z.sum(1, keepdims=True) - z) / (n - 1) if n > 1 else np.full(z.shape, np.nan)
        return rest
    zz = np.where(obs, z, 0.0)
    tot = zz.sum(1, keepdims=True)
    cnt = obs.sum(1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rest = (tot - zz) / (cnt - obs)
    return np.where(np.isfinite(rest), rest, np.nan)


def point_biserial(x: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """Pearson correlation per column between indicator *x* and *rest* over cells where both are known."""
    ok = ~np.isnan(x) & ~np.isnan(rest)
    if ok.all():  # complete data: sums of products, no masked copies
        n = len(x)
        with np.errstate(invalid="ignore", divide="ignore"):
            mx, mr = x.mean(0), rest.mean(0)
            sxr = np.einsum("ij,ij->j", x, rest) - n * mx * mr
            sxx = np.einsum("ij,ij->j", x, x) - n * mx * mx
            srr = np.einsum("ij,ij->j", rest, rest) - n * mr * mr
            r = sxr / np.sqrt(sxx * srr)
        return np.where(np.isfinite(r) & (sxx > 1e-12 * n) & (srr > 1e-12 * n), np.clip(r, -1, 1), np.nan)
    n = ok.sum(0)
    xs, rs = np.where(ok, x, 0.0), np.where(ok, rest, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx, mr = xs.sum(0) / n, rs.sum(0) / n
        xc, rc = np.where(ok, x - mx, 0.0), np.where(ok, rest - mr, 0.0)
        r = (xc * rc).sum(0) / np.sqrt((xc * xc).sum(0) * (rc * rc).sum(0))
    return np.where(np.isfinite(r), r, np.nan)


def permutation_pvalues(x: np.ndarray, rest: np.ndarray, *, alternative: str, n_perm: int,
                        rng: np.random.Generator, tail_min: int = 10,
                        clt_min: int = CLT_MIN, clt_answers: int = CLT_ANSWERS) -> tuple[np.ndarray, np.ndarray]:
    """One-sided permutation p-values of the association of each column of *x* (0/1, NaN missing) with *rest*:
    ``alternative`` "less" (negative association: a backwards item) or "greater". Returns (p, z) with z the
    statistic standardised by its exact permutation moments (z ~ r * sqrt(n - 1)). NaN where a column has fewer
    than 3 answers or no spread. A column with at least *clt_answers* answers, *clt_min* of them ones and *clt_min*
    zeros, gets the normal tail with the exact moments without replicates (the permutational CLT holds there;
    the replicates are spent on the columns where it may not: few answers, few right or few wrong)."""
    if alternative not in ("less", "greater"):
        raise EngineError(f"alternative must be 'less' or 'greater', not {alternative!r}")
    m, k = x.shape
    ok = ~np.isnan(x) & ~np.isnan(rest)
    n = ok.sum(0)
    if ok.all():  # complete data: every column's answers are rows 0..m-1 already
        xo, ro = x, rest
    else:  # answered cells first in each column (stable), so that an item's answers are rows 0..n-1
        order = np.argsort(~ok, axis=0, kind="stable")
        xo = np.take_along_axis(np.where(ok, x, 0.0), order, 0)
        ro = np.take_along_axis(np.where(ok, rest, 0.0), order, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rc = ro - ro.sum(0) / n
    rc = np.where(np.arange(m)[:, None] < n[None, :], rc, 0.0)
    obs_t = (xo * rc).sum(0)
    n1 = xo.sum(0)
    s2 = (rc * rc).sum(0) / np.maximum(n, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = n1 * (n - n1) / (n - 1) * s2  # sampling n1 of n centred values without replacement
        z = obs_t / np.sqrt(var)
    sign = -1.0 if alternative == "less" else 1.0
    reach = np.zeros(k)
    mc = (np.minimum(n1, n - n1) < clt_min) | (n < clt_answers)  # the columns that get Monte Carlo replicates
    groups = {int(v): np.flatnonzero((n == v) & mc) for v in np.unique(n[mc])}
    eps = 1e-5 * np.maximum(np.abs(obs_t), 1.0)  # float32 sums below: ties within their rounding count
    # float32 copies per group of columns (half the memory traffic of a replicate, which is all it costs)
    blocks = {size: (cols, np.ascontiguousarray(xo[:size][:, cols], np.float32),
                     np.ascontiguousarray(rc[:size][:, cols], np.float32))
              for size, cols in groups.items() if size >= 3}
    for _ in range(n_perm):
        perm = rng.permutation(m)
        for size, (cols, xb, rb) in blocks.items():
            p_n = perm[perm < size] if size < m else perm
            t = np.einsum("ij,ij->j", xb[p_n], rb)
            reach[cols] += (sign * t >= sign * obs_t[cols] - eps[cols])
    p_mc = (1.0 + reach) / (n_perm + 1.0)
    p_norm = special.ndtr(-sign * z)
    p = np.where(mc & (reach >= tail_min), p_mc, p_norm)
    if n_perm == 0:
        p = p_norm
    bad = (n < 3) | ~np.isfinite(z) | (var <= 0)
    p = np.where(bad, np.nan, np.clip(p, 0.0, 1.0))
    return p, np.where(bad, np.nan, z)


def bh_qvalues(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg (1995) adjusted p-values (q) over the finite entries; NaN stays NaN."""
    p = np.asarray(p, float)
    q = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if not len(ok):
        return q
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    adj = p[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(adj[::-1])[::-1]
    q[order] = np.minimum(adj, 1.0)
    return q
