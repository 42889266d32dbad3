"""Secondary analyses (on request): specificity (B.3, eqs. 54-55), gap curve (Table 7), composition bootstrap
(C.7), anchor-fraction sensitivity (Table 8)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchloupe.engine.common import check_cancel
from benchloupe.engine.dif import purify

from .config import FRACTION_INDEX
from .exactstats import kendall_tau_b
from .results import FoldResult
from .scoring import PairSet, _rate, _scores, count_reversals, exact_scale, make_pairs, randomization_test


def secondary_analyses(config, folds, y_all, obs_all, groups, fam_code, owner_arr, cancel) -> dict:
    out: dict = {}
    if config.specificity:
        out["within-family specificity"] = _specificity(config, folds, owner_arr, fam_code)
    boot = bootstrap_scores(config, folds, y_all, obs_all, groups) if config.bootstrap else None
    if config.gap_curve:
        out["gap-threshold curve"] = _gap_curve(config, folds, owner_arr, fam_code, boot)
    if config.bootstrap:
        check_cancel(cancel)
        out["composition bootstrap"] = _bootstrap(config, folds, y_all, obs_all, groups, owner_arr, fam_code, boot)
    if config.fraction_sensitivity:
        out["anchor-fraction sensitivity"] = _fractions(config, folds, y_all, obs_all, groups, owner_arr,
                                                        fam_code, cancel)
    return out


def _fold_pairs(f: FoldResult, owner_arr, fam_code, gap, tol) -> PairSet:
    return make_pairs(f.full, owner_arr[f.rep_index], fam_code[f.rep_index], gap, tol)


def _specificity(config, folds, owner_arr, fam_code) -> pd.DataFrame:
    """Cross- minus within-family reversal gap against the paired control gaps (B.3, eqs. 54-55)."""
    totals = {}
    for kind in ("cross", "within"):
        obs = np.zeros(2)
        ctrl = np.zeros((config.controls, 2))
        for f in folds:
            ps = _fold_pairs(f, owner_arr, fam_code, config.gap, config.gap_tolerance)
            m = ps.close & (ps.cross if kind == "cross" else ps.eligible & ~ps.cross)
            ok, fl = count_reversals(ps, f.low, m)
            obs += [ok[0], fl[0]]
            ok, fl = count_reversals(ps, f.control_low, m)
            ctrl += np.stack([ok, fl], axis=1)
        totals[kind] = (obs, ctrl)
    (co, cc), (wo, wc) = totals["cross"], totals["within"]
    within = randomization_test(int(wo[0]), int(wo[1]), wc[:, 0], wc[:, 1], config.significance)
    row = {"within_pairs": int(wo[0]), "within_rate": within["rate"], "within_random_median": within["random_median"],
           "within_excess_pp": within["excess_pp"], "p_within": within["p"], "delta_spec_pp": None, "p_spec": None}
    if wo[0] and co[0] and (wc[:, 0] > 0).all() and (cc[:, 0] > 0).all():
        g_obs = co[1] / co[0] - wo[1] / wo[0]
        g_ctrl = cc[:, 1] / cc[:, 0] - wc[:, 1] / wc[:, 0]
        row["delta_spec_pp"] = 100 * (g_obs - float(np.median(g_ctrl)))
        row["p_spec"] = (1 + int((g_ctrl >= g_obs).sum())) / (config.controls + 1)
    return pd.DataFrame([row])


def _gap_curve(config, folds, owner_arr, fam_code, boot=None) -> pd.DataFrame:
    """Observed vs matched-random reversal rates at each full-score gap (Table 7, eq. 56), pairs frozen from
    full scores; with a composition bootstrap, its 2.5/97.5% range recomputed at every threshold (D.1)."""
    rows = []
    for gap_pp in config.gap_curve:
        gap = gap_pp / 100
        obs = np.zeros(2, dtype=int)
        ctrl = np.zeros((config.controls, 2), dtype=int)
        for f in folds:
            ps = _fold_pairs(f, owner_arr, fam_code, gap, config.gap_tolerance)
            ok, fl = count_reversals(ps, f.low, ps.cross & ps.close)
            obs += [ok[0], fl[0]]
            ok, fl = count_reversals(ps, f.control_low, ps.cross & ps.close)
            ctrl += np.stack([ok, fl], axis=1)
        test = randomization_test(int(obs[0]), int(obs[1]), ctrl[:, 0], ctrl[:, 1], config.significance)
        row = {"gap_pp": gap_pp, "pairs": int(obs[0]), "reversals": int(obs[1]), **test}
        if boot is not None:
            rate = bootstrap_rates(config, folds, boot[1], owner_arr, fam_code, gap)
            row.update(bootstrap_rate_lo=_nanq(rate, 0.025), bootstrap_rate_hi=_nanq(rate, 0.975))
        rows.append(row)
    return pd.DataFrame(rows)


def bootstrap_scores(config, folds, y_all, obs_all, groups) -> tuple[int, list[tuple[np.ndarray, np.ndarray]]]:
    """Composition bootstrap (C.7) scores: units are item groups (>= 5) or 100 contiguous clusters, weights
    multinomial(n_units, uniform), seed bootstrap_seed + fold; per fold (full, low), representatives x B."""
    n_items = y_all.shape[1]
    names = np.unique(groups)
    if names.size >= 5:
        unit = np.searchsorted(names, groups)
    else:
        unit = np.floor(np.arange(n_items) * 100 / n_items).astype(int)
    n_units = int(unit.max()) + 1
    onehot = np.zeros((n_items, n_units))
    onehot[np.arange(n_items), unit] = 1.0
    out = []
    for fold, f in enumerate(folds):
        rng = np.random.default_rng(config.bootstrap_seed + fold)
        draws = rng.multinomial(n_units, np.full(n_units, 1 / n_units), size=config.bootstrap).T.astype(float)
        y_t = y_all[f.rep_index]
        o_t = np.ones_like(y_t) if obs_all is None else obs_all[f.rep_index]
        w = f.purification.weights
        full = ((y_t * o_t) @ onehot @ draws) / (o_t @ onehot @ draws)
        low = ((y_t * o_t * w) @ onehot @ draws) / ((o_t * w) @ onehot @ draws)
        out.append((full, low))
    return n_units, out


def bootstrap_rates(config, folds, boot, owner_arr, fam_code, gap: float) -> np.ndarray:
    """Fold-pooled strict reversal rate per bootstrap replicate, pairs frozen from the original full scores."""
    pooled = np.zeros((config.bootstrap, 2))
    for f, (full, low) in zip(folds, boot, strict=True):
        ps = _fold_pairs(f, owner_arr, fam_code, gap, config.gap_tolerance)
        m = ps.cross & ps.close
        sel_i, sel_j = ps.i[m], ps.j[m]
        d_full = full[sel_i] - full[sel_j]
        d_low = low[sel_i] - low[sel_j]
        ok = (d_full != 0) & (d_low != 0)
        pooled += np.stack([ok.sum(axis=0), (ok & (d_full * d_low < 0)).sum(axis=0)], axis=1)
    return pooled[:, 1] / np.where(pooled[:, 0] > 0, pooled[:, 0], np.nan)


def _bootstrap(config, folds, y_all, obs_all, groups, owner_arr, fam_code, boot=None) -> pd.DataFrame:
    """Composition bootstrap (C.7, Table 11): 2.5/97.5% of the pooled rate and of the fold-mean tau-b."""
    n_units, boot = boot or bootstrap_scores(config, folds, y_all, obs_all, groups)
    rate = bootstrap_rates(config, folds, boot, owner_arr, fam_code, config.gap)
    taus = np.array([[kendall_tau_b(full[:, r], low[:, r]) for r in range(config.bootstrap)]
                     for full, low in boot])
    tau = taus.mean(axis=0)
    return pd.DataFrame([{"replicates": config.bootstrap, "units": n_units,
                          "rate_lo": _nanq(rate, 0.025), "rate_hi": _nanq(rate, 0.975),
                          "tau_lo": float(np.quantile(tau, 0.025)), "tau_hi": float(np.quantile(tau, 0.975))}])


def _nanq(x: np.ndarray, q: float) -> float | None:
    return float(np.nanquantile(x, q)) if np.isfinite(x).any() else None


def _fractions(config, folds, y_all, obs_all, groups, owner_arr, fam_code, cancel) -> pd.DataFrame:
    """Anchor-fraction sensitivity (Table 8): same K per fold, purification rerun, tau-b and pooled rate."""
    n_fam = int(np.nanmax(fam_code.astype(float))) + 1
    rows = []
    for frac in config.fraction_sensitivity:
        taus, ok_total, fl_total, anchors = [], 0, 0, []
        for fold, f in enumerate(folds):
            check_cancel(cancel)
            audit = f.audit_rows
            y = y_all[audit].T
            obs = None if obs_all is None else obs_all[audit].T
            seed0 = config.nested_seed + 1000 * fold + 100 * FRACTION_INDEX.get(frac, 1)
            pur = purify(y, obs, fam_code[audit].astype(int), n_fam, groups, f.selection.k, seed0=seed0,
                         fraction=frac, rounds=config.purification_rounds, strata=config.strata,
                         penalty=config.dif_penalty, cycles=config.dif_cycles, cancel=cancel)
            o_t = None if obs_all is None else obs_all[f.rep_index]
            scale = exact_scale(pur.cells, pur.selected, y_all.shape[1]) if config.anchor_ties == "exact" else None
            low = _scores(y_all[f.rep_index], o_t, pur.weights, scale)
            taus.append(kendall_tau_b(f.full, low))
            ps = _fold_pairs(f, owner_arr, fam_code, config.gap, config.gap_tolerance)
            ok, fl = count_reversals(ps, low, ps.cross & ps.close)
            ok_total += int(ok[0])
            fl_total += int(fl[0])
            anchors.append(int(pur.selected.sum()))
        rows.append({"fraction": frac, "anchors": "/".join(map(str, anchors)), "tau_b": float(np.mean(taus)),
                     "pairs": ok_total, "reversals": fl_total, "rate": _rate(fl_total, ok_total)})
    return pd.DataFrame(rows)
