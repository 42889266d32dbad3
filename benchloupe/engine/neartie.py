"""Family-DIF near-tie audit (paper 002, Sections 3.1-3.4, Appendices C.1, C.6, C.7, D.1).

What: split models into two owner-disjoint halves; in each direction the audit half chooses the spectral MIRT
dimension, estimates residual family DIF and builds purified low-DIF anchor weights (:mod:`.dif`), and the
frozen weights rescore the other half's owner-family representatives.  Different-owner, different-family
pairs within the full-score gap are checked for strict reversals, pooled over both folds, and compared with
R blueprint-matched random subtests.  Why: a composition-robustness check for sub-point leaderboard gaps.

Paper vs reference (REFERENCE-IMPLEMENTATIONS.md B.1, B.6, B.7, B.11); the reference's choices are defaults:
- Population follows the reference's maintainer CLI (``family-dif-audit``, which produced the stored reference
  outputs): families sorted, balance cost divided by the family total, >= 2 models per family per half and a
  feasible nested owner split in each half.
- The gap test ``|full_a - full_b| <= gap`` is evaluated in floating point like the reference, so some
  one-item gaps on 100 items (0.10 - 0.09 = 0.010000000000000009; 80 of the 99 such gaps) fall outside a
  1 pp band.  ``gap_tolerance`` > 0 is a named option that widens the comparison (``<= gap + tolerance``).
- Ties under either score are excluded per rule; rates pool counts, never fold rates.  Anchor scores are
  computed with integer-scaled weights (``anchor_ties="exact"``, our default) so a tie is a true rational tie;
  ``anchor_ties="float"`` is the reference's plain float arithmetic, whose tie count depends on the BLAS
  summation order (on ARC it counts 134 pairs where 130 are not truly tied).
- Seeds: population 20260821, nested owner/SVD 20260826 + fold, controls 20260825 + fold, composition
  bootstrap 20260824 + fold, purification 20260826 + 1000 fold + 100 x fraction index (the maintainer uses
  index 1 for every fraction: ``fraction_seed_index``; the fraction-sensitivity analysis uses 0/1/2 for
  .3/.5/.7 as the paper pipeline does).  The purification base is the un-shifted 20260826 (the reference
  notes say "svd_seed"): only that reproduces the reference's exported DIF ranges (to 1e-13).
- Missing cells (``mask``): full and anchor scores are weighted means over the observed items of each model;
  fits use observed cells only (see :mod:`.dif`).  The reference refuses missing cells.

Secondary analyses (on request): within-family specificity (B.3, eqs. 54-55), composition bootstrap (C.7),
gap-threshold curve (Table 7 / Figure 2), anchor-fraction sensitivity (Table 8, descriptive only).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.dif import DimensionSelection, Purification, purify, select_dimension

HALVES = ("discovery", "validation")
STATUS_DETECTED = "excess_sensitivity_detected"
STATUS_NOT_DETECTED = "no_significant_excess_detected"
STATUS_INSUFFICIENT = "insufficient_eligible_pairs"
STATUS_UNDEFINED = "undefined_random_controls"
FRACTION_INDEX = {0.3: 0, 0.5: 1, 0.7: 2}


@dataclass(frozen=True)
class AuditConfig:
    """Primary settings of paper 002 (Table 12, Appendices C-D; reference B.7).

    ``anchor_ties="exact"`` scores anchors with integer-scaled weights so that exact ties are true ties;
    ``"float"`` is the reference's plain float arithmetic (its tie count then depends on the BLAS).
    ``gap`` is the near-tie band in score units (0.01 = 1 pp) compared in floating point as the reference
    does; ``gap_tolerance`` widens it (0 reproduces the reference).  Secondary analyses are off by default.
    """

    dimensions: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    purification_rounds: int = 3
    anchor_fraction: float = 0.5
    strata: int = 4
    gap: float = 0.01
    gap_tolerance: float = 0.0
    anchor_ties: str = "exact"
    controls: int = 1000
    owner_cap: int = 5
    min_family_models: int = 20
    min_family_models_per_half: int = 2
    validation_fraction: float = 0.25
    calibration_fraction: float = 0.5
    coordinate_ridge: float = 1.0
    dif_penalty: float = 1.0
    dif_cycles: int = 5
    family_seed: int = 20260821
    nested_seed: int = 20260826
    control_seed: int = 20260825
    bootstrap_seed: int = 20260824
    fraction_seed_index: int = 1
    significance: float = 0.05
    top_items: int = 10
    specificity: bool = False
    bootstrap: int = 0
    gap_curve: tuple[float, ...] = ()
    fraction_sensitivity: tuple[float, ...] = ()


@dataclass(frozen=True)
class FoldResult:
    """One audit direction: audit half -> target half."""

    audit_half: str
    audit_rows: np.ndarray  # row indices (into the input) of the audit half's capped models
    selection: DimensionSelection
    purification: Purification
    rep_index: np.ndarray  # row indices (into the input) of scored target representatives
    full: np.ndarray
    low: np.ndarray
    tau_b: float
    counts: dict[str, int]
    control_low: np.ndarray  # reps x R anchor-length control scores
    control_counts: np.ndarray  # R x 2 (pairs, reversals) for close cross-family pairs


@dataclass(frozen=True)
class AuditResult:
    """Everything the curator sees (see docs/NEARTIE.md for field meanings)."""

    config: AuditConfig
    population: pd.DataFrame
    dimension_curves: pd.DataFrame
    purification: pd.DataFrame
    folds: pd.DataFrame
    items: pd.DataFrame
    pairs: pd.DataFrame
    contributions: pd.DataFrame
    controls: pd.DataFrame
    summary: dict
    secondary: dict = field(default_factory=dict)

    def table1_row(self) -> dict:
        """The paper's Table 1 quantities, pooled over folds."""
        keys = ("items", "k_discovery", "k_validation", "tau_b", "eligible_pairs", "reversals", "rate",
                "random_median", "excess_pp", "p", "status")
        return {k: self.summary[k] for k in keys}

    def to_markdown(self) -> str:
        """A short Markdown report of the primary result and the fold details."""
        s = self.summary
        lines = [
            "# Family-DIF near-tie audit", "",
            f"Status: **{s['status']}**", "",
            f"Items: {s['items']}; capped models: {s['capped_models']}; owners: {s['owners']}; "
            f"families: {s['families']}; scored representatives: {s['representatives']}.",
            f"Near tie: different owner, different family, |full gap| <= {100 * self.config.gap:g} pp "
            f"(tolerance {self.config.gap_tolerance:g}).", "",
            "| quantity | value |", "|---|---:|",
            f"| K (discovery / validation audit) | {s['k_discovery']} / {s['k_validation']} |",
            f"| mean fold Kendall tau-b | {s['tau_b']:.3f} |",
            f"| near-tie pairs (ties excluded) | {s['eligible_pairs']} |",
            f"| low-DIF reversals | {s['reversals']} |",
            f"| low-DIF reversal rate | {_pct(s['rate'])} |",
            f"| matched-random median | {_pct(s['random_median'])} |",
            f"| excess (pp) | {_num(s['excess_pp'], '+.1f')} |",
            f"| one-sided p (R = {self.config.controls}) | {_num(s['p'], '.3f')} |", "",
            "## Folds", "", _md_table(self.folds), "",
        ]
        for name, table in self.secondary.items():
            lines += [f"## {name}", "", _md_table(table), ""]
        return "\n".join(lines)


def _md_table(table: pd.DataFrame) -> str:
    """A plain Markdown table (no optional ``tabulate`` dependency); floats to 4 significant digits."""
    def cell(value) -> str:
        if isinstance(value, float | np.floating):
            return "n/a" if np.isnan(value) else f"{value:.4g}"
        return "n/a" if value is None else str(value)

    head = "| " + " | ".join(map(str, table.columns)) + " |"
    rule = "|" + "---|" * len(table.columns)
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([head, rule, *rows])


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


# ----------------------------------------------------------------------------- population (C.1, B.1)


def build_population(
    accuracy: np.ndarray, model_ids: list[str], families: list[str | None], owners: list[str], config: AuditConfig
) -> pd.DataFrame:
    """Cap, split and pick representatives: one row per input model with kept/why/half/representative."""
    n = len(model_ids)
    fam = np.array([f if f else "" for f in families], dtype=object)
    own = np.array([o.lower() for o in owners], dtype=object)
    why = np.where(fam == "", "no family", "").astype(object)
    family_names = sorted({f for f in fam if f})
    if len(family_names) < 2:
        raise EngineError(f"the audit needs at least 2 model families, found {len(family_names)} "
                          f"({', '.join(family_names) or 'none'}): 1 more family needed")
    rng = np.random.default_rng(config.family_seed)
    kept = np.zeros(n, dtype=bool)
    for f in family_names:
        in_family = np.flatnonzero(fam == f)
        by_owner: dict[str, list[int]] = {}
        for i in in_family:
            by_owner.setdefault(own[i], []).append(int(i))
        for o in sorted(by_owner):
            idx = np.array(by_owner[o])
            if idx.size > config.owner_cap:
                chosen = np.sort(rng.choice(idx, config.owner_cap, replace=False))
                kept[chosen] = True
                why[np.setdiff1d(idx, chosen)] = f"over owner cap {config.owner_cap}"
            else:
                kept[idx] = True
    for f in family_names:
        count = int((kept & (fam == f)).sum())
        if count < config.min_family_models:
            raise EngineError(f"family {f!r} has {count} models after the owner cap, "
                              f"{config.min_family_models - count} short of the minimum {config.min_family_models}")
    code = {f: i for i, f in enumerate(family_names)}
    kept_idx = np.flatnonzero(kept)
    owner_names = np.unique(own[kept_idx].astype(str))
    if owner_names.size < 4:
        raise EngineError(f"the owner split needs at least 4 owners, found {owner_names.size}: "
                          f"{4 - owner_names.size} more needed")
    n_fam = len(family_names)
    g_of = np.searchsorted(owner_names, own[kept_idx].astype(str))
    f_of = np.array([code[f] for f in fam[kept_idx]])
    counts = np.zeros((owner_names.size, n_fam))
    sums = np.zeros((owner_names.size, n_fam))
    np.add.at(counts, (g_of, f_of), 1.0)
    np.add.at(sums, (g_of, f_of), accuracy[kept_idx])
    ties = np.array([rng.uniform() for _ in owner_names])
    totals = counts.sum(axis=0)
    means = sums.sum(axis=0) / totals
    order = sorted(range(owner_names.size), key=lambda g: (-counts[g].sum(), ties[g]))
    side_counts = np.zeros((2, n_fam))
    side_sums = np.zeros((2, n_fam))
    side_of = np.zeros(owner_names.size, dtype=int)
    for g in order:
        costs = []
        for side in (0, 1):
            c = side_counts.copy()
            s = side_sums.copy()
            c[side] += counts[g]
            s[side] += sums[g]
            imbalance = np.abs(c[0] - c[1]) / totals
            score = np.abs((s[0] - c[0] * means) - (s[1] - c[1] * means)) / totals
            costs.append(float(imbalance.sum() + score.sum()))
        side = int(rng.integers(0, 2)) if costs[0] == costs[1] else int(np.argmin(costs))
        side_counts[side] += counts[g]
        side_sums[side] += sums[g]
        side_of[g] = side
    for side in (0, 1):
        for f in family_names:
            have = int(side_counts[side, code[f]])
            if have < config.min_family_models_per_half:
                raise EngineError(f"family {f!r} has {have} models in the {HALVES[side]} half, "
                                  f"{config.min_family_models_per_half - have} short of the per-half minimum "
                                  f"{config.min_family_models_per_half}")
    half = np.full(n, None, dtype=object)
    half[kept_idx] = np.array(HALVES, dtype=object)[side_of[g_of]]
    representative = np.zeros(n, dtype=bool)
    groups: dict[tuple[str, str], list[int]] = {}
    for i in kept_idx:
        groups.setdefault((own[i], fam[i]), []).append(int(i))
    for members in groups.values():
        acc = accuracy[members]
        dist = np.abs(acc - np.median(acc))
        representative[min(zip(dist, (model_ids[i] for i in members), members, strict=True))[2]] = True
    return pd.DataFrame({"model_id": list(model_ids), "family": [f or None for f in fam], "owner": own,
                         "accuracy": accuracy, "half": half, "kept": kept, "why": why,
                         "representative": representative})


# ----------------------------------------------------------------------------- scoring and pairs (3.4, D.1)


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

    ``scale`` (see :func:`exact_scale`) turns the weights into exact integers for complete data.
    """
    if obs is None:
        if scale is not None:
            weights = np.rint(weights * scale)
        return (y @ weights) / weights.sum(axis=0)
    return ((y * obs) @ weights) / (obs @ weights)


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


# ----------------------------------------------------------------------------- the audit


def run_audit(
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
) -> AuditResult:
    """Run the primary audit (and requested secondary analyses) on a models x items 0/1 matrix.

    ``mask`` (same shape, 1 = observed) marks missing cells; without it the matrix must be complete 0/1.
    """
    _check_config(config)
    y_all, obs_all = _validate(responses, mask, model_ids, families, owners, item_groups)
    groups = np.asarray(item_groups, dtype=str)
    n_items = y_all.shape[1]
    accuracy = _scores(y_all, obs_all, np.ones(n_items))
    population = build_population(accuracy, list(model_ids), list(families), list(owners), config)
    kept = population["kept"].to_numpy()
    fam_names = sorted(set(population.loc[kept, "family"]))
    fam_code = population["family"].map({f: i for i, f in enumerate(fam_names)}).to_numpy(dtype=float)
    owner_arr = population["owner"].to_numpy().astype(str)
    half_arr = population["half"].to_numpy()
    folds = []
    for fold, audit_half in enumerate(HALVES):
        check_cancel(cancel)
        audit_rows = np.flatnonzero(kept & (half_arr == audit_half))
        target_rows = np.flatnonzero(population["representative"].to_numpy() & (half_arr != audit_half)
                                     & kept)
        folds.append(run_fold(fold, audit_half, y_all, obs_all, audit_rows, target_rows, fam_code, len(fam_names),
                              owner_arr, groups, config, cancel, progress))
    progress(1.0, 1.0, "audit done")
    return _assemble(config, population, folds, y_all, obs_all, groups, fam_code, owner_arr, fam_names, cancel)


def _check_config(config: AuditConfig) -> None:
    if config.anchor_ties not in ("exact", "float"):
        raise EngineError(f"anchor_ties must be 'exact' or 'float', not {config.anchor_ties!r}")
    if not 0 < config.anchor_fraction <= 1:
        raise EngineError(f"anchor_fraction must be in (0, 1], not {config.anchor_fraction}")
    if config.controls < 1:
        raise EngineError(f"controls must be at least 1, not {config.controls}")
    if not config.dimensions or min(config.dimensions) < 1:
        raise EngineError("the K grid must hold positive dimensions")


def _validate(responses, mask, model_ids, families, owners, item_groups):
    y = np.asarray(responses, dtype=float)
    if y.ndim != 2:
        raise EngineError("responses must be a models x items matrix")
    n_models, n_items = y.shape
    for name, seq, size in (("model_ids", model_ids, n_models), ("families", families, n_models),
                            ("owners", owners, n_models), ("item_groups", item_groups, n_items)):
        if len(seq) != size:
            raise EngineError(f"{name} has {len(seq)} entries but the matrix needs {size}")
    if len(set(model_ids)) != n_models:
        raise EngineError(f"model ids must be unique: {n_models - len(set(model_ids))} duplicates")
    obs = None
    if mask is not None:
        obs = np.asarray(mask, dtype=float)
        if obs.shape != y.shape:
            raise EngineError(f"mask shape {obs.shape} differs from responses {y.shape}")
        y = np.where(obs > 0, y, 0.0)
        if (obs.sum(axis=1) == 0).any():
            raise EngineError(f"{int((obs.sum(axis=1) == 0).sum())} models have no observed item: drop them")
        if obs.all():
            obs = None
    if np.isnan(y).any():
        raise EngineError("responses contain missing values: pass a mask marking the observed cells")
    if not np.isin(y, (0.0, 1.0)).all():
        raise EngineError("responses must be 0/1")
    return y, obs


def run_fold(fold, audit_half, y_all, obs_all, audit_rows, target_rows, fam_code, n_fam, owner_arr, groups,
             config, cancel=None, progress: Progress = no_progress) -> FoldResult:
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
    low = _scores(y_t, o_t, pur.weights, scale)
    tau = float(kendalltau(full, low, variant="b").statistic)
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
    control_low = _scores(y_t, o_t, ctrl_w, scale)
    ok, flips = count_reversals(pairs, control_low, pairs.cross & pairs.close)
    return FoldResult(audit_half, audit_rows, selection, pur, target_rows, full, low, tau, counts, control_low,
                      np.stack([ok, flips], axis=1))


def pool_folds(per_fold: list[tuple[int, int, np.ndarray]]) -> tuple[int, int, np.ndarray, np.ndarray]:
    """Sum (pairs, reversals, control R x 2 counts) over folds: rates come from pooled counts (C.6)."""
    pairs = sum(p for p, _, _ in per_fold)
    flips = sum(r for _, r, _ in per_fold)
    ctrl = sum(c for _, _, c in per_fold)
    return int(pairs), int(flips), ctrl[:, 0], ctrl[:, 1]


def _pool(folds: list[FoldResult]) -> tuple[int, int, np.ndarray, np.ndarray]:
    return pool_folds([(f.counts["close_cross_pairs"], f.counts["close_cross_reversals"], f.control_counts)
                       for f in folds])


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


def _assemble(config, population, folds, y_all, obs_all, groups, fam_code, owner_arr, fam_names, cancel):
    pairs, flips, ctrl_pairs, ctrl_flips = _pool(folds)
    if pairs == 0:
        raise EngineError(
            f"no different-owner, different-family pairs within {100 * config.gap:g} pp in either target half "
            "(0 of at least 1 needed): widen the gap or add models"
        )
    test = randomization_test(pairs, flips, ctrl_pairs, ctrl_flips, config.significance)
    ids = population["model_id"].to_numpy()
    kept = population["kept"].to_numpy()
    summary = {
        "items": int(y_all.shape[1]), "input_models": int(len(ids)), "capped_models": int(kept.sum()),
        "owners": int(population.loc[kept, "owner"].nunique()), "families": len(fam_names),
        "item_groups": int(np.unique(groups).size),
        "representatives": int(sum(f.rep_index.size for f in folds)),
        "k_discovery": folds[0].selection.k, "k_validation": folds[1].selection.k,
        "tau_b": float(np.mean([f.tau_b for f in folds])),
        "eligible_pairs": pairs, "reversals": flips, **test, "controls": int(ctrl_pairs.size),
        "undefined_controls": int((ctrl_pairs == 0).sum()),
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
        item_table = pd.DataFrame({
            "audit_half": f.audit_half, "item": np.arange(y_all.shape[1]), "item_group": groups,
            "cell": f.purification.cells, "anchor": f.purification.selected, "weight": f.purification.weights,
            "dif_range": fin.dif_range, "intercept": fin.intercept})
        for k, name in enumerate(fam_names):
            item_table[f"effect_{name}"] = fin.effects[:, k]
        items.append(item_table)
        pr, ct = _pair_tables(fold, f, y_all, obs_all, ids, population, config)
        pair_rows.append(pr)
        contrib.append(ct)
    controls = pd.DataFrame({"replicate": np.arange(ctrl_pairs.size), "eligible_pairs": ctrl_pairs,
                             "reversals": ctrl_flips,
                             "reversal_rate": np.where(ctrl_pairs > 0, ctrl_flips / np.maximum(ctrl_pairs, 1), np.nan)})
    secondary = _secondary(config, folds, y_all, obs_all, groups, fam_code, owner_arr, cancel)
    scores = {int(r): (s_full, s_low) for f in folds for r, s_full, s_low in zip(f.rep_index, f.full, f.low,
                                                                                strict=True)}
    population = population.assign(
        full_score=[scores.get(i, (np.nan, np.nan))[0] for i in range(len(ids))],
        anchor_score=[scores.get(i, (np.nan, np.nan))[1] for i in range(len(ids))])
    return AuditResult(config, population, pd.concat(curves, ignore_index=True),
                       pd.concat(rounds, ignore_index=True), pd.DataFrame(fold_rows),
                       pd.concat(items, ignore_index=True), pd.concat(pair_rows, ignore_index=True),
                       pd.concat(contrib, ignore_index=True), controls, summary, secondary)


def _rate(flips: int, pairs: int) -> float | None:
    return flips / pairs if pairs else None


def _median_rate(counts: np.ndarray) -> float | None:
    if (counts[:, 0] == 0).any():
        return None
    return float(np.median(counts[:, 1] / counts[:, 0]))


def _pair_tables(fold, f: FoldResult, y_all, obs_all, ids, population, config) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Near-tie pairs of one fold and, for reversed pairs, the top per-item contributions to dL - dF."""
    rows = f.rep_index
    owner = population["owner"].to_numpy()[rows]
    family = population["family"].to_numpy()[rows]
    ps = make_pairs(f.full, owner, family, config.gap, config.gap_tolerance)
    m = ps.cross & ps.close
    i, j = ps.i[m], ps.j[m]
    d_full, d_low = f.full[i] - f.full[j], f.low[i] - f.low[j]
    tied = (d_full == 0) | (d_low == 0)
    reversed_ = ~tied & (d_full * d_low < 0)
    table = pd.DataFrame({
        "fold": fold, "target_half": HALVES[1 - fold], "model_a": ids[rows[i]], "model_b": ids[rows[j]],
        "family_a": family[i], "family_b": family[j], "owner_a": owner[i], "owner_b": owner[j],
        "full_a": f.full[i], "full_b": f.full[j], "anchor_a": f.low[i], "anchor_b": f.low[j],
        "gap": np.abs(d_full), "tied": tied, "reversed": reversed_})
    ra, rb, df = rows[i[reversed_]], rows[j[reversed_]], d_full[reversed_]
    parts = [_contributions(fold, ra[c:c + 256], rb[c:c + 256], df[c:c + 256], f.purification.weights, y_all,
                            obs_all, ids, config.top_items) for c in range(0, ra.size, 256)]
    return table, (pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=CONTRIBUTION_COLUMNS))


CONTRIBUTION_COLUMNS = ["fold", "model_a", "model_b", "item", "weight", "y_a", "y_b", "full_contribution",
                        "anchor_contribution", "contribution"]


def _contributions(fold, ra, rb, df, w, y_all, obs_all, ids, top_items) -> pd.DataFrame:
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
    return pd.DataFrame({
        "fold": fold, "model_a": ids[ra[pair]], "model_b": ids[rb[pair]], "item": item, "weight": w[item],
        "y_a": ya[pair, item].astype(int), "y_b": yb[pair, item].astype(int),
        "full_contribution": full[pair, item], "anchor_contribution": anchor[pair, item],
        "contribution": total[pair, item]}, columns=CONTRIBUTION_COLUMNS)


# ----------------------------------------------------------------------------- secondary analyses


def _secondary(config, folds, y_all, obs_all, groups, fam_code, owner_arr, cancel) -> dict:
    out: dict = {}
    if config.specificity:
        out["within-family specificity"] = _specificity(config, folds, owner_arr, fam_code)
    if config.gap_curve:
        out["gap-threshold curve"] = _gap_curve(config, folds, owner_arr, fam_code)
    if config.bootstrap:
        check_cancel(cancel)
        out["composition bootstrap"] = _bootstrap(config, folds, y_all, obs_all, groups, owner_arr, fam_code)
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


def _gap_curve(config, folds, owner_arr, fam_code) -> pd.DataFrame:
    """Observed vs matched-random reversal rates at each full-score gap (pp), pairs frozen from full scores."""
    rows = []
    for gap_pp in config.gap_curve:
        obs = np.zeros(2, dtype=int)
        ctrl = np.zeros((config.controls, 2), dtype=int)
        for f in folds:
            ps = _fold_pairs(f, owner_arr, fam_code, gap_pp / 100, config.gap_tolerance)
            ok, fl = count_reversals(ps, f.low, ps.cross & ps.close)
            obs += [ok[0], fl[0]]
            ok, fl = count_reversals(ps, f.control_low, ps.cross & ps.close)
            ctrl += np.stack([ok, fl], axis=1)
        test = randomization_test(int(obs[0]), int(obs[1]), ctrl[:, 0], ctrl[:, 1], config.significance)
        rows.append({"gap_pp": gap_pp, "pairs": int(obs[0]), "reversals": int(obs[1]), **test})
    return pd.DataFrame(rows)


def _bootstrap(config, folds, y_all, obs_all, groups, owner_arr, fam_code) -> pd.DataFrame:
    """Composition bootstrap (C.7): resample item-group blocks (or 100 contiguous clusters), close mask frozen."""
    n_items = y_all.shape[1]
    names = np.unique(groups)
    if names.size >= 5:
        unit = np.searchsorted(names, groups)
    else:
        unit = np.floor(np.arange(n_items) * 100 / n_items).astype(int)
    n_units = int(unit.max()) + 1
    onehot = np.zeros((n_items, n_units))
    onehot[np.arange(n_items), unit] = 1.0
    b = config.bootstrap
    pooled = np.zeros((b, 2))
    taus = np.zeros((b, len(folds)))
    for fold, f in enumerate(folds):
        rng = np.random.default_rng(config.bootstrap_seed + fold)
        draws = rng.multinomial(n_units, np.full(n_units, 1 / n_units), size=b).T.astype(float)  # units x B
        y_t = y_all[f.rep_index]
        o_t = np.ones_like(y_t) if obs_all is None else obs_all[f.rep_index]
        w = f.purification.weights
        full = ((y_t * o_t) @ onehot @ draws) / (o_t @ onehot @ draws)
        low = ((y_t * o_t * w) @ onehot @ draws) / ((o_t * w) @ onehot @ draws)
        ps = _fold_pairs(f, owner_arr, fam_code, config.gap, config.gap_tolerance)
        m = ps.cross & ps.close
        sel_i, sel_j = ps.i[m], ps.j[m]
        d_full = full[sel_i] - full[sel_j]
        d_low = low[sel_i] - low[sel_j]
        ok = (d_full != 0) & (d_low != 0)
        pooled += np.stack([ok.sum(axis=0), (ok & (d_full * d_low < 0)).sum(axis=0)], axis=1)
        taus[:, fold] = [kendalltau(full[:, r], low[:, r], variant="b").statistic for r in range(b)]
    rate = pooled[:, 1] / np.where(pooled[:, 0] > 0, pooled[:, 0], np.nan)
    tau = taus.mean(axis=1)
    return pd.DataFrame([{"replicates": b, "units": n_units,
                          "rate_lo": float(np.nanquantile(rate, 0.025)), "rate_hi": float(np.nanquantile(rate, 0.975)),
                          "tau_lo": float(np.quantile(tau, 0.025)), "tau_hi": float(np.quantile(tau, 0.975))}])


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
            taus.append(float(kendalltau(f.full, low, variant="b").statistic))
            ps = _fold_pairs(f, owner_arr, fam_code, config.gap, config.gap_tolerance)
            ok, fl = count_reversals(ps, low, ps.cross & ps.close)
            ok_total += int(ok[0])
            fl_total += int(fl[0])
            anchors.append(int(pur.selected.sum()))
        rows.append({"fraction": frac, "anchors": "/".join(map(str, anchors)), "tau_b": float(np.mean(taus)),
                     "pairs": ok_total, "reversals": fl_total, "rate": _rate(fl_total, ok_total)})
    return pd.DataFrame(rows)
