"""Contamination windows: a per-model shift of residuals on items dated before vs after the model's cutoff
(issue 14, beyond the paper).

Cell-level anomaly flags (section 4.3) look for single surprising cells.  Real contamination is broad instead: a
model trained on a benchmark's older items does a little better than predicted on many of them.  Given a date per
item (contest or publication) and a cutoff per model (release or training cutoff), for every model with a cutoff:

* residual per observed cell ``e = observed rate - predicted p`` under a fit on all data (binomial cells: rate =
  successes / trials, weighted by trials; p includes a known chance level when the fit has one);
* ``shift = mean_pre(e) - mean_post(e)``: items dated on or before the cutoff ("pre": the model could have seen
  them) minus items dated after it.  Positive = better than predicted on items it could have trained on;
* a 95 % percentile interval from ``n_boot`` bootstrap resamples of the model's pre and post cells (each group
  resampled within itself), and a two-sided permutation p from ``n_perm`` shuffles of the pre/post labels over the
  model's dated cells (``(1 + #{|shift*| >= |shift|}) / (1 + n_perm)``);
* the same with item parameters fitted *without* that model (leave-one-model-out): the model's own contaminated
  answers pull the difficulty of the pre-cutoff items down in the full fit and so hide part of its own shift.

A model is flagged when the Holm-adjusted permutation p (over the models tested) is below ``alpha``.
Dates are numbers (days since 1970 from :func:`to_days`); items or models without one are left out of the test.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress, thread_pool
from benchloupe.engine.joint import (
    ArenaData,
    JointConfig,
    JointResult,
    StaticData,
    build_pairs,
    fit_abilities,
    fit_joint,
)
from benchloupe.engine.joint.subsets import static_rows


def to_days(values) -> np.ndarray:
    """Dates (ISO strings, datetimes or numbers of days) as float days since 1970-01-01; NaN where missing or
    unreadable.  A year alone ("2023") is read as its first day; numbers (not text) are taken as days already."""
    s = pd.Series(list(values), dtype=object)
    is_text = s.map(lambda v: isinstance(v, str)).to_numpy(bool)
    num = pd.to_numeric(s.where(~is_text), errors="coerce")
    out = np.full(len(s), np.nan)
    text = s.where(num.isna()).astype("string").str.strip()
    year = text.str.fullmatch(r"\d{4}").fillna(False).to_numpy(bool)
    text = text.where(~year, text + "-01-01")
    dt = pd.to_datetime(text, errors="coerce", utc=True, format="mixed")
    ok = dt.notna().to_numpy()
    out[ok] = (dt[ok].dt.tz_localize(None) - pd.Timestamp("1970-01-01")).dt.total_seconds().to_numpy() / 86400.0
    isnum = num.notna().to_numpy()
    out[isnum] = num[isnum].to_numpy(float)
    return out


@dataclass
class WindowTest:
    """One model's pre/post-cutoff residual shift."""

    shift: float
    ci_low: float
    ci_high: float
    p_perm: float
    n_pre: int
    n_post: int
    mean_pre: float
    mean_post: float


def _wmean(e: np.ndarray, w: np.ndarray) -> float:
    return float(np.sum(e * w) / np.sum(w))


def window_test(resid: np.ndarray, weight: np.ndarray, pre: np.ndarray, *, n_boot: int = 1000, n_perm: int = 2000,
                seed: int = 0) -> WindowTest:
    """Shift, bootstrap interval and permutation p for one model's dated cells (module docstring).

    ``resid``, ``weight`` (trials) and ``pre`` (dated on or before the cutoff) are 1-D over the dated cells."""
    return window_tests([resid], weight, pre, n_boot=n_boot, n_perm=n_perm, seed=seed)[0]


def window_tests(resids, weight: np.ndarray, pre: np.ndarray, *, n_boot: int = 1000, n_perm: int = 2000,
                 seed: int = 0) -> list[WindowTest]:
    """:func:`window_test` of several residual vectors over the same cells, weights, cutoff and seed (a model's
    residuals under the full fit and under its leave-one-model-out fit), from one set of draws.

    Each test's generator is ``default_rng(seed)`` and draws the same bootstrap indices and permutation labels
    whatever the residuals, so the draws (and the labels' sort, most of the cost) are shared: every result is the
    one :func:`window_test` gives that vector alone, bit for bit (issue 26; tests/unit/test_contamination.py)."""
    weight, pre = np.asarray(weight, float), np.asarray(pre, bool)
    resids = [np.asarray(r, float) for r in resids]
    n_pre, n_post = int(pre.sum()), int((~pre).sum())
    if n_pre < 2 or n_post < 2:
        raise EngineError("a window test needs at least two dated cells on each side of the cutoff")
    w_pre, w_post = weight[pre], weight[~pre]
    # unit weights (0/1 cells): x * 1.0 is x and a sum of k ones is k exactly, so the weighted sums below are
    # skipped with the same bits (the bootstrap's weight gathers were ~40 % of a test)
    unit = bool(np.all(weight == 1.0))
    rng = np.random.default_rng(seed)
    ip = rng.integers(0, n_pre, (n_boot, n_pre))
    iq = rng.integers(0, n_post, (n_boot, n_post))
    if unit:
        gp = gq = None
        wp, wq = np.full(n_boot, float(n_pre)), np.full(n_boot, float(n_post))
    else:
        gp, gq = w_pre[ip], w_post[iq]  # gathered once for every residual vector
        wp, wq = gp.sum(1), gq.sum(1)
    stats = []
    for resid in resids:
        e_pre, e_post = resid[pre], resid[~pre]
        m_pre, m_post = _wmean(e_pre, w_pre), _wmean(e_post, w_post)
        if unit:
            boot = (e_pre[ip].sum(1) / wp) - (e_post[iq].sum(1) / wq)
        else:
            boot = ((e_pre[ip] * gp).sum(1) / wp) - ((e_post[iq] * gq).sum(1) / wq)
        ew = resid if unit else resid * weight
        stats.append({"m_pre": m_pre, "m_post": m_post, "shift": m_pre - m_post, "boot": boot, "ew": ew,
                      "tot_ew": ew.sum(), "exceed": 0})
    n = len(weight)
    tot_w = weight.sum()
    first = np.zeros(n, np.uint64)
    first[:n_pre] = 1
    for start in range(0, n_perm, 256):  # blocks keep the permutation matrix small
        k = min(256, n_perm - start)
        lab = _first_of_sorted(rng.random((k, n)), first)  # a random n_pre-subset per row
        s_w = np.full(k, float(n_pre)) if unit else (lab * weight).sum(1)
        for st in stats:
            s_ew = (lab * st["ew"]).sum(1)
            perm = s_ew / s_w - (st["tot_ew"] - s_ew) / (tot_w - s_w)
            st["exceed"] += int(np.sum(np.abs(perm) >= abs(st["shift"]) - 1e-15))
    out = []
    for st in stats:
        lo, hi = np.percentile(st["boot"], [2.5, 97.5])
        out.append(WindowTest(float(st["shift"]), float(lo), float(hi), (1 + st["exceed"]) / (1 + n_perm), n_pre,
                              n_post, st["m_pre"], st["m_post"]))
    return out


def _first_of_sorted(u: np.ndarray, first: np.ndarray) -> np.ndarray:
    """``np.argsort(u, axis=1) < n_pre`` for uniforms ``u`` in [0, 1), without the argsort (``first``: 1 on the
    ``n_pre`` first columns, 0 elsewhere, uint64).

    Position ``j`` is True when the ``j``-th smallest value of its row sits in one of the ``n_pre`` first columns.
    Non-negative doubles order as their bit patterns read as unsigned integers, and their sign bit is 0, so
    ``bits << 1 | first`` orders as ``u`` with the column's group in the lowest bit: a plain sort of those keys
    (a radix/SIMD integer sort, ~3x faster than the argsort of 14,000 doubles) leaves the labels in the low bit.
    The same labels bit for bit (a tie between two draws, ~1e-8 per row at 14,000 columns, is broken by the group
    instead of the argsort's unstable order); the draws are unchanged, so the p-values are too (issue 26)."""
    keys = u.view(np.uint64)  # u is a fresh array: shifted and sorted in place
    keys <<= np.uint64(1)
    keys |= first
    keys.sort(axis=1)
    return (keys & np.uint64(1)).astype(bool)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values (NaN stays NaN)."""
    p = np.asarray(p, float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    running = 0.0
    for rank, idx in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[idx]))
        out[idx] = running
    return out


def residual_matrix(p: np.ndarray, rate: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``observed rate - predicted p`` per cell, NaN where unobserved or unpredicted."""
    with np.errstate(invalid="ignore"):
        return np.where(mask & np.isfinite(p), rate - p, np.nan)


def contamination_windows(resid: np.ndarray, weight: np.ndarray, item_days: np.ndarray, cutoff_days: np.ndarray, *,
                          resid_loo: np.ndarray | None = None, alpha: float = 0.05, n_boot: int = 1000,
                          n_perm: int = 2000, seed: int = 0, min_cells: int = 5, progress: Progress = no_progress,
                          cancel: threading.Event | None = None, rows: np.ndarray | None = None) -> pd.DataFrame:
    """Window tests for every model with a cutoff and at least ``min_cells`` dated cells on each side.

    ``resid``/``weight`` are models x items (NaN residual = unobserved), ``resid_loo`` the same residuals with the
    item parameters fitted without each model (rows: that model's residuals).  One row per tested model (index =
    model row): shift, ci_low, ci_high, p_perm, p_holm, flagged, n_pre, n_post, mean_pre, mean_post and the
    ``*_loo`` columns.  ``rows``: the model row each row of the arrays stands for (default: row k is model k), so a
    caller can pass only the models with a cutoff; ``model_idx`` and the per-model seeds follow it."""
    item_days = np.asarray(item_days, float)
    cutoff_days = np.asarray(cutoff_days, float)
    if resid.shape != weight.shape or resid.shape[1] != len(item_days) or resid.shape[0] != len(cutoff_days):
        raise EngineError("residuals, weights, item dates and model cutoffs do not line up")
    label = np.arange(len(cutoff_days)) if rows is None else np.asarray(rows, int)
    models = np.flatnonzero(np.isfinite(cutoff_days))

    def test(m: int) -> dict | None:
        """One model's tests; each draws from its own generator (seed + model row), so the models can run on
        the cores in any order and give the same numbers (numpy's sorts and draws release the GIL; issue 26)."""
        dated = np.isfinite(resid[m]) & np.isfinite(item_days)
        pre = item_days[dated] <= cutoff_days[m]
        if pre.sum() < min_cells or (~pre).sum() < min_cells:
            return None
        vectors = [resid[m, dated]]
        if resid_loo is not None and np.isfinite(resid_loo[m, dated]).all():
            vectors.append(resid_loo[m, dated])  # the same seed: its draws are the full fit's test's (shared)
        t, *tl = window_tests(vectors, weight[m, dated], pre, n_boot=n_boot, n_perm=n_perm,
                              seed=seed + int(label[m]))
        row = {"model_idx": int(label[m]), **t.__dict__}
        if tl:
            row.update({f"{key}_loo": v for key, v in tl[0].__dict__.items() if key not in ("n_pre", "n_post")})
        return row

    out_rows = []
    pool = thread_pool("windows") if len(models) > 1 else None
    jobs = [pool.submit(test, int(m)) for m in models] if pool else None
    try:
        for k, m in enumerate(models):
            check_cancel(cancel)
            progress(k, len(models), f"contamination window: model {k + 1}/{len(models)}")
            row = jobs[k].result() if jobs else test(int(m))
            if row is not None:
                out_rows.append(row)
    finally:
        for job in jobs or ():
            job.cancel()  # cancelled or failed: the models not started yet are not run
    progress(len(models), len(models), "contamination windows done")
    cols = ["model_idx", "shift", "ci_low", "ci_high", "p_perm", "n_pre", "n_post", "mean_pre", "mean_post"]
    extra = list(dict.fromkeys(c for r in out_rows for c in r if c not in cols))
    out = pd.DataFrame(out_rows, columns=cols + extra)
    out["p_holm"] = holm(out["p_perm"].to_numpy(float))
    if "p_perm_loo" in out.columns:
        out["p_holm_loo"] = holm(out["p_perm_loo"].to_numpy(float))
    out["flagged"] = out["p_holm"] < alpha
    return out


def binned_series(days: np.ndarray, resid: np.ndarray, bins: int = 20) -> dict:
    """Mean residual per date bin (equal-count bins) for a residual-against-item-date plot."""
    ok = np.isfinite(days) & np.isfinite(resid)
    d, r = days[ok], resid[ok]
    if not len(d):
        return {"day": [], "mean_residual": [], "n": []}
    order = np.argsort(d, kind="stable")
    parts = np.array_split(order, min(bins, len(order)))
    return {"day": [float(np.mean(d[p])) for p in parts], "mean_residual": [float(np.mean(r[p])) for p in parts],
            "n": [len(p) for p in parts]}


def leave_one_out_p(static: StaticData, arena: ArenaData | None, config: JointConfig, models, *,
                    progress: Progress = no_progress, cancel: threading.Event | None = None,
                    full: JointResult | None = None, out_rows: np.ndarray | None = None) -> np.ndarray:
    """Predicted static p for each model in ``models`` (rows; NaN elsewhere) with the item parameters fitted without
    that model (its static cells masked and its arena pairs dropped), then its ability refitted on frozen items.

    Static-only fits drop the model's row (the same objective as masking it) and, given ``full`` (the fit on all
    models), start from it: removing one model of many moves the optimum little, so a refit takes a few sweeps
    instead of a fit from the rates, to the same optimum (issue 26; tests/unit/test_scale.py).  Joint fits (arena
    pairs: nonconvex, a warm start can reach another optimum) keep the masked, cold refit.  ``out_rows`` (model
    rows, a superset of ``models``): the result has only those rows, in that order (no models x items NaN matrix)."""
    rows_of = None if out_rows is None else {int(r): k for k, r in enumerate(out_rows)}
    out = np.full(static.shape if out_rows is None else (len(out_rows), static.shape[1]), np.nan)
    pairs = build_pairs(arena, config) if (arena is not None and config.uses_arena) else None
    models = list(models)
    for k, m in enumerate(models):
        check_cancel(cancel)
        progress(k, len(models), f"leave-one-model-out refit {k + 1}/{len(models)}")
        if pairs is None and config.mode == "static":
            others = np.flatnonzero(np.arange(static.shape[0]) != m)
            init = None if full is None else {"theta": full.theta[others], "b_static": full.b_static,
                                               "k_static": full.k_static}
            loo = fit_joint(static_rows(static, others), None, config, init=init, cancel=cancel)
        else:
            smask = static.mask.copy()
            smask[m] = False
            keep = None if pairs is None else (pairs.i != m) & (pairs.j != m)
            loo = fit_joint(static, arena if pairs is not None else None, config, pairs=pairs, pair_keep=keep,
                            static_mask=smask, cancel=cancel)
        one = static_rows(static, [m])
        theta = fit_abilities(one, None, loo, replace(config, mode="static"))
        fitted = replace(loo, theta=theta)
        out[m if rows_of is None else rows_of[int(m)]] = fitted.p_static()[0]
    progress(len(models), len(models), "leave-one-model-out refits done")
    return out
