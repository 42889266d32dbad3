"""Cross-validated accuracy of every (selection x estimator) pair over held-out models (issue 34,
``compress --validate`` and ``bench/bench_estimate.py``).

Folds over the models that answered every item (their full accuracy is the truth): each fold's test models are
held out, the static 2PL (with the data's chance levels) is fitted on all the other models, and for each k every
selection picks k items, each estimator predicts each test model's full accuracy from those items alone:

* selections: ``random`` (each model its own k random items), ``targeted`` (the compress default's first k items:
  chosen for rank recovery, a biased sample for accuracy), ``anchor`` (tinyBenchmarks' anchor points on the item
  parameters, cluster-size weights) and ``curve`` (ours, :func:`benchloupe.engine.estimate.curve_points`);
* estimators: ``mean`` (the seen items' design-weighted mean), ``irt`` (mean curve at the MAP ability), ``pirt``
  (seen observed + unseen expected at the MAP ability), ``gpirt`` (tinyBenchmarks' mix of ``mean`` and ``pirt``,
  its weight from the training models' errors on the same selection) and ``ours`` (EAP p-IRT with the misfit-shrunk
  residual and the replay-calibrated interval; the only one with an interval).

Reported per (k, selection, estimator): the mean absolute error, its 90th percentile (in accuracy units; the faces
print points) and, for ``ours``, the interval's coverage and mean width, over every held-out model of every fold.
"""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd

from benchloupe.engine import estimate as E
from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.hints import Opt, say

SELECTIONS = ("random", "targeted", "anchor", "curve")
ESTIMATORS = ("mean", "irt", "pirt", "gpirt", "ours")


def fold_calibration(y: np.ndarray, mask: np.ndarray, chance, *, cancel=None):
    """The static fit on the training rows and its :class:`~benchloupe.engine.estimate.Calibration` (with the
    misfit variance from the training models); returns (calibration, fit result, StaticData)."""
    from benchloupe.engine.joint import JointConfig, StaticData, fit_joint

    st = StaticData(np.where(mask, y, 0).astype(np.int8), mask, chance=chance)
    res = fit_joint(st, None, JointConfig(mode="static"), cancel=cancel)
    c = res.chance_static if res.chance_static is not None else None
    cal = E.calibration(res.a_static, res.b_static, c, res.theta)
    full = mask.all(axis=1)
    cal.tau2 = E.misfit_variance(cal, y[full], mask[full])
    return cal, res, st


PILOT_MODELS = 800
PILOT_GROUP = 100  # models per cross-fitting group (at least PILOT_SPLITS groups)
PILOT_SPLITS = 4
CAT_SCALE_RANGE = (0.75, 6.0)
CAT_SCALE_GRID = np.geomspace(*CAT_SCALE_RANGE, 241)  # steps of 0.9 %
CAT_SCALE_SMOOTH = 9  # grid points in the coverage curve's running mean (+-3.5 % of the stretch)


def cat_scale(y: np.ndarray, mask: np.ndarray, chance, *, target_se: float, max_items: int | None = None,
              seed: int = 0, pilot: int = PILOT_MODELS, level: float = E.LEVEL, cancel=None) -> float:
    """The adaptive test's interval stretch, measured out of sample and cross-fitted: up to ``pilot`` of the fully
    answered models are split into groups of about ``PILOT_GROUP`` (:func:`pilot_groups`); for each group the items
    are fitted again on all the other models and the group takes the adaptive test on that calibration, recorded
    step by step (:func:`~benchloupe.engine.estimate.cat_path`).  The stretch is the smallest ``s`` on a fine grid over
    ``CAT_SCALE_RANGE`` at which the pooled pilot models' coverage (a running mean over ``CAT_SCALE_SMOOTH``
    neighbouring grid points) reaches ``level`` when each test stops at ``s * sd <= target_se`` and its interval
    is stretched by ``s``: the stopping point and the coverage it reaches, solved together from the one path
    (the items taken do not depend on ``s``); the largest stretch when none reaches it.

    Why out of sample: at stopping the posterior interval ignores what the adaptive test selects on.  (1) It stops
    as soon as the sd looks small, and takes the items whose fitted sharpness is highest, which are those whose
    sharpness the fit overstated (item parameter error, capitalised on); (2) the items left unseen are the ones the
    curves call certain for the model (far easier or harder than it), where the logistic tails are least right
    and the person misfit is not the average one ``tau^2`` measures.  Models that helped fit the items see neither
    effect (the in-sample replay this replaced undercovered: 88.6-92 % on metabench); the pilot models did not.
    Why pooled: the quantile of one pilot of 200 ratios, taken twice (a second pilot at the stretched stopping
    point) and multiplied, varied from 1.0 to 3.4 between folds of GSM8K.  Each pilot calibration is fitted on
    all the models but its group, a few fewer than the final one: a slightly conservative stretch.  Why up to 800
    pilot models: the coverage curve is flat in ``s`` (a larger stretch stops later at about the same width, and
    gains only the error the later items remove), so the first crossing of its noisy estimate lands early; on
    TruthfulQA 400 pilot models gave stretches of 1.58-2.40 between folds and 93.4 % held out, 800 gave 1.98-2.24
    and 94.0 % on the same held-out models (docs/ESTIMATE.md).  1.0 with fewer than 50 fully answered models."""
    y = np.asarray(y, float)
    mask = np.asarray(mask, bool)
    full = np.flatnonzero(mask.all(axis=1))
    if len(full) < 50:
        return 1.0
    groups = pilot_groups(full, pilot, seed)
    paths = []
    for g in groups:
        check_cancel(cancel)
        rest = np.setdiff1d(np.arange(len(y)), g)
        cal, _, _ = fold_calibration(y[rest], mask[rest], chance, cancel=cancel)
        paths.append(E.cat_path(cal, y[np.sort(g)], min_sd=target_se / CAT_SCALE_RANGE[1],
                                interval_sd=target_se / CAT_SCALE_RANGE[0], max_items=max_items, level=level))
    cover = np.array([np.mean(np.concatenate([p.covered(target_se, s) for p in paths])) for s in CAT_SCALE_GRID])
    w = CAT_SCALE_SMOOTH
    smooth = np.convolve(np.pad(cover, w // 2, mode="edge"), np.full(w, 1 / w), mode="valid")
    reach = np.flatnonzero(smooth >= level)
    return float(CAT_SCALE_GRID[reach[0]] if len(reach) else CAT_SCALE_GRID[-1])


def pilot_groups(full: np.ndarray, pilot: int = PILOT_MODELS, seed: int = 0) -> list[np.ndarray]:
    """The adaptive pilot's cross-fitting groups: a seeded ``pilot`` of the fully answered rows ``full`` (all of
    them when fewer), split into groups of about ``PILOT_GROUP`` and at least ``PILOT_SPLITS`` groups: each pilot
    calibration leaves out at most a quarter of the training models, and 100 of them once there are 400."""
    rows = np.random.default_rng(seed).permutation(full)[:pilot]
    return np.array_split(rows, max(PILOT_SPLITS, round(len(rows) / PILOT_GROUP)))


def _draws(rng: np.random.Generator, rows: int, n_items: int, k: int) -> np.ndarray:
    """The random selection's items: per row k of ``n_items`` drawn in turn from ``rng``, ascending."""
    out = np.empty((rows, k), np.intp)
    for i in range(rows):
        out[i] = rng.choice(n_items, k, replace=False)
    return np.sort(out, axis=1)


def _columns(sel_name: str, cal: E.Calibration, k: int, n_train: int, n_test: int, draws, order, fold: int):
    """(items per training row, items per test row, design weights over N or None) of a selection: every row its
    own draw for ``random``, the same k items for every row otherwise."""
    if sel_name == "random":
        return draws[0], draws[1], None
    if sel_name == "targeted":
        items, w = np.sort(order[:k]), None
    else:
        sel = (E.anchor_points if sel_name == "anchor" else E.curve_points)(cal, k, seed=fold)
        items, w = np.sort(sel.items), E.full_weights(sel, cal.n_items)
    return np.broadcast_to(items, (n_train, k)), np.broadcast_to(items, (n_test, k)), w


def _dense(columns: np.ndarray, n_items: int) -> np.ndarray:
    m = np.zeros((len(columns), n_items), bool)
    np.put_along_axis(m, columns, True, axis=1)
    return m


def _responses(y) -> np.ndarray:
    """0/1 responses as given when stored as integers (int8: each fold's copy of the training rows is 1/8 of the
    floats'; every estimator converts the cells it reads), floats otherwise."""
    y = np.asarray(y)
    return y if y.dtype == bool or np.issubdtype(y.dtype, np.integer) else y.astype(float)


def _fold(shared, task) -> pd.DataFrame:
    """One fold (a replicate: :func:`benchloupe.engine.replicates.run`): the items fitted on the training rows, then
    every (k, selection) and estimator on the held-out rows.  The random selection's draws come in the task, drawn
    in the caller from one generator in the fold order of the code before the folds ran apart: the same draws."""
    y, mask, chance, ks, selections, level, extra = shared
    f, train, test, tr_full, draws = task
    N = y.shape[1]
    cal, res, st = fold_calibration(y[train], mask[train], chance)
    order = None
    if "targeted" in selections:
        from benchloupe.engine import informativeness

        order = informativeness.selection_order(res, st, None, None, "targeted", limit=ks[-1])
    ytr, yte = y[tr_full], y[test]
    truth_tr, truth_te = ytr.mean(axis=1), yte.mean(axis=1)  # 0/1 sums are exact: the same means as of floats
    rows = []
    for k in ks:
        for s in selections:
            c_tr, c_te, w = _columns(s, cal, k, len(tr_full), len(test), draws.get(k), order, f)
            plain_tr = E.plain_estimators(cal, None, None, weights=w, cells=E.Cells.of_columns(ytr, c_tr, N))
            lam = E.gp_lambda(plain_tr["mean"], plain_tr["pirt"], truth_tr)
            scale = E.interval_scale(cal, ytr, None, c_te, weights=w, seed=f, level=level)
            cells = E.Cells.of_columns(yte, c_te, N)
            plain = E.plain_estimators(cal, None, None, weights=w, cells=cells)
            ours = E.estimate(cal, None, None, weights=w, scale=scale, level=level, cells=cells)
            pred = {**plain, "gpirt": lam * plain["mean"] + (1 - lam) * plain["pirt"], "ours": ours.accuracy}
            covered = (truth_te >= ours.lo) & (truth_te <= ours.hi)
            for name, fn in (extra or {}).items():
                pred[name] = fn(cal, ytr.astype(float), _dense(c_tr, N), yte.astype(float), _dense(c_te, N), w)
            for est_name in (*ESTIMATORS, *(extra or {})):
                err = np.abs(pred[est_name] - truth_te)
                rows.append(pd.DataFrame({
                    "fold": f, "k": k, "selection": s, "estimator": est_name, "model": test, "error": err,
                    "covered": covered if est_name == "ours" else np.nan,
                    "width": (ours.hi - ours.lo) if est_name == "ours" else np.nan, "gp_lambda": lam}))
    return pd.concat(rows, ignore_index=True)


def cross_validate(y: np.ndarray, mask: np.ndarray, ks, *, chance=None, folds: int = 5, seed: int = 0,
                   selections=SELECTIONS, level: float = E.LEVEL, max_test: int | None = None, extra=None,
                   progress: Progress = no_progress, cancel: threading.Event | None = None) -> pd.DataFrame:
    """Per-model errors of every (k, selection, estimator) over ``folds`` folds of the fully answered models
    (``max_test`` caps the held-out models per fold, a seeded subsample); returns the long table (fold, k,
    selection, estimator, model row, error, covered, width).  ``extra``: more estimators, name ->
    ``fn(cal, y_train, mask_train, y_test, mask_test, weights) -> predictions`` (the bench's re-implementations).
    The folds are replicates (:mod:`benchloupe.engine.replicates`: ``--jobs``), the same numbers on any workers."""
    from benchloupe.engine import replicates

    y = _responses(y)
    mask = np.asarray(mask, bool)
    N = y.shape[1]
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1 or ks[-1] >= N:
        raise EngineError(say(Opt("validate"), f" takes sizes from 1 to {N - 1} (the benchmark has {N} items), "
                              f"got {', '.join(map(str, ks))}"))
    unknown = set(selections) - set(SELECTIONS)
    if unknown:
        raise EngineError(f"selections are {', '.join(SELECTIONS)}; got {', '.join(sorted(unknown))}")
    full = np.flatnonzero(mask.all(axis=1))
    if len(full) < 5 * folds:
        raise EngineError(f"cross-validation needs at least {5 * folds} models that answered every item (the truth "
                          f"of a held-out model is its full accuracy); this benchmark has {len(full)}")
    rng = np.random.default_rng(seed)
    parts = np.array_split(rng.permutation(full), folds)
    tasks = []
    for f, test in enumerate(parts):
        check_cancel(cancel)
        train = np.setdiff1d(np.arange(len(y)), test)
        if max_test is not None and len(test) > max_test:
            test = np.sort(rng.choice(test, max_test, replace=False))
        tr_full = train[mask[train].all(axis=1)]
        draws = {k: (_draws(rng, len(tr_full), N, k), _draws(rng, len(test), N, k)) for k in ks} \
            if "random" in selections else {}
        tasks.append((f, train, test, tr_full, draws))
    parts = replicates.run(_fold, tasks, (y, mask, chance, ks, tuple(selections), level, extra), progress=progress,
                           cancel=cancel, label="cross-validation fold")
    return pd.concat(parts, ignore_index=True)


def summarise(long: pd.DataFrame) -> pd.DataFrame:
    """One row per (k, selection, estimator): models, MAE and 90th-percentile error in points, and for ``ours``
    the interval's coverage and mean width (points)."""
    g = long.groupby(["k", "selection", "estimator"], sort=False)
    out = g.agg(models=("error", "size"), mae=("error", "mean"), p90=("error", lambda e: float(np.quantile(e, 0.9))),
                coverage=("covered", "mean"), width=("width", "mean")).reset_index()
    for c in ("mae", "p90", "width"):
        out[c] = (100 * out[c]).round(2)
    out["coverage"] = out["coverage"].round(3)
    return out


def best(summary: pd.DataFrame) -> pd.DataFrame:
    """Per k, the (selection, estimator) with the lowest MAE."""
    idx = summary.groupby("k")["mae"].idxmin()
    return summary.loc[idx, ["k", "selection", "estimator", "mae", "p90"]].reset_index(drop=True)
