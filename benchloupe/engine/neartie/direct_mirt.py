"""Direct penalised joint logistic MIRT in place of the spectral offsets (paper 002 B.1, Table 4).

Loss (eq. 12): mean Bernoulli deviance of z_im = b_i + a_i . theta_m, plus lambda/2 (mean ||a_i||^2 +
mean ||theta_m||^2) + eta/I sum b_i^2, lambda = .01, eta = 5e-5.  Full-batch Adam (lr .03, betas .9/.999,
eps 1e-8), at most ``max_updates`` updates (the paper: 6,000), objective checked every 20 updates, stop after
three consecutive absolute changes < 1e-6; gradient-norm clip 10 for joint and coordinate-only fits.
Loadings and coordinates start N(0, (0.1 K^-1/4)^2), intercepts at the smoothed empirical logit; every joint
fit keeps the better (lower penalised objective) of ``inits`` = 2 initialisations, as the paper does.

K is reselected on the same inner owner / item split and grid as C.3 (validation coordinates fitted on
calibration items with the item parameters fixed, held-out log loss on evaluation items, one-SE rule).
Purification: each round learns coordinates from the selected items (joint fit), centres and freezes them,
fits all items' loadings and intercepts, and hands clip(a_i . theta_m, +-6) to the unchanged residual-DIF
routine; three rounds (the final diagnostic refit changes no weight and is skipped); then the same scoring
and 1,000 matched-random controls.
Fits in float32 numpy like the paper's float32 CPU torch (residual DIF in float64 as in the primary), so
numbers are comparable, not identical.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchloupe.engine import replicates
from benchloupe.engine.common import EngineError, check_cancel
from benchloupe.engine.dif import anchor_weights, difficulty_cells, fit_family_dif, item_rates

from .results import AuditResult, ProtocolInputs
from .scoring import _scores, control_weights, count_reversals, exact_scale, make_pairs, randomization_test

LAMBDA, ETA = 0.01, 5e-5
OFFSET_CLIP = 6.0


@dataclass
class _Params:
    a: np.ndarray  # items x K
    b: np.ndarray  # items
    theta: np.ndarray  # models x K


def _tanh_sigmoid_inplace(z):
    """0.5 (1 + tanh(z / 2)) written over ``z``: the same operations in the same order as the out-of-place
    expression, so bit for bit the same numbers, without four temporaries of the items x models size (a quarter of
    an update's time at 14,000 items; issue 36)."""
    np.multiply(z, 0.5, out=z)
    np.tanh(z, out=z)
    z += 1.0
    z *= 0.5
    return z


def _objective_and_grads(y, obs, p: _Params, fit_items: bool, fit_theta: bool, need_loss: bool):
    n_i, n_m = y.shape
    z = p.a @ p.theta.T
    z += p.b[:, None]
    scale = float(n_i * n_m) if obs is None else float(obs.sum())
    loss = np.nan
    if need_loss:  # the objective is only looked at every 20 updates
        dev = np.logaddexp(0.0, z) - y * z
        if obs is not None:
            dev *= obs
        loss = float(dev.sum(dtype=np.float64)) / scale + LAMBDA / 2 * (
            float((p.a ** 2).sum()) / n_i + float((p.theta ** 2).sum()) / n_m) + ETA / n_i * float((p.b ** 2).sum())
    r = _tanh_sigmoid_inplace(z)  # z is not used again
    r -= y
    if obs is not None:
        r *= obs
    r *= 1.0 / scale
    grads = {}
    if fit_items:
        grads["a"] = r @ p.theta + LAMBDA * p.a / n_i
        grads["b"] = r.sum(axis=1) + 2 * ETA * p.b / n_i
    if fit_theta:
        grads["theta"] = r.T @ p.a + LAMBDA * p.theta / n_m
    return loss, grads


def adam_fit(y, obs, p: _Params, *, fit_items=True, fit_theta=True, clip=10.0, lr=0.03, max_updates=6000,
             cancel=None) -> tuple[_Params, float, int]:
    """Full-batch Adam with the paper's plateau rule; returns (params, objective, updates)."""
    keys = [k for k, on in (("a", fit_items), ("b", fit_items), ("theta", fit_theta)) if on]
    m = {k: np.zeros_like(getattr(p, k)) for k in keys}
    v = {k: np.zeros_like(getattr(p, k)) for k in keys}
    last, small, loss = None, 0, np.inf
    for t in range(1, max_updates + 1):
        check = t % 20 == 0
        loss_t, g = _objective_and_grads(y, obs, p, fit_items, fit_theta, check)
        if check:
            loss = loss_t
            check_cancel(cancel)
            if last is not None and abs(last - loss) < 1e-6:
                small += 1
                if small >= 3:
                    return p, loss, t
            else:
                small = 0
            last = loss
        if clip:
            norm = np.sqrt(sum(float((x ** 2).sum()) for x in g.values()))
            if norm > clip:
                g = {k: x * (clip / norm) for k, x in g.items()}
        c1, c2 = 1 - 0.9 ** t, 1 - 0.999 ** t
        for k, x in g.items():
            m[k] = 0.9 * m[k] + 0.1 * x
            v[k] = 0.999 * v[k] + 0.001 * x * x
            setattr(p, k, getattr(p, k) - lr * (m[k] / c1) / (np.sqrt(v[k] / c2) + 1e-8))
    return p, loss, max_updates


def _init(y, obs, k, n_models, rng) -> _Params:
    succ = (y if obs is None else y * obs).sum(axis=1)
    n = y.shape[1] if obs is None else obs.sum(axis=1)
    b = np.log((succ + 0.5) / (n + 1 - succ - 0.5 + 1e-12))
    sd = 0.1 * k ** -0.25
    f32 = np.float32
    return _Params(rng.normal(0, sd, (y.shape[0], k)).astype(f32), b.astype(f32),
                   rng.normal(0, sd, (n_models, k)).astype(f32))


def joint_fit(y, obs, k, seed, inits=2, max_updates=6000, cancel=None) -> _Params:
    best, best_loss = None, np.inf
    for s in range(inits):
        rng = np.random.default_rng(seed + s)
        p, loss, _ = adam_fit(y, obs, _init(y, obs, k, y.shape[1], rng), max_updates=max_updates, cancel=cancel)
        if loss < best_loss:
            best, best_loss = p, loss
    return best


@dataclass
class _NestedSplit:
    """C.3's nested split: fit / validation models (by owner) and calibration / evaluation items (within group)."""
    y_fit: np.ndarray
    o_fit: np.ndarray | None
    y_val: np.ndarray
    o_val: np.ndarray | None
    cal: np.ndarray

    @property
    def grid_limit(self) -> int:
        return min(self.y_fit.shape)


def nested_split(y, obs, owners, groups, seed, validation_fraction=0.25, calibration_fraction=0.5) -> _NestedSplit:
    uniq = np.unique(owners)
    perm = np.random.default_rng(seed).permutation(uniq)
    n_val_own = max(1, min(uniq.size - 1, int(round(validation_fraction * uniq.size))))
    val = np.isin(owners, perm[:n_val_own])
    if val.sum() < 4 or (~val).sum() < 8:
        raise EngineError("direct MIRT: the nested owner split needs >= 8 fit and >= 4 validation models")
    rng = np.random.default_rng(seed)
    cal = np.zeros(y.shape[0], dtype=bool)
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        order = rng.permutation(idx)
        cal[order[:max(1, min(idx.size - 1, int(round(calibration_fraction * idx.size))))]] = True
    return _NestedSplit(y[:, ~val], None if obs is None else obs[:, ~val], y[:, val],
                        None if obs is None else obs[:, val], cal)


def validation_loss(split: _NestedSplit, k, seed, inits=2, max_updates=6000, cancel=None) -> tuple[int, float, float]:
    """One point of the K curve: joint fit on the fit models, validation coordinates from the calibration items
    (item parameters fixed), held-out log loss on the evaluation items: (K, mean, its standard error)."""
    cal, y_val, o_val = split.cal, split.y_val, split.o_val
    items = joint_fit(split.y_fit, split.o_fit, k, seed, inits, max_updates, cancel)
    coords = _Params(items.a[cal], items.b[cal], np.zeros((y_val.shape[1], k), np.float32))
    coords, _, _ = adam_fit(y_val[cal], None if o_val is None else o_val[cal], coords, fit_items=False,
                            max_updates=max_updates, cancel=cancel)
    z = items.b[~cal, None] + items.a[~cal] @ coords.theta.T
    cell = np.logaddexp(0.0, z) - y_val[~cal] * z
    per_model = cell.mean(axis=0) if o_val is None else (cell * o_val[~cal]).sum(0) / np.maximum(
        o_val[~cal].sum(0), 1)
    return k, float(per_model.mean()), float(per_model.std(ddof=1) / np.sqrt(per_model.size))


def one_se_choice(rows) -> tuple[int, pd.DataFrame]:
    """The smallest K whose held-out loss is within one standard error of the best (C.3's one-SE rule)."""
    if not rows:
        raise EngineError("direct MIRT: no dimension of the grid fits the fold (each K must be at most its fit "
                          "models and items); use a smaller grid")
    curve = pd.DataFrame(rows, columns=["dimension", "mean_log_loss", "se"])
    best = int(curve["mean_log_loss"].to_numpy().argmin())
    threshold = curve["mean_log_loss"].iloc[best] + curve["se"].iloc[best]
    return int(curve.loc[curve["mean_log_loss"] <= threshold, "dimension"].iloc[0]), curve


def direct_offsets(y, obs, selected, k, seed, max_updates=6000, inits=2, cancel=None) -> np.ndarray:
    """Coordinates from the selected items (joint fit), centred and frozen; all items' a, b fitted; a.theta."""
    joint = joint_fit(y[selected], None if obs is None else obs[selected], k, seed, inits, max_updates, cancel)
    theta = joint.theta - joint.theta.mean(axis=0)
    p, s = item_rates(y, obs)
    a0 = np.zeros((y.shape[0], k), np.float32)
    a0[selected] = joint.a
    b0 = np.log(p / (1 - p)).astype(np.float32)
    b0[selected] = joint.b
    items, _, _ = adam_fit(y, obs, _Params(a0, b0, theta), fit_theta=False, clip=0.0, max_updates=max_updates,
                           cancel=cancel)
    return np.clip((items.a @ theta.T).astype(np.float64), -OFFSET_CLIP, OFFSET_CLIP)


def _fold_matrices(inputs: ProtocolInputs, audit_rows) -> tuple[np.ndarray, np.ndarray | None]:
    y = np.ascontiguousarray(inputs.y_all[audit_rows].T, dtype=np.float32)  # float32, as the paper
    obs = None if inputs.obs_all is None else np.ascontiguousarray(inputs.obs_all[audit_rows].T, np.float32)
    return y, obs


def _fold_split(inputs: ProtocolInputs, cfg, fold: int, audit_rows) -> _NestedSplit:
    y, obs = _fold_matrices(inputs, audit_rows)
    return nested_split(y, obs, inputs.owner_arr[audit_rows], inputs.groups, cfg.nested_seed + fold,
                        cfg.validation_fraction, cfg.calibration_fraction)


def _curve_point(shared, task) -> tuple[int, float, float]:
    """One (fold, K) point of the K-selection curve: a replicate (issue 36: the 9-point grid of each fold was
    one sequential unit, so a 2-fold Table 4 could use 2 cores at most and none on its long tail)."""
    inputs, cfg, inits, max_updates = shared
    fold, audit_rows, k = task
    return validation_loss(_fold_split(inputs, cfg, fold, audit_rows), k, cfg.nested_seed + fold, inits, max_updates)


def _direct_fold(shared, task) -> tuple[int, int, int, np.ndarray]:
    """One fold of Table 4 at its chosen K (a replicate: its seeds are the fold's): purification, then observed
    pairs and reversals, and the controls' (pairs, reversals)."""
    inputs, cfg, inits, max_updates = shared
    fold, k, audit_rows, rep_index, full = task
    n_fam = len(inputs.fam_names)
    y, obs = _fold_matrices(inputs, audit_rows)
    seed = cfg.nested_seed + fold
    codes = inputs.fam_code[audit_rows].astype(int)
    y64 = inputs.y_all[audit_rows].T
    obs64 = None if inputs.obs_all is None else inputs.obs_all[audit_rows].T
    selected = np.ones(y.shape[0], dtype=bool)
    cells = weights = None
    for r in range(cfg.purification_rounds):
        off = direct_offsets(y, obs, selected, k, seed + 1000 * fold + r, max_updates, inits)
        fit = fit_family_dif(y64, obs64, off, codes, n_fam, penalty=cfg.dif_penalty, cycles=cfg.dif_cycles)
        cells = difficulty_cells(fit.intercept, inputs.groups, cfg.strata)
        selected, weights = anchor_weights(fit.dif_range, cells, cfg.anchor_fraction)
    y_t = inputs.y_all[rep_index]
    o_t = None if inputs.obs_all is None else inputs.obs_all[rep_index]
    scale = exact_scale(cells, selected, y_t.shape[1]) if cfg.anchor_ties == "exact" else None
    low = _scores(y_t, o_t, weights, scale)
    ps = make_pairs(full, inputs.owner_arr[rep_index], inputs.fam_code[rep_index], cfg.gap, cfg.gap_tolerance)
    m = ps.cross & ps.close
    ok, fl = count_reversals(ps, low, m)
    w = control_weights(cells, selected, cfg.controls, cfg.control_seed + fold)
    c_ok, c_fl = count_reversals(ps, _scores(y_t, o_t, w, scale), m)
    return k, int(ok[0]), int(fl[0]), np.stack([c_ok, c_fl], axis=1).astype(np.int64)


def direct_mirt_audit(result: AuditResult, inputs: ProtocolInputs, *, inits: int = 2, max_updates: int = 6000,
                      cancel: threading.Event | None = None) -> pd.DataFrame:
    """Table 4 row: K per fold, low-DIF rate, matched-random median, excess, p, and the spectral excess."""
    cfg = result.config
    shared = (inputs, cfg, inits, max_updates)
    limits = [_fold_split(inputs, cfg, fold, f.audit_rows).grid_limit for fold, f in enumerate(result.fold_results)]
    points = [(fold, f.audit_rows, k) for fold, f in enumerate(result.fold_results)
              for k in cfg.dimensions if k <= limits[fold]]
    check_cancel(cancel)
    # the largest K first: the costliest points start first, so the last worker does not wait on one long fit
    order = sorted(range(len(points)), key=lambda t: -points[t][2])
    done = replicates.run(_curve_point, [points[t] for t in order], shared, cancel=cancel, label="direct MIRT K fit")
    curve: dict[int, list] = {}
    for t, row in sorted(zip(order, done)):
        curve.setdefault(points[t][0], []).append(row)
    folds = [(fold, one_se_choice(curve.get(fold, []))[0], f.audit_rows, f.rep_index, f.full)
             for fold, f in enumerate(result.fold_results)]
    parts = replicates.run(_direct_fold, folds, shared, cancel=cancel, label="direct MIRT fold")
    ks = [k for k, _, _, _ in parts]
    obs_pairs, obs_flips = sum(p[1] for p in parts), sum(p[2] for p in parts)
    ctrl = sum(p[3] for p in parts)
    test = randomization_test(obs_pairs, obs_flips, ctrl[:, 0], ctrl[:, 1], cfg.significance)
    return pd.DataFrame([{"k": "/".join(map(str, ks)), "pairs": obs_pairs, "low_dif_rate": test["rate"],
                          "random_median": test["random_median"], "excess_pp": test["excess_pp"], "p": test["p"],
                          "spectral_excess_pp": result.summary["excess_pp"], "inits": inits,
                          "max_updates": max_updates}])
