"""The item audit: every diagnostic of the package on one benchmark, one table row per item, and the flags.

Reasons, most serious first (an item may carry several):
- ``miskeyed``: choosing the best distractor goes with a higher rest score (q <= alpha) and that distractor
  beats the key in the top ability quartile: the suggested key;
- ``ambiguous``: the same association, but the key still leads the top quartile (two defensible answers);
- ``backwards``: the item-rest point-biserial is negative (q <= alpha): strong models get it wrong more often;
- ``dead`` / ``solved``: no model / every model that answered got it right;
- ``misfit``: S-X2 q <= alpha and its RMSEA above ``misfit_rmsea`` (a misfit that matters);
- ``duplicate``: its normalised text nearly equals an earlier item's (this benchmark or another);
- ``saturated`` (only with ``flag_saturated``): every one of the strongest ``top_k`` models solves it.
Each test family gets its own Benjamini-Hochberg q over the benchmark's items.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field

import numpy as np

from ..common import EngineError, Progress, check_cancel, no_progress
from . import association as assoc
from . import dupes, irt, keys, reliability

REASONS = ("miskeyed", "ambiguous", "backwards", "dead", "solved", "misfit", "duplicate", "saturated")


@dataclass(frozen=True)
class ItemAuditConfig:
    """alpha: the FDR level of every test family (BH q <= alpha flags); n_perm: permutation replicates per
    test (fewer when models x items x n_perm passes perm_budget cells, at least 99: beyond the replicates' reach
    the normal tail with the exact permutation moments decides); top_k: the strongest
    models for "separates nobody at the top" and the saturation index; min_answers: fewer answers and an item
    is not tested; dup_threshold: Jaccard of shingle sets for a near-duplicate; sx2: compute S-X2 item fit;
    flag_saturated: also flag items every top-k model solves (they are always in the table); misfit_rmsea: a misfit
    flag also needs the S-X2 RMSEA, sqrt(max(0, (S-X2 - df) / (df (n - 1)))) as mirt's itemfit reports it, above
    this: with thousands of models S-X2 finds every small departure from one dimension (TruthfulQA, 4,280 models:
    123 of 136 items at q <= .05), and the queue is for the items whose misfit matters."""

    alpha: float = 0.05
    n_perm: int = 999
    perm_budget: float = 5e8
    top_k: int = 25
    min_answers: int = 5
    dup_threshold: float = dupes.THRESHOLD
    sx2: bool = True
    flag_saturated: bool = False
    misfit_rmsea: float = 0.05
    seed: int = 0


@dataclass
class ItemAuditInputs:
    """``y`` models x items (0/1, fractions allowed, NaN missing); ``chance`` per item (NaN: none);
    ``options`` models x items chosen option index (-1 unknown) or None; ``key`` the answer's option index per
    item (-1 unknown); ``n_choices`` per item; ``texts`` per item; ``ref_texts`` items of other benchmarks;
    ``groups`` item groups; ``release`` per model (decimal year, NaN unknown)."""

    y: np.ndarray
    chance: np.ndarray
    options: np.ndarray | None = None
    key: np.ndarray | None = None
    n_choices: np.ndarray | None = None
    texts: list | None = None
    ref_texts: list | None = None
    groups: list | None = None
    release: np.ndarray | None = None


@dataclass
class ItemAuditResult:
    """``table``: column name -> per-item array; ``flags``: dicts (item index, reasons, score, headline);
    ``cards``: per-item arrays for the evidence card (option shares, S-X2 observed/expected); ``metrics``."""

    table: dict
    flags: list
    cards: dict
    metrics: dict
    config: dict = field(default_factory=dict)


def _n_perm(cfg: ItemAuditConfig, m: int, n: int) -> int:
    if cfg.n_perm <= 0:
        return 0
    return int(min(cfg.n_perm, max(99, cfg.perm_budget // max(m * n, 1))))


def run_item_audit(inp: ItemAuditInputs, cfg: ItemAuditConfig = ItemAuditConfig(), *,
                   progress: Progress = no_progress, cancel: threading.Event | None = None) -> ItemAuditResult:
    y = np.asarray(inp.y, float)
    if y.ndim != 2 or y.shape[0] < 4 or y.shape[1] < 2:
        raise EngineError(f"the item audit needs at least 4 models and 2 items; got {y.shape[0]} x "
                          f"{y.shape[1] if y.ndim == 2 else 0}")
    if not 0 < cfg.alpha < 1:
        raise EngineError(f"alpha must be between 0 and 1, got {cfg.alpha}")
    m, n = y.shape
    rng = np.random.default_rng(np.random.SeedSequence(cfg.seed))
    chance = np.full(n, np.nan) if inp.chance is None else np.asarray(inp.chance, float)
    obs = ~np.isnan(y)
    n_ans = obs.sum(0)
    right = np.where(obs, y, 0).sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_right = right / n_ans
    testable = n_ans >= cfg.min_answers
    steps = 7
    progress(0, steps, "rest scores")
    z = assoc.formula_scores(y, chance)
    rest = assoc.rest_means(z)
    r_rest = assoc.point_biserial(y, rest)
    B = _n_perm(cfg, m, n)
    check_cancel(cancel)
    progress(1, steps, f"permutation tests ({B} replicates)")
    p_back, z_back = assoc.permutation_pvalues(y, rest, alternative="less", n_perm=B, rng=rng)
    p_back[~testable] = np.nan
    q_back = assoc.bh_qvalues(p_back)
    check_cancel(cancel)
    progress(2, steps, "sign-free 2PL")
    # items nobody or everybody got right carry no slope; an item answered right less often than its stated
    # chance cannot have that floor (a mis-keyed item): its 2PL gets none
    spread = np.flatnonzero((right > 0) & (right < n_ans))
    if len(spread) < 2:
        raise EngineError(f"the item audit needs at least 2 items that some but not all models got right; "
                          f"{len(spread)} of the {n} items are")
    c_fit = guessing_levels(y, chance, rest, p_right)
    r0 = np.clip(np.nan_to_num(r_rest[spread]), -0.9, 0.9)
    sub = irt.fit_2pl(y[:, spread], c_fit[spread], a0=1.7 * r0 / np.sqrt(1 - r0**2))  # the classical start
    fit = irt.widen(sub, spread, n)
    z975 = 1.959963984540054
    slope_lo, slope_hi = fit.a - z975 * fit.a_se, fit.a + z975 * fit.a_se
    check_cancel(cancel)
    # options: the best distractor's association and the suggested key
    key = np.full(n, -1) if inp.key is None else np.asarray(inp.key, int)
    n_choices = np.zeros(n, int) if inp.n_choices is None else np.asarray(inp.n_choices, int)
    has_options = inp.options is not None and bool((np.asarray(inp.options) >= 0).any())
    nan = np.full(n, np.nan)
    p_mis, q_mis, r_distr, distr = nan.copy(), nan.copy(), nan.copy(), np.full(n, -1)
    suggested, top_share, key_share = np.full(n, -1), nan.copy(), nan.copy()
    shares = np.zeros((n, 4, 0))
    progress(3, steps, "option analysis")
    if has_options:
        options = np.asarray(inp.options)
        ind, distr, n_distr = keys.best_distractor(options, key, n_choices, rest, assoc.point_biserial)
        r_distr = assoc.point_biserial(ind, rest)
        p_d, _ = assoc.permutation_pvalues(ind, rest, alternative="greater", n_perm=B, rng=rng)
        p_mis = np.minimum(p_d * n_distr, 1.0)
        p_mis[~testable | (distr < 0)] = np.nan
        q_mis = assoc.bh_qvalues(p_mis)
        table = keys.option_table(options, key, n_choices, fit.theta)
        suggested, top_share, key_share, shares = table.suggested, table.top_share, table.key_share, table.shares
    check_cancel(cancel)
    progress(4, steps, "item fit (S-X2)")
    sx = irt.widen_sx2(irt.s_x2(y[:, spread], sub), spread, n) if cfg.sx2 else None
    sx_p = sx.p if sx is not None else nan.copy()
    dead = testable & (right == 0)
    solved = testable & (right == n_ans)
    sx_p = np.where(testable & ~dead & ~solved, sx_p, np.nan)  # no spread: nothing to fit
    sx_q = assoc.bh_qvalues(sx_p)
    with np.errstate(invalid="ignore", divide="ignore"):
        rmsea = (np.sqrt(np.maximum(0.0, (sx.stat - sx.df) / (sx.df * max(sx.n_models - 1, 1))))
                 if sx is not None else nan.copy())
    check_cancel(cancel)
    progress(5, steps, "saturation, duplicates")
    top = np.argsort(-fit.theta, kind="stable")[:min(cfg.top_k, m)]
    yt = y[top]
    with np.errstate(invalid="ignore"):
        top_mean = np.nanmean(yt, 0) if len(top) else nan
    top_all = np.isfinite(top_mean) & (top_mean == 1)
    top_none = np.isfinite(top_mean) & (top_mean == 0)
    dup_of, dup_ref, dup_jac = np.full(n, -1), np.full(n, -1), nan.copy()
    if inp.texts is not None:
        ref = list(inp.ref_texts or [])
        pairs = dupes.near_duplicates(list(ref) + list(inp.texts), threshold=cfg.dup_threshold, n_ref=len(ref),
                                      seed=cfg.seed)
        for i, j, jac in pairs:
            jj = j - len(ref)
            if np.isfinite(dup_jac[jj]) and dup_jac[jj] >= jac:
                continue
            if i < len(ref):
                dup_ref[jj], dup_of[jj] = i, -1
            else:
                dup_of[jj], dup_ref[jj] = i - len(ref), -1
            dup_jac[jj] = jac
    check_cancel(cancel)
    progress(6, steps, "reliability")
    flagged_mask = np.zeros(n, bool)
    reasons_per_item: list[list[str]] = [[] for _ in range(n)]
    a = cfg.alpha
    tests = {
        "miskeyed": np.nan_to_num(q_mis, nan=2) <= a,
        "backwards": np.nan_to_num(q_back, nan=2) <= a,
        "dead": dead, "solved": solved,
        "misfit": (np.nan_to_num(sx_q, nan=2) <= a) & (np.nan_to_num(rmsea, nan=0) > cfg.misfit_rmsea),
        "duplicate": np.isfinite(dup_jac),
        "saturated": top_all & ~solved if cfg.flag_saturated else np.zeros(n, bool),
    }
    ambiguous = tests["miskeyed"] & (suggested < 0)
    tests["ambiguous"] = ambiguous
    tests["miskeyed"] = tests["miskeyed"] & (suggested >= 0)
    for reason in REASONS:
        for j in np.flatnonzero(tests[reason]):
            reasons_per_item[j].append(reason)
    flags = []
    for j in range(n):
        if not reasons_per_item[j]:
            continue
        flagged_mask[j] = True
        qs = [q for q in (q_mis[j] if (tests["miskeyed"][j] or ambiguous[j]) else np.nan,
                          q_back[j] if tests["backwards"][j] else np.nan) if np.isfinite(q)]
        # the queue's order: key problems first (10 + their evidence), then dead or solved (5), duplicates
        # (2 + Jaccard), misfit alone last (10 x RMSEA): with thousands of models many items misfit a little
        if qs:
            score = 10.0 + float(-np.log10(max(min(qs), 1e-300)))
        elif dead[j] or solved[j]:
            score = 5.0
        elif np.isfinite(dup_jac[j]):
            score = 2.0 + float(dup_jac[j])
        else:
            score = float(10 * np.nan_to_num(rmsea[j]))
        flags.append({"item": j, "reasons": reasons_per_item[j], "score": score})
    rel = {"all": {**reliability.cronbach(y), **reliability.marginal(fit.theta, fit.theta_sd)}}
    keep = np.flatnonzero(~flagged_mask)
    if flagged_mask.any() and len(keep) >= 2:
        kept = np.flatnonzero(~flagged_mask[spread])
        th, sd = irt.eap(y[:, spread], sub, kept) if len(kept) else (fit.theta, fit.theta_sd)
        rel["without_flagged"] = {**reliability.cronbach(y[:, keep]), **reliability.marginal(th, sd),
                                  "items_removed": int(flagged_mask.sum())}
    if inp.groups is not None:
        g = np.asarray([str(x) for x in inp.groups])
        by = {}
        for name in np.unique(g):
            cols = np.flatnonzero(g == name)
            if len(cols) >= 2 and name:
                by[str(name)] = reliability.cronbach(y[:, cols])
        if by:
            rel["by_group"] = by
    sat = _saturation(y, fit.theta, cfg.top_k, inp.release)
    progress(7, steps, "done")
    table = {
        "n_answers": n_ans, "p_right": p_right, "r_rest": r_rest, "z_rest": z_back, "p_backwards": p_back,
        "q_backwards": q_back, "slope": fit.a, "slope_lo": slope_lo, "slope_hi": slope_hi, "intercept": fit.d,
        "distractor": distr, "r_distractor": r_distr, "p_miskey": p_mis, "q_miskey": q_mis,
        "suggested": suggested, "top_share": top_share, "key_share": key_share,
        "sx2": sx.stat if sx is not None else nan, "sx2_df": sx.df if sx is not None else nan, "sx2_p": sx_p,
        "sx2_q": sx_q, "sx2_rmsea": rmsea, "dead": dead, "solved": solved, "top_all": top_all, "top_none": top_none,
        "dup_of": dup_of, "dup_ref": dup_ref, "dup_jaccard": dup_jac,
        "reasons": np.array([",".join(r) for r in reasons_per_item], dtype=object),
    }
    cards = {"option_shares": shares,
             "fit_observed": sx.observed if sx is not None else np.zeros((n, 0)),
             "fit_expected": sx.expected if sx is not None else np.zeros((n, 0)),
             "fit_counts": sx.counts if sx is not None else np.zeros(0),
             "fit_groups": np.asarray(sx.groups if sx is not None else np.zeros((0, 2)), float).reshape(-1, 2)}
    counts = {r: int(tests[r].sum()) for r in REASONS}
    metrics = {"models": int(m), "items": int(n), "flagged": int(flagged_mask.sum()), "reasons": counts,
               "n_perm": B, "p_method": f"Monte Carlo permutation ({B} replicates), normal tail with the exact "
                                        "permutation moments where fewer than 10 replicates reach the statistic",
               "alpha": cfg.alpha, "reliability": rel, "saturation": sat, "options": bool(has_options),
               "fit": {"iterations": fit.iterations, "converged": fit.converged, "loglik": fit.loglik},
               "top_separating": int((~top_all & ~top_none & np.isfinite(top_mean)).sum()),
               "sx2_models": sx.n_models if sx is not None else 0}
    return ItemAuditResult(table, flags, cards, metrics, asdict(cfg))


def guessing_levels(y: np.ndarray, chance: np.ndarray, rest: np.ndarray, p_right: np.ndarray) -> np.ndarray:
    """The lower asymptote each item's 2PL is fitted with: its stated chance, but never above the rate at which
    the weakest tenth of the models (by rest score, at least 20 of them) answer it, and none for an item answered
    right at or below chance overall (a mis-keyed item). Leaderboard models do not guess uniformly: on the Open
    LLM Leaderboard's ARC items (chance .25) the weakest tenth is right 4-17 % of the time on most items, and a
    floor of .25 there made S-X2 flag 90 of 100 items (41 with the cap; docs/ITEMS.md)."""
    c = np.clip(np.nan_to_num(np.asarray(chance, float), nan=0.0), 0.0, 0.95)
    c = np.where(np.nan_to_num(p_right) <= c + 0.02, 0.0, c)
    obs = ~np.isnan(y) & ~np.isnan(rest)
    k = obs.sum(0) // 10
    cols = np.flatnonzero((c > 0) & (k >= 20))
    if not len(cols):
        return c
    r = np.where(obs[:, cols], rest[:, cols], np.inf)
    kmax = int(k[cols].max())
    low = np.argpartition(r, kmax - 1, axis=0)[:kmax] if kmax < len(r) else np.arange(len(r))[:, None]
    low = np.broadcast_to(low, (min(kmax, len(r)), len(cols)))
    low = np.take_along_axis(low, np.argsort(np.take_along_axis(r, low, 0), axis=0, kind="stable"), 0)
    right = np.take_along_axis(np.where(obs[:, cols], y[:, cols], 0.0), low, 0)
    rate = (np.cumsum(right, 0)[k[cols] - 1, np.arange(len(cols))]) / k[cols]
    c[cols] = np.minimum(c[cols], rate)
    return c


def _saturation(y: np.ndarray, theta: np.ndarray, top_n: int, release) -> dict:
    """Share of items every one of the strongest *top_n* models (by ability) solves; with release dates, the
    same among the models released by each of up to 12 dates (its trend)."""
    def index(rows):
        if not len(rows):
            return float("nan")
        with np.errstate(invalid="ignore"):
            mean = np.nanmean(y[rows], 0)
        ok = np.isfinite(mean)
        return float((mean[ok] == 1).mean()) if ok.any() else float("nan")

    order = np.argsort(-theta, kind="stable")
    out = {"top_n": int(min(top_n, len(theta))), "index": index(order[:top_n]), "trend": []}
    if release is not None:
        rel = np.asarray(release, float)
        known = np.isfinite(rel)
        if known.sum() >= 2:
            cuts = np.unique(np.quantile(rel[known], np.linspace(0, 1, 12)))
            for t in cuts:
                pool = order[known[order] & (rel[order] <= t)]
                out["trend"].append({"date": float(t), "index": index(pool[:top_n]), "models": int(len(pool))})
    return out
