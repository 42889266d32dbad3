"""Discrimination- and reliability-matched diagnostic controls (paper 002 D.1, B.2, Table 5).

Within each frozen blueprint cell the items are ordered by the spectral discrimination proxy
g_i = SD over audit models of the capability offset o_im (eq. 42, at the fold's K and the final anchors) and
split into q_c = min(4, n_c) near-equal strata (eq. 43).  Each control draws, in every stratum, as many items
as the low-DIF subtest holds there, weight n_c / k_c: same length, same per-stratum counts, same cell mass.
Balance diagnostics on the target half: weighted mean g (the "g_i ratio"), corrected item-total correlation
(eqs. 44-45), SEM (eq. 47) and weighted Cronbach's alpha (eq. 50); each averaged over the two directions,
per replicate, before the median is taken.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchloupe.engine import replicates
from benchloupe.engine.dif import fit_offsets

from .results import AuditResult, ProtocolInputs
from .scoring import _scores, count_reversals, exact_scale, make_pairs, randomization_test

MATCHED_SEED = 20260925  # control seed + 100 000: the primary control stream stays untouched


def discrimination_proxy(y_audit: np.ndarray, obs_audit: np.ndarray | None, anchors: np.ndarray, k: int,
                         seed: int) -> np.ndarray:
    """g_i (eq. 42): standard deviation over audit models of the rank-K offset (items x models input)."""
    return fit_offsets(y_audit, obs_audit, anchors, k, seed).std(axis=1, ddof=1)


def _plan(cells: np.ndarray, selected: np.ndarray, g: np.ndarray) -> list[tuple[int, float, list]]:
    """Per blueprint cell: its size, the control weight n_c / k_c and the eq. 43 strata that hold anchors, as
    (stratum items, anchors in it)."""
    plan = []
    for c in np.unique(cells):
        idx = np.flatnonzero(cells == c)
        k_c = int(selected[idx].sum())
        ordered = idx[np.argsort(g[idx], kind="stable")]
        strata = [(s, int(selected[s].sum())) for s in np.array_split(ordered, min(4, idx.size))]
        plan.append((idx.size, idx.size / k_c, [(s, n) for s, n in strata if n]))
    return plan


def fixed_cells(cells: np.ndarray, selected: np.ndarray, g: np.ndarray) -> dict[str, int]:
    """How many blueprint cells leave the matched control no choice: every stratum holding anchors is all
    anchors (a one-item cell always; a cell of up to 4 items has one item per stratum), so in those cells every
    control is the low-DIF subtest itself.  Counts for the report's comment on Table 5 (issue 35)."""
    plan = _plan(cells, selected, g)
    fixed = [all(n == s.size for s, n in strata) for _, _, strata in plan]
    return {"cells": len(plan), "single_item_cells": sum(size == 1 for size, _, _ in plan),
            "fixed_cells": sum(fixed),
            "fixed_anchors": sum(n for f, (_, _, strata) in zip(fixed, plan, strict=True) if f for _, n in strata)}


def matched_weights(cells: np.ndarray, selected: np.ndarray, g: np.ndarray, r: int, seed: int) -> np.ndarray:
    """R discrimination-matched control weight vectors (items x R), eq. 43 strata within each cell."""
    rng = np.random.default_rng(seed)
    plan = [(weight, strata) for _, weight, strata in _plan(cells, selected, g)]
    out = np.zeros((r, cells.size))
    for row in out:
        for weight, strata in plan:
            for s, n in strata:
                row[s[rng.choice(s.size, n, replace=False)]] = weight
    return out.T


def balance(y_t: np.ndarray, weights: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Per weight column: weighted mean g, weighted mean CITC, SEM and Cronbach's alpha (eqs. 44-50)."""
    total = y_t.sum(axis=1, keepdims=True)
    rest = total - y_t
    yc = y_t - y_t.mean(axis=0)
    rc = rest - rest.mean(axis=0)
    denom = np.sqrt((yc ** 2).sum(axis=0) * (rc ** 2).sum(axis=0))
    citc = np.divide((yc * rc).sum(axis=0), denom, out=np.zeros(y_t.shape[1]), where=denom > 0)
    s2 = y_t.var(axis=0, ddof=1)
    w = weights if weights.ndim == 2 else weights[:, None]
    wsum = w.sum(axis=0)
    g_bar = (g @ w) / wsum
    r_bar = (citc @ w) / wsum
    var_part = (s2 @ (w ** 2))
    sem = np.sqrt(var_part) / wsum
    s_tot = y_t @ w
    k_w = (w > 0).sum(axis=0)
    alpha = k_w / (k_w - 1) * (1 - var_part / s_tot.var(axis=0, ddof=1))
    return np.stack([g_bar, r_bar, sem, alpha], axis=1)


def _matched_fold(shared, task):
    """One fold of Table 5 (a replicate: its proxy fit and control draws have the fold's own seeds): the
    controls' (pairs, reversals), the low-DIF and the controls' balance, and the fold's detail row."""
    inputs, cfg, r = shared
    fold, audit_rows, rep_index, full, pur, k, audit_half = task[:7]
    y_audit = inputs.y_all[audit_rows].T
    o_audit = None if inputs.obs_all is None else inputs.obs_all[audit_rows].T
    seed0 = cfg.nested_seed + 1000 * fold + 100 * cfg.fraction_seed_index
    g = discrimination_proxy(y_audit, o_audit, pur.selected, k, seed0 + cfg.purification_rounds)
    w = matched_weights(pur.cells, pur.selected, g, r, MATCHED_SEED + fold)
    y_t = inputs.y_all[rep_index]
    o_t = None if inputs.obs_all is None else inputs.obs_all[rep_index]
    scale = exact_scale(pur.cells, pur.selected, y_t.shape[1]) if cfg.anchor_ties == "exact" else None
    low_ctrl = _scores(y_t, o_t, w, scale)
    ps = make_pairs(full, inputs.owner_arr[rep_index], inputs.fam_code[rep_index], cfg.gap, cfg.gap_tolerance)
    ok, fl = count_reversals(ps, low_ctrl, ps.cross & ps.close)
    low_bal = balance(y_t, pur.weights, g)[0]
    ctrl_bal = balance(y_t, w, g)
    detail = {"audit_half": audit_half, "strata_items_matched": int(pur.selected.sum()),
              "g_low": low_bal[0], "g_control_median": float(np.median(ctrl_bal[:, 0])),
              **fixed_cells(pur.cells, pur.selected, g)}
    return np.stack([ok, fl], axis=1).astype(np.int64), low_bal, ctrl_bal, detail


def matched_controls(result: AuditResult, inputs: ProtocolInputs, r: int) -> tuple[pd.DataFrame, dict]:
    """Table 5 row for this benchmark (and per-fold detail), against R discrimination-matched controls."""
    cfg = result.config
    tasks = [(fold, f.audit_rows, f.rep_index, f.full, f.purification, f.selection.k, f.audit_half,
              f.counts["close_cross_pairs"], f.counts["close_cross_reversals"])
             for fold, f in enumerate(result.fold_results)]
    parts = replicates.run(_matched_fold, tasks, (inputs, cfg, r), label="matched-control fold")
    ctrl = sum(p[0] for p in parts)
    obs_pairs, obs_flips = sum(t[7] for t in tasks), sum(t[8] for t in tasks)
    low_bal, ctrl_bal, folds = [p[1] for p in parts], [p[2] for p in parts], [p[3] for p in parts]
    test = randomization_test(obs_pairs, obs_flips, ctrl[:, 0], ctrl[:, 1], cfg.significance)
    low = np.mean(low_bal, axis=0)
    med = np.median(np.mean(ctrl_bal, axis=0), axis=0)
    row = {"g_ratio": low[0] / med[0], "citc_ratio": low[1] / med[1], "sem_ratio": low[2] / med[2],
           "abs_delta_alpha_e3": 1e3 * abs(low[3] - med[3]),
           "low_dif_rate": test["rate"], "control_median": test["random_median"],
           "excess_pp": test["excess_pp"], "p": test["p"], "controls": r}
    return pd.DataFrame([row]), {"folds": pd.DataFrame(folds), "control_counts": ctrl}
