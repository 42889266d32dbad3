"""Item-signature replication across owner halves and item-group attribution (paper 002 D.3, Table 2).

The residual family-DIF model is fitted independently in the two owner-disjoint halves (each fold's final
refit on its own audit half).  Common cells c(i) = (group, Q4 of the mean intercept) (eqs. 62-63); family
effects centred within cells (eq. 64); per-family Spearman rho and its median (eq. 65); top-20% DIF items per
cell in each half, overlap precision O (eq. 66) and advantaged-family agreement A (eq. 67); 500 within-cell
permutations of the validation signature (eq. 68).  Item-group attribution (eqs. 69-70, groups >= 20 items,
two most positive and two most negative per family, sign replication) and the exact item-group
decomposition of each family's score shift (eqs. 71-72).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchloupe.engine import replicates
from benchloupe.engine.dif import difficulty_cells

from .exactstats import average_ranks, binomial_sf_greater
from .results import AuditResult, ProtocolInputs

PERMUTATION_SEED = 20260827
TOP_FRACTION = 0.2


def _cell_centre(effects: np.ndarray, cell_idx: list[np.ndarray]) -> np.ndarray:
    out = effects.copy()
    for idx in cell_idx:
        out[idx] -= effects[idx].mean(axis=0)
    return out


def _top(dif: np.ndarray, cell_idx: list[np.ndarray]) -> np.ndarray:
    top = np.zeros(dif.size, dtype=bool)
    for idx in cell_idx:
        n = max(1, int(round(TOP_FRACTION * idx.size)))
        top[idx[np.argsort(-dif[idx], kind="stable")[:n]]] = True
    return top


def _spearman_cols(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ra = np.apply_along_axis(average_ranks, 0, a)
    rb = np.apply_along_axis(average_ranks, 0, b)
    ra -= ra.mean(axis=0)
    rb -= rb.mean(axis=0)
    den = np.sqrt((ra ** 2).sum(axis=0) * (rb ** 2).sum(axis=0))
    return np.divide((ra * rb).sum(axis=0), den, out=np.full(a.shape[1], np.nan), where=den > 0)


def signature_stats(eff_d: np.ndarray, eff_v: np.ndarray, cell_idx: list[np.ndarray]) -> tuple[float, float, float]:
    """(median rho, overlap precision O, advantaged-family agreement A) for one pair of signatures."""
    rho = _spearman_cols(_cell_centre(eff_d, cell_idx), _cell_centre(eff_v, cell_idx))
    h_d = _top(np.ptp(eff_d, axis=1), cell_idx)
    h_v = _top(np.ptp(eff_v, axis=1), cell_idx)
    both = h_d & h_v
    overlap = both.sum() / h_d.sum()
    agree = float((eff_d[both].argmax(axis=1) == eff_v[both].argmax(axis=1)).mean()) if both.any() else np.nan
    return float(np.nanmedian(rho)), float(overlap), agree


def _null_stats(shared, perm: np.ndarray) -> tuple[float, float, float]:
    """One permutation's signature statistics (a replicate: its permutation was drawn by the caller)."""
    eff_d, eff_v, cell_idx = shared
    return signature_stats(eff_d, eff_v[perm], cell_idx)


def replication(result: AuditResult, inputs: ProtocolInputs, permutations: int = 500) -> dict[str, pd.DataFrame]:
    """Table 2 row (with permutation p), per-family rho, item-group attribution and eq. 71 contributions."""
    f_d, f_v = result.fold_results
    fin_d, fin_v = f_d.purification.final, f_v.purification.final
    b_bar = (fin_d.intercept + fin_v.intercept) / 2
    cells = difficulty_cells(b_bar, inputs.groups, result.config.strata)
    cell_idx = [np.flatnonzero(cells == c) for c in np.unique(cells)]
    obs = signature_stats(fin_d.effects, fin_v.effects, cell_idx)
    rng = np.random.default_rng(PERMUTATION_SEED)  # the permutations in the reference's order, drawn here
    perms = []
    for _ in range(permutations):
        perm = np.arange(cells.size)
        for idx in cell_idx:
            perm[idx] = idx[rng.permutation(idx.size)]
        perms.append(perm)
    null = np.array(replicates.run(_null_stats, perms, (fin_d.effects, fin_v.effects, cell_idx),
                                   label="replication permutation"), dtype=float).reshape(permutations, 3)
    p = [(1 + int((null[:, k] >= obs[k]).sum())) / (permutations + 1) for k in range(3)]
    rho = _spearman_cols(_cell_centre(fin_d.effects, cell_idx), _cell_centre(fin_v.effects, cell_idx))
    table2 = pd.DataFrame([{"median_rho": obs[0], "top20_overlap": obs[1], "advantaged_family_agreement": obs[2],
                            "p_rho": p[0], "p_overlap": p[1], "p_agreement": p[2],
                            "null_overlap_median": float(np.median(null[:, 1])),
                            "null_agreement_median": float(np.nanmedian(null[:, 2])),
                            "permutations": permutations, "common_cells": len(cell_idx)}])
    per_family = pd.DataFrame({"family": inputs.fam_names, "rho": rho})
    return {"table2": table2, "family_rho": per_family,
            "item_group_attribution": _group_attribution(fin_d.effects, fin_v.effects, inputs),
            "group_contributions": group_contributions(result, inputs)}


def _group_attribution(eff_d: np.ndarray, eff_v: np.ndarray, inputs: ProtocolInputs,
                       min_items: int = 20) -> pd.DataFrame:
    """Eqs. 69-70: family effects per item group; discovery's top-2 / bottom-2 groups' signs in validation."""
    names, inverse, sizes = np.unique(inputs.groups, return_inverse=True, return_counts=True)
    eligible = np.flatnonzero(sizes >= min_items)
    rows = []
    if eligible.size < 2:
        return pd.DataFrame(columns=["family", "item_group", "direction", "gamma_discovery", "gamma_validation",
                                     "replicated"])
    star_d = eff_d - eff_d.mean(axis=0)
    star_v = eff_v - eff_v.mean(axis=0)
    for k, fam in enumerate(inputs.fam_names):
        g_d = np.array([star_d[inverse == s, k].mean() for s in eligible])
        g_v = np.array([star_v[inverse == s, k].mean() for s in eligible])
        order = np.argsort(-g_d, kind="stable")
        n = min(2, eligible.size // 2)
        for direction, picks in (("positive", order[:n]), ("negative", order[::-1][:n])):
            for s in picks:
                rows.append({"family": fam, "item_group": str(names[eligible[s]]), "direction": direction,
                             "gamma_discovery": g_d[s], "gamma_validation": g_v[s],
                             "replicated": bool(np.sign(g_d[s]) == np.sign(g_v[s]) and g_d[s] != 0)})
    out = pd.DataFrame(rows)
    k = int(out["replicated"].sum())
    out.attrs["sign_replication"] = k / len(out)
    out.attrs["binomial_p"] = binomial_sf_greater(k, len(out), 0.5)
    return out


def group_contributions(result: AuditResult, inputs: ProtocolInputs) -> pd.DataFrame:
    """Eq. 71: C_sf = 100 / (I |M_f|) sum_m sum_{i in s} (w_i - 1) Y_im per direction; sums to the shift (72).

    Complete data (with a mask the per-model denominators differ and eq. 72 no longer holds exactly).
    """
    names, inverse = np.unique(inputs.groups, return_inverse=True)
    rows = []
    for f in result.fold_results:
        y_t = inputs.y_all[f.rep_index]
        fam_t = inputs.fam_code[f.rep_index].astype(int)
        dw = f.purification.weights - 1.0
        n_items = y_t.shape[1]
        for k, fam in enumerate(inputs.fam_names):
            members = fam_t == k
            if not members.any():
                continue
            per_item = (y_t[members] * dw).sum(axis=0) * 100 / (n_items * members.sum())
            per_group = np.bincount(inverse, weights=per_item, minlength=names.size)
            shift = 100 * float((f.low[members] - f.full[members]).mean())
            for s, c in enumerate(per_group):
                rows.append({"audit_half": f.audit_half, "family": fam, "item_group": str(names[s]),
                             "contribution_pp": c, "family_shift_pp": shift})
    return pd.DataFrame(rows)
