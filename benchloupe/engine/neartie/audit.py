"""The primary audit: two owner-disjoint folds, pooled counts, pair tables and per-item contributions."""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np

from benchloupe.columns import Columns
from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.dif import DimensionSelection, purify, select_dimension

from .config import FULL_BOOTSTRAP, FULL_FRACTIONS, FULL_GAP_CURVE, HALVES, AuditConfig
from .exactstats import kendall_tau_b
from .population import SplitLog, population_with_split
from .results import AuditResult, FoldResult, ProtocolInputs
from .scoring import (
    _median_rate,
    _rate,
    _scores,
    control_weights,
    count_reversals,
    exact_scale,
    float_scores,
    make_pairs,
    pool_folds,
    randomization_test,
)


def primary_audit(
    responses: np.ndarray,
    model_ids: list[str],
    families: list[str | None],
    owners: list[str],
    item_groups: list[str],
    config: AuditConfig = AuditConfig(),
    *,
    mask: np.ndarray | None = None,
    progress: Progress = no_progress,
    cancel: threading.Event | None = None,
    fixed_k: tuple[int, int] | None = None,
) -> tuple[AuditResult, ProtocolInputs]:
    """The primary audit (and the secondary analyses the config asks for) on a models x items 0/1 matrix, with
    the inputs the robustness protocol reruns from.  :func:`benchloupe.engine.neartie.run_audit` (in
    :mod:`.protocol`) is the public entry: it adds the protocol and the split-stability reruns on top.

    ``mask`` (same shape, 1 = observed) marks missing cells; without it the matrix must be complete 0/1.
    ``fixed_k`` (discovery, validation) skips dimension selection (the D.2 perturbations freeze K).
    """
    check_config(config)
    y_all, obs_all = _validate(responses, mask, model_ids, families, owners, item_groups)
    groups = np.asarray(item_groups, dtype=str)
    n_items = y_all.shape[1]
    correct = np.rint(y_all.sum(axis=1)).astype(np.int64)
    observed = n_items if obs_all is None else np.rint(obs_all.sum(axis=1)).astype(np.int64)
    accuracy = correct / np.broadcast_to(np.asarray(observed, dtype=np.float64), correct.shape)
    population, split = population_with_split(accuracy, list(model_ids), list(families), list(owners), config,
                                              correct=correct, observed=observed)
    kept = population["kept"]
    fam_names = sorted(set(population["family"][kept].tolist()))
    code = {f: float(i) for i, f in enumerate(fam_names)}
    fam_code = np.array([code.get(f, np.nan) for f in population["family"].tolist()])
    owner_arr = population["owner"].astype(str)
    half_arr = population["half"]
    ids = np.asarray(model_ids, dtype=object)
    folds = []
    for fold, audit_half in enumerate(HALVES):
        check_cancel(cancel)
        audit_rows = reference_order(np.flatnonzero(kept & (half_arr == audit_half)), population["family"],
                                     owner_arr, ids)
        target_rows = np.flatnonzero(population["representative"] & (half_arr != audit_half) & kept)
        folds.append(run_fold(fold, audit_half, y_all, obs_all, audit_rows, target_rows, fam_code, len(fam_names),
                              owner_arr, groups, config, cancel, progress,
                              None if fixed_k is None else fixed_k[fold]))
    result = _assemble(config, population, split, folds, y_all, obs_all, groups, fam_code, owner_arr, fam_names,
                       cancel)
    if config.protocol == "full":  # the protocol's reruns compute on the float64 matrices, as they always have
        y_all, obs_all = _as_float(y_all), _as_float(obs_all)
    inputs = ProtocolInputs(responses, list(model_ids), list(families), list(owners), list(item_groups), mask,
                            y_all, obs_all, groups, fam_code, owner_arr, fam_names)
    return result, inputs


def _as_float(a: np.ndarray | None) -> np.ndarray | None:
    """A float64 copy of an int8 0/1 matrix (the protocol and secondary analyses take float64, as before)."""
    return None if a is None else np.asarray(a, dtype=np.float64)


def reference_order(rows: np.ndarray, family, owner, ids) -> np.ndarray:
    """``rows`` in the reference's population order, family, then owner, then model id (its frame is sorted by
    family, half, owner, model id).  The audit half's model columns go into the randomized SVDs in this order, and
    their Gaussian draws follow the columns: in another order the approximate factors differ where the spectrum is
    not well separated (issue 22's differential test: DIF ranges 0.07 apart on small populations)."""
    keys = [(family[r], owner[r], ids[r]) for r in rows.tolist()]
    return rows[sorted(range(rows.size), key=keys.__getitem__)]


def run_primary(responses, model_ids, families, owners, item_groups, config: AuditConfig = AuditConfig(), *,
                mask=None, progress: Progress = no_progress, cancel: threading.Event | None = None,
                fixed_k: tuple[int, int] | None = None) -> AuditResult:
    """:func:`primary_audit` without the protocol inputs (the reruns of Table 9 and of the split seeds)."""
    return primary_audit(responses, model_ids, families, owners, item_groups, config, mask=mask, progress=progress,
                         cancel=cancel, fixed_k=fixed_k)[0]


def with_secondary(config: AuditConfig) -> AuditConfig:
    """``protocol="full"`` switches every secondary analysis on, at the paper's settings where unset."""
    if config.protocol != "full":
        return config
    return replace(config, specificity=True, bootstrap=config.bootstrap or FULL_BOOTSTRAP,
                   gap_curve=config.gap_curve or FULL_GAP_CURVE,
                   fraction_sensitivity=config.fraction_sensitivity or FULL_FRACTIONS)


def check_config(config: AuditConfig) -> None:
    """Refuse a config the audit cannot run, with one line naming the field."""
    if config.protocol not in ("primary", "full"):
        raise EngineError(f"protocol must be 'primary' or 'full', not {config.protocol!r}")
    if config.representative not in ("median", "id"):
        raise EngineError(f"representative must be 'median' or 'id', not {config.representative!r}")
    if config.family_from not in ("name", "column", "arch"):
        raise EngineError(f"family_from must be 'name', 'column' or 'arch', not {config.family_from!r}")
    if config.anchor_ties not in ("exact", "float"):
        raise EngineError(f"anchor_ties must be 'exact' or 'float', not {config.anchor_ties!r}")
    if not 0 < config.anchor_fraction <= 1:
        raise EngineError(f"anchor_fraction must be in (0, 1], not {config.anchor_fraction}")
    if config.controls < 1:
        raise EngineError(f"controls must be at least 1, not {config.controls}")
    if not config.dimensions or min(config.dimensions) < 1:
        raise EngineError("the K grid must hold positive dimensions")


def _validate(responses, mask, model_ids, families, owners, item_groups):
    """The checked 0/1 matrix and observation mask as **int8** (``obs`` None when every cell is observed).

    int8 rather than float64: an eighth of the memory (70 MB instead of 560 MB at 5,000 x 14,000, issue 26),
    and every use is exact either way.  Sums of int8 arrays accumulate in int64 (the same integers the float64
    sums gave), and every product with a float64 array (matmuls, weights, logits) casts the 0/1 values to
    float64 first, so each score, Newton sum and loss is the same number bit for bit
    (tests/unit/test_neartie_memory.py).
    Missing cells (``mask`` 0) are 0 in the returned matrix, whatever the input holds there.
    """
    raw = np.asarray(responses)
    if raw.ndim != 2:
        raise EngineError("responses must be a models x items matrix")
    n_models, n_items = raw.shape
    for name, seq, size in (("model_ids", model_ids, n_models), ("families", families, n_models),
                            ("owners", owners, n_models), ("item_groups", item_groups, n_items)):
        if len(seq) != size:
            raise EngineError(f"{name} has {len(seq)} entries but the matrix needs {size}")
    if len(set(model_ids)) != n_models:
        raise EngineError(f"model ids must be unique: {n_models - len(set(model_ids))} duplicates")
    seen = None  # bool, observed cells; None: all observed
    obs = None
    if mask is not None:
        m = np.asarray(mask)
        if m.shape != raw.shape:
            raise EngineError(f"mask shape {m.shape} differs from responses {raw.shape}")
        seen = m > 0 if m.dtype != bool else m
        empty = int((~seen.any(axis=1)).sum())
        if empty:
            raise EngineError(f"{empty} models have no observed item: drop them")
        if seen.all():
            seen = None
        else:
            obs = _mask_values(m)
    if raw.dtype.kind in "biu":  # integers: range checks on the small dtype
        cells = raw if seen is None else np.where(seen, raw, 0)
        if cells.size and (cells.min() < 0 or cells.max() > 1):
            raise EngineError("responses must be 0/1")
        return cells.astype(np.int8, copy=False), obs
    y = np.asarray(raw, dtype=float)
    if seen is not None:
        y = np.where(seen, y, 0.0)
    if np.isnan(y).any():
        raise EngineError("responses contain missing values: pass a mask marking the observed cells")
    if not ((y == 0.0) | (y == 1.0)).all():
        raise EngineError("responses must be 0/1")
    return y.astype(np.int8), obs


def _mask_values(m: np.ndarray) -> np.ndarray:
    """The observation weights the audit multiplies by: int8 0/1 for a 0/1 (or bool) mask; a mask with other
    values keeps them in float64, as before (cells with weight > 0 count as observed)."""
    if m.dtype == bool:
        view = m.view(np.int8)  # no copy of the caller's mask, and never written through
        view.flags.writeable = False
        return view
    if m.dtype.kind in "biu" and m.size and m.min() >= 0 and m.max() <= 1:
        return m.astype(np.int8, copy=False)
    f = np.asarray(m, dtype=float)
    if ((f == 0.0) | (f == 1.0)).all():
        return f.astype(np.int8)
    return f


def run_fold(fold, audit_half, y_all, obs_all, audit_rows, target_rows, fam_code, n_fam, owner_arr, groups,
             config, cancel=None, progress: Progress = no_progress, fixed_k: int | None = None) -> FoldResult:
    """One direction: the audit rows choose K, DIF and anchors; the target rows are only scored.

    ``y_all``/``obs_all`` are models x items; ``fam_code`` holds family indices per input row.  Nothing of
    the target rows enters the fit, which the leakage test checks by flipping their responses.
    """
    y = y_all[audit_rows].T
    obs = None if obs_all is None else obs_all[audit_rows].T
    seed = config.nested_seed + fold
    steps = config.purification_rounds + 3  # selection, rounds, final refit, controls

    def step(k: int, message: str) -> None:
        progress((fold * steps + k) / (2 * steps), 1.0, f"{audit_half} audit half: {message}")

    step(0, "choosing K")
    if fixed_k is not None:  # D.2: K frozen from the primary run, not reselected
        selection = DimensionSelection(int(fixed_k), int(fixed_k), float("nan"), Columns())
    else:
        selection = select_dimension(y, obs, owner_arr[audit_rows], groups, config.dimensions, owner_seed=seed,
                                     svd_seed=seed, ridge=config.coordinate_ridge,
                                     validation_fraction=config.validation_fraction,
                                     calibration_fraction=config.calibration_fraction)
    check_cancel(cancel)
    seed0 = config.nested_seed + 1000 * fold + 100 * config.fraction_seed_index
    pur = purify(y, obs, fam_code[audit_rows].astype(int), n_fam, groups, selection.k, seed0=seed0,
                 fraction=config.anchor_fraction, rounds=config.purification_rounds, strata=config.strata,
                 penalty=config.dif_penalty, cycles=config.dif_cycles, cancel=cancel,
                 on_round=lambda r: step(1 + r, f"purification round {r + 1} (K={selection.k})"
                                         if r < config.purification_rounds else "final refit"))
    step(steps - 1, f"{config.controls} matched-random controls")
    y_t = y_all[target_rows]
    o_t = None if obs_all is None else obs_all[target_rows]
    full = _scores(y_t, o_t, np.ones(y_all.shape[1]))
    scale = exact_scale(pur.cells, pur.selected, y_all.shape[1]) if config.anchor_ties == "exact" else None
    ref_float = config.anchor_ties == "float" and o_t is None
    if ref_float:  # the reference's row layout: representatives sorted by (family, owner), see float_scores
        layout = np.lexsort((owner_arr[target_rows], fam_code[target_rows]))
        y_layout = y_t[layout]
        low = np.empty(target_rows.size)
        low[layout] = float_scores(y_layout, pur.weights)
    else:
        low = _scores(y_t, o_t, pur.weights, scale)
    tau = kendall_tau_b(full, low)
    if not np.isfinite(tau):
        raise EngineError(f"Kendall tau-b is undefined for the {target_rows.size} representatives scored by the "
                          f"{audit_half} audit half (all full or anchor scores equal): add models or items")
    pairs = make_pairs(full, owner_arr[target_rows], fam_code[target_rows], config.gap, config.gap_tolerance)
    counts = {}
    for name, m in (("all", pairs.eligible), ("cross", pairs.cross), ("close_cross", pairs.cross & pairs.close)):
        ok, flips = count_reversals(pairs, low, m)
        counts[f"{name}_pairs"], counts[f"{name}_reversals"] = int(ok[0]), int(flips[0])
    check_cancel(cancel)
    ctrl_w = control_weights(pur.cells, pur.selected, config.controls, config.control_seed + fold)
    if ref_float:
        control_low = np.empty((target_rows.size, ctrl_w.shape[1]))
        control_low[layout] = float_scores(y_layout, ctrl_w)
    else:
        control_low = _scores(y_t, o_t, ctrl_w, scale)
    ok, flips = count_reversals(pairs, control_low, pairs.cross & pairs.close)
    return FoldResult(audit_half, audit_rows, selection, pur, target_rows, full, low, tau, counts, control_low,
                      np.stack([ok, flips], axis=1))



def _pool(folds: list[FoldResult]) -> tuple[int, int, np.ndarray, np.ndarray]:
    return pool_folds([(f.counts["close_cross_pairs"], f.counts["close_cross_reversals"], f.control_counts)
                       for f in folds])


def _assemble(config, population, split: SplitLog, folds, y_all, obs_all, groups, fam_code, owner_arr, fam_names,
              cancel):
    pairs, flips, ctrl_pairs, ctrl_flips = _pool(folds)
    if pairs == 0:
        raise EngineError(
            f"no different-owner, different-family pairs within {100 * config.gap:g} pp in either target half "
            "(0 of at least 1 needed): widen the gap or add models"
        )
    test = randomization_test(pairs, flips, ctrl_pairs, ctrl_flips, config.significance)
    ids = population["model_id"]
    kept = population["kept"]
    summary = {
        "items": int(y_all.shape[1]), "input_models": int(len(ids)), "capped_models": int(kept.sum()),
        "owners": len(set(population["owner"][kept].tolist())), "families": len(fam_names),
        "item_groups": int(np.unique(groups).size),
        "representatives": int(sum(f.rep_index.size for f in folds)),
        "k_discovery": folds[0].selection.k, "k_validation": folds[1].selection.k,
        "tau_b": float(np.mean([f.tau_b for f in folds])),
        "eligible_pairs": pairs, "reversals": flips, **test, "controls": int(ctrl_pairs.size),
        "undefined_controls": int((ctrl_pairs == 0).sum()), **split.summary(),
    }
    fold_rows, curves, rounds, items, pair_rows, contrib = [], [], [], [], [], []
    for fold, f in enumerate(folds):
        target = HALVES[1 - fold]
        fold_rows.append({"audit_half": f.audit_half, "target_half": target, "k": f.selection.k,
                          "best_k": f.selection.best_k, "tau_b": f.tau_b,
                          "anchors": int(f.purification.selected.sum()),
                          "cells": int(np.unique(f.purification.cells).size),
                          "representatives": int(f.rep_index.size), **f.counts,
                          "close_cross_rate": _rate(f.counts["close_cross_reversals"], f.counts["close_cross_pairs"]),
                          "random_median": _median_rate(f.control_counts)})
        curves.append(f.selection.curve.assign(audit_half=f.audit_half))
        rounds.append(f.purification.rounds.assign(audit_half=f.audit_half, dimension=f.selection.k))
        fin = f.purification.final
        items.append(Columns({
            "audit_half": f.audit_half, "item": np.arange(y_all.shape[1]), "item_group": groups.astype(object),
            "cell": f.purification.cells, "anchor": f.purification.selected, "weight": f.purification.weights,
            "dif_range": fin.dif_range, "intercept": fin.intercept,
            **{f"effect_{name}": fin.effects[:, k] for k, name in enumerate(fam_names)}}))
        pr, ct = _pair_tables(fold, f, y_all, obs_all, ids, population, config)
        pair_rows.append(pr)
        contrib.append(ct)
    controls = Columns({"replicate": np.arange(ctrl_pairs.size), "eligible_pairs": ctrl_pairs,
                        "reversals": ctrl_flips,
                        "reversal_rate": np.where(ctrl_pairs > 0, ctrl_flips / np.maximum(ctrl_pairs, 1), np.nan)})
    secondary = {}
    if config.specificity or config.bootstrap or config.gap_curve or config.fraction_sensitivity:
        from .secondary import secondary_analyses

        secondary = secondary_analyses(config, folds, _as_float(y_all), _as_float(obs_all), groups, fam_code,
                                       owner_arr, cancel)
    full_score = np.full(len(ids), np.nan)
    anchor_score = np.full(len(ids), np.nan)
    for f in folds:
        full_score[f.rep_index] = f.full
        anchor_score[f.rep_index] = f.low
    population = population.assign(full_score=full_score, anchor_score=anchor_score)
    tables = {"population": population, "dimension_curves": Columns.concat(curves),
              "purification": Columns.concat(rounds),
              "folds": Columns({k: [r[k] for r in fold_rows] for k in fold_rows[0]}),
              "items": Columns.concat(items), "pairs": Columns.concat(pair_rows),
              "contributions": Columns.concat(contrib, CONTRIBUTION_COLUMNS), "controls": controls,
              "split_edges": split.edges()}
    return AuditResult(config, tables, summary, secondary, tuple(folds))



def _pair_tables(fold, f: FoldResult, y_all, obs_all, ids, population, config) -> tuple[Columns, Columns]:
    """Near-tie pairs of one fold and, for reversed pairs, the top per-item contributions to dL - dF."""
    rows = f.rep_index
    owner = population["owner"][rows]
    family = population["family"][rows]
    ps = make_pairs(f.full, owner, family, config.gap, config.gap_tolerance)
    m = ps.cross & ps.close
    i, j = ps.i[m], ps.j[m]
    d_full, d_low = f.full[i] - f.full[j], f.low[i] - f.low[j]
    tied = (d_full == 0) | (d_low == 0)
    reversed_ = ~tied & (d_full * d_low < 0)
    table = Columns({
        "fold": fold, "target_half": HALVES[1 - fold], "model_a": ids[rows[i]], "model_b": ids[rows[j]],
        "family_a": family[i], "family_b": family[j], "owner_a": owner[i], "owner_b": owner[j],
        "full_a": f.full[i], "full_b": f.full[j], "anchor_a": f.low[i], "anchor_b": f.low[j],
        "gap": np.abs(d_full), "tied": tied, "reversed": reversed_,
        **pair_robustness(d_full, f.control_low, i, j)})
    ra, rb, df = rows[i[reversed_]], rows[j[reversed_]], d_full[reversed_]
    parts = [_contributions(fold, ra[c:c + 256], rb[c:c + 256], df[c:c + 256], f.purification.weights, y_all,
                            obs_all, ids, config.top_items) for c in range(0, ra.size, 256)]
    return table, Columns.concat(parts, CONTRIBUTION_COLUMNS)


def pair_robustness(d_full: np.ndarray, control_low: np.ndarray, i: np.ndarray, j: np.ndarray) -> dict:
    """Per-pair robustness (ours, beyond the paper): in what fraction of the R matched-random recompositions
    does each near-tie pair strictly reverse, and in what fraction is it tied under the control score.

    Beside ``reversed`` (the low-DIF recomposition) it tells a curator whether an ordering is fragile under
    any same-blueprint recomposition (high fraction) or only under the low-DIF one (low fraction).
    """
    r = control_low.shape[1]
    flips = np.zeros(i.size)
    ties = np.zeros(i.size)
    for start in range(0, r, 64):
        d_low = control_low[i, start:start + 64] - control_low[j, start:start + 64]
        flips += (d_full[:, None] * d_low < 0).sum(axis=1)
        ties += (d_low == 0).sum(axis=1)
    return {"random_reversal_fraction": flips / r, "random_tie_fraction": ties / r}


CONTRIBUTION_COLUMNS = ["fold", "model_a", "model_b", "item", "weight", "y_a", "y_b", "full_contribution",
                        "anchor_contribution", "contribution"]


def _contributions(fold, ra, rb, df, w, y_all, obs_all, ids, top_items) -> Columns:
    """Per-item terms of (anchor gap - full gap) for reversed pairs; the top items pushing toward the reversal.

    Term of item i: w_i y_ai / W_a - w_i y_bi / W_b - (y_ai / n_a - y_bi / n_b), W and n summed over each
    model's observed items; the terms sum exactly to (anchor_a - anchor_b) - (full_a - full_b).
    """
    ya, yb = y_all[ra], y_all[rb]
    if obs_all is None:
        anchor = (ya - yb) * (w / w.sum())
        full = (ya - yb) / ya.shape[1]
    else:
        oa, ob = obs_all[ra], obs_all[rb]
        anchor = w * oa * ya / (w * oa).sum(axis=1, keepdims=True) - w * ob * yb / (w * ob).sum(axis=1, keepdims=True)
        full = oa * ya / oa.sum(axis=1, keepdims=True) - ob * yb / ob.sum(axis=1, keepdims=True)
    total = anchor - full
    toward = -np.sign(df)[:, None] * total
    k = min(top_items, toward.shape[1])
    top = np.argpartition(-toward, k - 1, axis=1)[:, :k]
    top = np.take_along_axis(top, np.argsort(-np.take_along_axis(toward, top, axis=1), axis=1, kind="stable"), axis=1)
    pair = np.repeat(np.arange(ra.size), k)
    item = top.ravel()
    keep = toward[pair, item] > 0
    pair, item = pair[keep], item[keep]
    return Columns({
        "fold": fold, "model_a": ids[ra[pair]], "model_b": ids[rb[pair]], "item": item, "weight": w[item],
        "y_a": ya[pair, item].astype(int), "y_b": yb[pair, item].astype(int),
        "full_contribution": full[pair, item], "anchor_contribution": anchor[pair, item],
        "contribution": total[pair, item]}, columns=CONTRIBUTION_COLUMNS)


