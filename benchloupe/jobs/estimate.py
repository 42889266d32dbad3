"""Full-benchmark accuracy of partly evaluated models from a frozen static calibration (issue 34), as a stored run.

A model imported from a run on an exported subset has results on k of the benchmark's N active items.  ``estimate``
reads the latest static or joint fit (or ``run``), freezes its items (difficulty, sharpness, the chance levels it
used), and predicts each such model's accuracy on all N active calibrated items with a 95 % interval
(:mod:`benchloupe.engine.estimate`).  The prior over abilities is the calibration's own models; the person-misfit
variance and the interval's scale come from the calibration's fully answered models (the scale by replaying the
estimated models' own item patterns on them).  The run stores, per model, the estimate, its interval and sd, the
items seen and the observed accuracy on them, apart: the Models screen and exports never mix the two.

Bad input, refused before anything is written (one line each): no calibration of the benchmark, a named model
without a result on any calibrated item, results on items retired since the calibration, no partly evaluated
model to estimate.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchloupe.engine import estimate as est
from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.hints import Alt, Opt, say
from benchloupe.store import read, runs
from benchloupe.store.db import connect
from benchloupe.words import estimate_text

from .base import Analysis, RunContext, fingerprint, register

FOR_ESTIMATE = Opt("purpose", "estimate", spelled="--for")  # compress's purpose, spelled --for on the command line
ESTIMATE_COMPRESS = Alt("compress --for estimate", "compress with purpose = estimate")

CALIBRATION_KINDS = ("static", "joint")
REFERENCE_MODELS = 1000  # fully answered models (a seeded sample) the misfit and the interval's replay draw from


@dataclass(frozen=True)
class EstimateConfig:
    """Full-benchmark accuracy from a few items (issue 34): EAP ability with the calibration's chance levels,
    p-IRT with the misfit-shrunk residual, 95 % interval.  ``run``: the calibration (0 = the latest static or
    joint fit); ``models``: names separated by commas (empty = every partly evaluated model)."""

    run: int = 0
    models: str = ""
    level: float = 0.95

    def __post_init__(self) -> None:
        if not 0.5 <= self.level < 1:
            raise EngineError(f"level must lie in [0.5, 1), got {self.level}")

    @property
    def model_names(self) -> list[str]:
        return [m.strip() for m in self.models.split(",") if m.strip()] if self.models else []


@dataclass
class Frozen:
    """A calibration frozen for estimation, aligned with the benchmark's active calibrated items."""

    run_id: int
    kind: str
    cal: est.Calibration
    items: pd.DataFrame  # the active calibrated items (id, key, ...), the calibration's column order
    columns: np.ndarray  # their positions in the static matrix
    retired: np.ndarray  # positions of calibrated items retired since the run
    uncalibrated: int  # active items the run has no parameters for
    fitted_models: set
    chance_mode: str


def _chance(run: dict, items: pd.DataFrame) -> np.ndarray:
    """The chance levels the calibration run used: its ``chance`` setting (stated: the items' own; estimate: the
    shared asymptote it estimated, on the items with a stated level or on all; none: 0)."""
    mode = (run.get("config") or {}).get("chance", "stated")
    stated = pd.to_numeric(items["chance"], errors="coerce").fillna(0).to_numpy(float) if "chance" in items else \
        np.zeros(len(items))
    if mode == "none":
        return np.zeros(len(items))
    if mode == "estimate":
        c = (run.get("metrics") or {}).get("chance_estimated")
        if c is None:
            return stated
        return np.where(stated > 0, c, 0.0) if (stated > 0).any() else np.full(len(items), float(c))
    return stated


def frozen_calibration(conn, benchmark: str, run_id: int, sm: read.StaticMatrix | read.PackedStatic) -> Frozen:
    """The calibration run (``run_id`` or the latest static/joint fit) frozen on the benchmark's items ``sm.items``
    (loaded with retired items)."""
    bid = read.benchmark_id(conn, benchmark)
    rid = run_id or runs.latest_run(conn, bid, CALIBRATION_KINDS)
    if rid is None:
        raise EngineError(say(f"no calibration of {benchmark!r} to estimate from; fit one first (",
                              Alt(f"`benchloupe fit static {benchmark}`", "the static fit on the Runs screen"), ")"))
    run = runs.get_run(conn, rid)
    if run is None or run["status"] != "done" or run["kind"] not in CALIBRATION_KINDS:
        raise EngineError(say(f"run {rid} is not a finished static or joint fit; pass one with ", Opt("run"),
                              " or leave it out for the latest"))
    params = runs.static_item_parameters(conn, rid)
    ids = sm.items["id"].to_numpy()
    known = np.isin(ids, np.fromiter(params, np.int64, len(params)))
    if not known.any():
        raise EngineError(f"calibration run {rid} has no item parameters for the static items of {benchmark!r}")
    active = (sm.items["status"] == "active").to_numpy()
    cols = np.flatnonzero(known & active)
    if not len(cols):
        raise EngineError(say(f"every item calibration run {rid} fitted has been retired since; refit (",
                              Alt(f"`benchloupe fit static {benchmark}`", "a static fit on 4 Runs"), ")"))
    items = sm.items.iloc[cols].reset_index(drop=True)
    b, a = np.array([params[int(i)] for i in items["id"]], float).T
    chance = _chance(run, items)
    theta, names = runs.model_abilities(conn, rid)
    cal = est.calibration(a, b, chance, theta)
    return Frozen(rid, run["kind"], cal, items, cols, np.flatnonzero(known & ~active),
                  int((~known & active).sum()), set(names), (run.get("config") or {}).get("chance", "stated"))


def _columns(a: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``a[:, cols]``; ``a`` itself when ``cols`` is every column in order (no 70 M-cell gather: 5,000 x 14,000)."""
    return a if len(cols) == a.shape[1] and np.array_equal(cols, np.arange(a.shape[1])) else a[:, cols]


def _targets(names_all: np.ndarray, k: np.ndarray, fz: Frozen, names: list[str], benchmark: str) -> np.ndarray:
    """Rows of the models to estimate: the named ones (each with a result on a calibrated item), or every model
    with results on some but not all active calibrated items.  ``k``: each model's answered calibrated items."""
    if names:
        rows = []
        for n in names:
            hit = np.flatnonzero(names_all == n)
            if not len(hit):
                raise EngineError(f"model {n!r} has no static results in {benchmark!r}; import them first")
            if k[hit[0]] == 0:
                raise EngineError(f"model {n!r} has no result on any of the {len(fz.columns)} items calibration run "
                                  f"{fz.run_id} fitted in {benchmark!r}: nothing to estimate from")
            rows.append(int(hit[0]))
        return np.array(sorted(set(rows)), int)
    rows = np.flatnonzero((k > 0) & (k < len(fz.columns)))
    if not len(rows):
        raise EngineError(say(f"no partly evaluated model in {benchmark!r}: every model with results answered all "
                              f"{len(fz.columns)} active calibrated items (name one with ", Opt("model"), ")"))
    return rows


def _refuse_retired(on_retired: np.ndarray, names: np.ndarray, items: pd.DataFrame, fz: Frozen,
                    benchmark: str) -> None:
    """One line when a model to estimate has results on items retired since the calibration.  ``on_retired``:
    the models' (``names``) mask at the retired items ``fz.retired`` (positions in ``items``)."""
    if not on_retired.any():
        return
    i, j = np.argwhere(on_retired)[0]
    n = int(on_retired.any(axis=0).sum())
    key = items["key"].iat[int(fz.retired[j])]
    raise EngineError(say(f"model {names[i]!r} has results on {n} item(s) retired since "
                          f"calibration run {fz.run_id} (e.g. {key!r}); refit the calibration (",
                          Alt(f"`benchloupe fit static {benchmark}`", "a static fit on 4 Runs"),
                          ") or restore the items"))


def _rows_to_estimate(sm: read.StaticMatrix, fz: Frozen, names: list[str], benchmark: str) -> np.ndarray:
    """:func:`_targets` on a loaded matrix, with the retired items refused (next-items)."""
    names_all = sm.models["name"].to_numpy(object)
    rows = _targets(names_all, np.count_nonzero(_columns(sm.mask, fz.columns), axis=1), fz, names, benchmark)
    if len(fz.retired):
        _refuse_retired(sm.mask[np.ix_(rows, fz.retired)], names_all[rows], sm.items, fz, benchmark)
    return rows


def reference_rows(full: np.ndarray) -> np.ndarray:
    """The models the misfit variance and the interval's replay draw from: every model that answered all the
    calibrated items (``full``: per model, whether it did), a seeded sample of
    :data:`REFERENCE_MODELS` of them when there are more.  The same rows whichever models are estimated, so a model's
    estimate depends only on its own answers and the calibration: ``estimate`` (the Models screen), ``compare`` and
    ``next-items`` show the same number for it (compare left its own two models out of these rows and showed
    70.3 % where the Models screen showed 70.4 %)."""
    reference = np.flatnonzero(full)
    if len(reference) > REFERENCE_MODELS:  # the misfit draws 400 of them, the replay all
        reference = np.sort(np.random.default_rng(0).choice(reference, REFERENCE_MODELS, replace=False))
    return reference


def estimate_models(fz: Frozen, y: np.ndarray, mask: np.ndarray, rows: np.ndarray, reference: np.ndarray, *,
                    trials: np.ndarray | None = None, level: float = est.LEVEL, stretch: bool = True,
                    progress: Progress = no_progress, cancel: threading.Event | None = None) -> tuple[est.Estimates,
                                                                                                     float]:
    """The estimates of the models ``rows`` of ``y``/``mask`` (the calibrated columns) and the interval's scale, as
    every face shows them: the misfit variance from the ``reference`` rows (:func:`reference_rows`), the interval
    stretched by replaying the estimated models' item patterns on them (not with success/trial counts, nor with
    ``stretch`` False: the estimate and its sd do not depend on it).  Sets ``fz.cal.tau2``."""
    progress(0, 2, f"misfit and interval scale from calibration run {fz.run_id}'s models")
    yr = y[reference] if trials is None else y[reference] / trials[reference]
    fz.cal.tau2 = est.misfit_variance(fz.cal, yr, mask[reference])
    scale = est.interval_scale(fz.cal, yr, mask[reference], mask[rows], level=level) \
        if trials is None and stretch else 1.0
    check_cancel(cancel)
    progress(1, 2, f"estimating {len(rows)} model(s)")
    e = est.estimate(fz.cal, y[rows], mask[rows], trials=None if trials is None else trials[rows], level=level,
                     scale=scale)
    return e, scale


def run_estimate(db_path, benchmark: str, config: EstimateConfig = EstimateConfig(), *,
                 progress: Progress = no_progress, cancel: threading.Event | None = None, **_) -> int:
    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        # The packed rows, then the matrix of only the models used: the targets and the reference sample of the
        # fully answered ones (5,000 x 14,000: the whole matrix and its mask were half the time)
        ps = read.load_static_packed(conn, benchmark, include_retired=True)
        fz = frozen_calibration(conn, benchmark, config.run, ps)
        k = ps.answered(fz.columns)
        names_all = ps.models["name"].to_numpy(object)
        targets = _targets(names_all, k, fz, config.model_names, benchmark)
        need = np.concatenate([targets, reference_rows(k == len(fz.columns))])
        correct, mask, successes, trials = ps.matrix(need)
        nt = len(targets)
        if len(fz.retired):
            _refuse_retired(mask[:nt][:, fz.retired], names_all[targets], ps.items, fz, benchmark)
        # the engine takes the 0/1 (or success) counts as stored, int8: floats only of the cells it reads
        y = _columns(correct if trials is None else successes, fz.columns)
        mask = _columns(mask, fz.columns)
        trials = None if trials is None else _columns(trials, fz.columns)
        rows, reference = np.arange(nt), np.arange(nt, len(need))
        ctx = RunContext(db_path, "estimate", benchmark, {**config.__dict__, "run": fz.run_id}, None,
                         [(benchmark, "static")])
        ctx.start(conn, fingerprint(y[rows], mask[rows], fz.cal.b))
        t = ctx.lap("load_s", t0)
        with ctx.guard(conn):
            e, scale = estimate_models(fz, y, mask, rows, reference, trials=trials, level=config.level,
                                       progress=progress, cancel=cancel)
            ctx.lap("estimate_s", t)
            names = names_all[targets]
            models = pd.DataFrame({"model_id": ps.models["id"].to_numpy()[targets], "theta": e.theta, "se": e.theta_sd,
                                   "estimate": e.accuracy, "estimate_lo": e.lo, "estimate_hi": e.hi,
                                   "estimate_sd": e.sd, "seen": e.k.astype(int), "n_items": e.n_items,
                                   "observed": e.observed,
                                   "in_calibration": [n in fz.fitted_models for n in names]})
            warnings = []
            if fz.uncalibrated:
                warnings.append(f"{fz.uncalibrated} active item(s) have no parameters in calibration run {fz.run_id} "
                                f"(added since): the estimates cover the {len(fz.columns)} calibrated ones; refit to "
                                "include them")
            if trials is not None:
                warnings.append("success/trial results: the interval is not rescaled by replay (it needs 0/1 cells)")
            metrics = {"calibration_run": fz.run_id, "calibration_kind": fz.kind, "n_items": len(fz.columns),
                       "models": nt, "level": config.level, "chance_mode": fz.chance_mode,
                       "items_with_chance": int((fz.cal.c > 0).sum()), "misfit_tau2": round(fz.cal.tau2, 8),
                       "interval_scale": round(scale, 4), "reference_models": len(reference),
                       "median_items_seen": float(np.median(e.k)),
                       "median_interval_width": float(np.median(e.hi - e.lo))}
            if warnings:
                metrics["warnings"] = warnings
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=metrics, timings={**ctx.timings, "total_s": round(time.perf_counter() - t0, 4)},
                models=models))
            progress(2, 2, "done")
            return ctx.run_id
    finally:
        conn.close()


def estimate_rows(conn, run_id: int) -> pd.DataFrame:
    """A stored estimate run's per-model rows: model, estimate, lo, hi, sd, seen, n_items, observed, theta."""
    df = runs.run_models(conn, run_id)
    cols = ["name", "estimate", "estimate_lo", "estimate_hi", "estimate_sd", "seen", "n_items", "observed", "theta",
            "se", "in_calibration"]
    return df[[c for c in cols if c in df.columns]].sort_values("estimate", ascending=False).reset_index(drop=True)


def describe(row) -> str:
    """"est. 61.2 % [58.9, 63.5] · 30 of 249 items": how the faces show an estimate (never as an observed score)."""
    return estimate_text(row["estimate"], row["estimate_lo"], row["estimate_hi"], row["seen"], row["n_items"])


# the Runs screen starts it as it starts every analysis (a job, the form prefilled with these defaults)
register(Analysis("estimate", "Full-benchmark accuracy of partly evaluated models, with a 95 % interval",
                  "estimation", EstimateConfig, "static", run_estimate))



# ------------------------------------------------------------------------------------ compress --for estimate

def validate_sizes(text: str) -> list[int]:
    """The sizes of ``--validate`` ("10,25,50,100")."""
    out = []
    for part in str(text or "").split(","):
        if part.strip():
            try:
                out.append(int(part))
            except ValueError:
                raise EngineError(say(Opt("validate"), f" takes item counts such as 10,25,50,100, got {text!r}")) \
                    from None
    return out


def _check_compress(conn, benchmark: str, config) -> int:
    """Refuse bad sizes and names before anything is written; returns the number of active static items."""
    n = len(read.items(conn, benchmark, kind="static", status="active", with_text=False))
    if n < 2:
        raise EngineError(say(ESTIMATE_COMPRESS, f" needs static results on at least 2 active items; "
                              f"{benchmark!r} has {n}"))
    if config.k > n:
        raise EngineError(say(Opt("k", str(config.k)), f" is larger than {benchmark!r}, which has {n} active items; "
                              f"choose at most {n - 1} (all {n} is the benchmark itself)"))
    for v in validate_sizes(config.validate):
        if not 1 <= v < n:
            raise EngineError(say(Opt("validate"), f" size {v} must lie between 1 and {n - 1} ({benchmark!r} has "
                                  f"{n} active items)"))
    if config.export_name and not config.k:
        raise EngineError(say(Opt("export_name"), " with ", FOR_ESTIMATE, " exports the ", Opt("k", "K"),
                              " selected items: give ", Opt("k")))
    if config.export_name and conn.execute("SELECT 1 FROM benchmarks WHERE name = ?",
                                           (config.export_name,)).fetchone():
        raise EngineError(say(f"a benchmark named {config.export_name!r} already exists; choose another ",
                              Opt("export_name")))
    return n


def run_compress_estimate(db_path, benchmark: str, config, *, progress: Progress = no_progress,
                          cancel: threading.Event | None = None) -> int:
    """``compress --for estimate --k K`` (our curve anchors, exported when ``export_name`` is given, with the
    in-sample error of replaying them on the calibration's models) and/or ``--validate`` (the cross-validated
    table of every selection x estimator, :mod:`benchloupe.engine.estimate_validate`), as one compress run."""
    from dataclasses import replace

    from benchloupe.engine import estimate_validate as ev
    from benchloupe.store.writer import derive_benchmark

    from .data import report_chance, run_chance, start_run

    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        _check_compress(conn, benchmark, config)
        inputs, _, ctx = start_run(conn, db_path, "compress", benchmark, replace(config, mode="static"), 0, None)
        t = ctx.lap("load_s", t0)
        with ctx.guard(conn):
            inputs = run_chance(conn, ctx, inputs, config, cancel, progress)
            st = inputs.static
            if st is None or st.trials is not None:
                raise EngineError(say(ESTIMATE_COMPRESS, " needs 0/1 static results (success/trial counts are "
                                      "not supported)"))
            y = st.correct  # 0/1 as stored (int8): the engine converts the cells it reads, not 70 M of them
            mask = st.mask
            metrics: dict = {"purpose": "estimate", "n_items": int(st.shape[1]), "k": int(config.k)}
            artifacts: dict = {}
            items = None
            if config.k:
                progress(0, 1, f"fitting the items and choosing {config.k}")
                cal, res, _ = ev.fold_calibration(y, mask, st.chance, cancel=cancel)
                sel = est.curve_points(cal, config.k)
                full = mask.all(axis=1)
                w = est.full_weights(sel, cal.n_items)
                sub = np.zeros((int(full.sum()), cal.n_items), bool)
                sub[:, sel.items] = True
                if full.sum() >= 5:
                    scale = est.interval_scale(cal, y[full], mask[full], sub, weights=w)
                    e = est.estimate(cal, y[full], sub, weights=w, scale=scale)
                    truth = y[full].mean(axis=1)
                    metrics.update({"insample_mae_points": round(100 * float(np.mean(np.abs(e.accuracy - truth))), 3),
                                    "insample_coverage": round(float(np.mean((truth >= e.lo) & (truth <= e.hi))), 4),
                                    "insample_models": int(full.sum())})
                metrics.update({"selection": "curve: k-means of the item response curves over the population's "
                                             "abilities, the most informative item of each cluster, cluster-size "
                                             "weights", "misfit_tau2": round(cal.tau2, 8)})
                ids = inputs.static_items["id"].to_numpy()
                items = pd.DataFrame({"item_id": ids, "difficulty": res.b_static, "sharpness": res.a_static,
                                      "selected": np.isin(np.arange(len(ids)), sel.items), "weight": w})
                if config.export_name:
                    keys = inputs.static_items["key"].to_numpy(object)
                    new_id = derive_benchmark(conn, benchmark, config.export_name, [int(i) for i in ids[sel.items]],
                                              reason="estimation subset (compress, purpose estimate)",
                                              detail={"purpose": "estimate", "k": int(config.k), "run": ctx.run_id,
                                                      "selection": "curve",
                                                      "weights": {str(keys[i]): float(w[i]) for i in sel.items}})
                    metrics.update({"exported_benchmark": config.export_name, "exported_benchmark_id": new_id,
                                    "exported_items": int(len(sel.items))})
                t = ctx.lap("select_s", t)
            sizes = validate_sizes(config.validate)
            if sizes:
                long = ev.cross_validate(y, mask, sizes, chance=st.chance, progress=progress, cancel=cancel)
                summary = ev.summarise(long)
                artifacts["estimate_validation"] = summary
                metrics["validation_best"] = ev.best(summary).to_dict("records")
                ours = summary[(summary["selection"] == "curve") & (summary["estimator"] == "ours")]
                metrics["validation_default"] = ours[["k", "mae", "p90", "coverage", "width"]].to_dict("records")
                ctx.lap("validate_s", t)
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=report_chance(metrics, inputs),
                timings={**ctx.timings, "total_s": round(time.perf_counter() - t0, 4)}, items=items,
                artifacts=artifacts))
            return ctx.run_id
    finally:
        conn.close()


# ------------------------------------------------------------------------- next items, adaptive testing, compare

def _model_row(sm: read.StaticMatrix, name: str, benchmark: str) -> int:
    hit = np.flatnonzero(sm.models["name"].to_numpy(object) == name)
    if not len(hit):
        raise EngineError(f"model {name!r} has no static results in {benchmark!r}; import them first")
    return int(hit[0])


def next_items(db_path, benchmark: str, model: str, n: int = 20, *, run: int = 0, export_name: str = "") -> dict:
    """The ``n`` items a partly evaluated ``model`` should run next (most informative at its current ability
    under the frozen calibration), with its current estimate; ``export_name`` writes them as a new benchmark (then
    `benchloupe export` gives the lm-eval task or Inspect samples).  Read-only without ``export_name``."""
    from benchloupe.store.writer import derive_benchmark

    if n < 1:
        raise EngineError(say(Opt("n"), f" must be at least 1, got {n}"))
    conn = connect(db_path)
    try:
        sm = read.load_static(conn, benchmark, include_retired=True)
        fz = frozen_calibration(conn, benchmark, run, sm)
        row = _model_row(sm, model, benchmark)
        rows = _rows_to_estimate(sm, fz, [model], benchmark)
        y = sm.correct[:, fz.columns].astype(float)
        mask = sm.mask[:, fz.columns]
        left = int((~mask[row]).sum())
        if left == 0:
            raise EngineError(f"model {model!r} has answered all {len(fz.columns)} calibrated items of {benchmark!r}: "
                              "no item left to run")
        if export_name and conn.execute("SELECT 1 FROM benchmarks WHERE name = ?", (export_name,)).fetchone():
            raise EngineError(say(f"a benchmark named {export_name!r} already exists; choose another ",
                                  Opt("export_name")))
        e, _ = estimate_models(fz, y, mask, rows, reference_rows(mask.all(axis=1)))
        order = est.next_items(fz.cal, y[rows], mask[rows], min(n, left))[0]
        post = np.exp(est.log_posterior(fz.cal, y[rows], mask[rows]))[0]
        gain = post @ est.item_information(fz.cal)
        items = fz.items.iloc[order]
        out = {"model": model, "calibration_run": fz.run_id, "seen": int(e.k[0]), "n_items": e.n_items,
               "estimate": float(e.accuracy[0]), "estimate_lo": float(e.lo[0]), "estimate_hi": float(e.hi[0]),
               "theta": float(e.theta[0]),
               "items": [{"rank": i + 1, "key": str(k), "information": round(float(gain[j]), 5),
                          "difficulty": round(float(fz.cal.b[j]), 4), "sharpness": round(float(fz.cal.a[j]), 4)}
                         for i, (k, j) in enumerate(zip(items["key"], order))]}
        if export_name:
            out["exported_benchmark_id"] = derive_benchmark(
                conn, benchmark, export_name, [int(i) for i in items["id"]], reason=f"next items for {model}",
                detail={"model": model, "calibration_run": fz.run_id, "n": len(order)})
            out["exported_benchmark"] = export_name
        return out
    finally:
        conn.close()


def compare_models(db_path, benchmark: str, a: str, b: str, *, run: int = 0, level: float = 0.95) -> dict:
    """Is A really better than B (issue 34, part 4): the exact McNemar test and the paired difference on the
    items both answered, the items where they differ sorted by information at their abilities (from the latest
    calibration when there is one), and, when either answered only part of the calibrated items, both models'
    estimated full accuracies and their difference (said so: the comparison then goes through the estimate)."""
    from benchloupe.engine.compare import paired

    if a == b:
        raise EngineError("compare needs two different models")
    conn = connect(db_path)
    try:
        sm = read.load_static(conn, benchmark)
        ra, rb = _model_row(sm, a, benchmark), _model_row(sm, b, benchmark)
        common = sm.mask[ra] & sm.mask[rb]
        if not common.any():
            raise EngineError(say(f"models {a!r} and {b!r} have no item of {benchmark!r} in common; run one on the "
                                  "other's items (", Alt("`benchloupe next-items`", "benchloupe next-items"),
                                  ") or compare their estimates (", Alt("`benchloupe estimate`", "benchloupe estimate"),
                                  ")"))
        ya, yb = sm.correct[ra, common].astype(float), sm.correct[rb, common].astype(float)
        out = {"benchmark": benchmark, "a": a, "b": b, **paired(ya, yb, level)}
        groups = sm.items["group"].fillna("").astype(str).to_numpy(object)[common] if "group" in sm.items else None
        if groups is not None and len(set(groups) - {""}) >= 2:
            from benchloupe.engine.compare import group_bootstrap

            out["group_bootstrap"] = group_bootstrap(ya, yb, groups, level=level)
        keys = sm.items["key"].to_numpy(object)[common]
        differ = np.flatnonzero(ya != yb)
        info = np.zeros(len(differ))
        try:
            full = read.load_static(conn, benchmark, include_retired=True)
            fz = frozen_calibration(conn, benchmark, run, full)
        except EngineError:
            fz = None
        if fz is not None:
            y = full.correct[:, fz.columns].astype(float)
            mask = full.mask[:, fz.columns]
            rows = [_model_row(full, a, benchmark), _model_row(full, b, benchmark)]
            theta = est.estimate(fz.cal, y[rows], mask[rows]).theta
            info_ab = est.item_information(replace_grid(fz.cal, theta))  # 2 x N
            pos = {int(i): j for j, i in enumerate(fz.items["id"])}
            ids = sm.items["id"].to_numpy()[common][differ]
            info = np.array([info_ab[:, pos[int(i)]].sum() if int(i) in pos else 0.0 for i in ids])
            out["calibration_run"] = fz.run_id
            k = mask[rows].sum(axis=1)
            if (k < len(fz.columns)).any():
                e, _ = estimate_models(fz, y, mask, np.array(rows), reference_rows(mask.all(axis=1)), level=level,
                                         stretch=False)
                from scipy.stats import norm

                z = float(norm.ppf((1 + level) / 2))
                d = float(e.accuracy[0] - e.accuracy[1])
                half = z * float(np.hypot(e.sd[0], e.sd[1]))
                out["through_estimate"] = {
                    "note": "at least one model answered only part of the benchmark: its full accuracy is an "
                            "estimate, and so is this difference; its interval holds only the uncertainty of the "
                            "unseen answers on this benchmark's items (the two estimates taken as independent), "
                            "not the item sampling of the interval above, so it is narrower and is no test of A "
                            "against B beyond these items",
                    "estimate_a": float(e.accuracy[0]), "estimate_b": float(e.accuracy[1]),
                    "seen_a": int(k[0]), "seen_b": int(k[1]), "n_items": int(len(fz.columns)),
                    "difference": d, "difference_lo": d - half, "difference_hi": d + half}
        order = np.argsort(-info, kind="stable")
        out["differing_items"] = [{"key": str(keys[differ[j]]), "a": int(ya[differ[j]]), "b": int(yb[differ[j]]),
                                   "information": round(float(info[j]), 5)} for j in order]
        return out
    finally:
        conn.close()


def replace_grid(cal: est.Calibration, theta: np.ndarray) -> est.Calibration:
    """The calibration's items on another set of abilities (for the information at given abilities)."""
    return est.Calibration(cal.a, cal.b, cal.c, np.asarray(theta, float), np.zeros(len(theta)))


@dataclass(frozen=True)
class AdaptiveConfig:
    """Computerized adaptive testing simulated over held-out models (issue 34, part 3): 5 folds over the fully
    answered models, items calibrated on the other folds, each held-out model tested one most-informative item at
    a time until its predicted accuracy's sd is at most ``target_se`` (0.01: a 95 % interval of about +-2 points)."""

    target_se: float = 0.01
    max_items: int = 0  # 0 = the whole benchmark
    folds: int = 5
    max_test: int = 200
    seed: int = 0


def run_adaptive(db_path, benchmark: str, config: AdaptiveConfig = AdaptiveConfig(), *,
                 progress: Progress = no_progress, cancel: threading.Event | None = None) -> int:
    from benchloupe.engine import estimate_validate as ev

    if not 0 < config.target_se < 0.5:
        raise EngineError(say(Opt("target_se"), " is the sd of the predicted accuracy (0.01 = about +-2 points), "
                              f"got {config.target_se}"))
    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        sm = read.load_static(conn, benchmark)
        if sm.trials is not None:
            raise EngineError("adaptive testing needs 0/1 static results")
        mask = sm.mask
        full = np.flatnonzero(mask.all(axis=1))
        if len(full) < 5 * config.folds:
            raise EngineError(f"adaptive testing is simulated on models that answered every item; {benchmark!r} has "
                              f"{len(full)}, at least {5 * config.folds} are needed")
        y = sm.correct.astype(float)
        chance = pd.to_numeric(sm.items["chance"], errors="coerce").fillna(0).to_numpy(float) \
            if "chance" in sm.items else None
        chance = chance if chance is not None and chance.any() else None
        ctx = RunContext(db_path, "estimate-adaptive", benchmark, config.__dict__, config.seed,
                         [(benchmark, "static")])
        ctx.start(conn, fingerprint(y[full]))
        with ctx.guard(conn):
            rng = np.random.default_rng(config.seed)
            parts = np.array_split(rng.permutation(full), config.folds)
            res_rows, stretch = [], []
            for f, test in enumerate(parts):
                check_cancel(cancel)
                progress(f, config.folds, f"fold {f + 1} of {config.folds}: calibrating, then testing adaptively")
                train = np.setdiff1d(np.arange(len(y)), test)
                if len(test) > config.max_test:
                    test = np.sort(rng.choice(test, config.max_test, replace=False))
                cal, _, _ = ev.fold_calibration(y[train], mask[train], chance, cancel=cancel)
                sc = ev.cat_scale(y[train], mask[train], chance, target_se=config.target_se,
                                  max_items=config.max_items or None, seed=config.seed + f, cancel=cancel)
                stretch.append(sc)
                r = est.simulate_cat(cal, y[test], target_se=config.target_se, max_items=config.max_items or None,
                                     scale=sc)
                # the same number of random items, for comparison
                rnd = np.zeros((len(test), cal.n_items), bool)
                for i, k in enumerate(r.items):
                    rnd[i, rng.choice(cal.n_items, int(k), replace=False)] = True
                e_rnd = est.estimate(cal, y[test], rnd)
                res_rows.append(pd.DataFrame({"model_id": sm.models["id"].to_numpy()[test], "items": r.items,
                                              "estimate": r.accuracy, "estimate_lo": r.lo, "estimate_hi": r.hi,
                                              "truth": r.truth, "reached": r.reached,
                                              "random_same_k": e_rnd.accuracy}))
            df = pd.concat(res_rows, ignore_index=True)
            err = (df["estimate"] - df["truth"]).abs()
            metrics = {"target_se": config.target_se, "models": len(df), "n_items": int(sm.shape[1]),
                       "items_median": float(df["items"].median()), "items_p90": float(df["items"].quantile(0.9)),
                       "items_max": int(df["items"].max()), "reached_share": round(float(df["reached"].mean()), 4),
                       "mae_points": round(100 * float(err.mean()), 3),
                       "p90_error_points": round(100 * float(err.quantile(0.9)), 3),
                       "coverage": round(float(((df["truth"] >= df["estimate_lo"])
                                                & (df["truth"] <= df["estimate_hi"])).mean()), 4),
                       "random_same_k_mae_points": round(100 * float((df["random_same_k"] - df["truth"]).abs()
                                                                     .mean()), 3),
                       "stretch_min": round(min(stretch), 3), "stretch_max": round(max(stretch), 3)}
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=metrics, timings={"total_s": round(time.perf_counter() - t0, 4)},
                models=df.drop(columns=["truth"]).assign(truth=df["truth"])))
            return ctx.run_id
    finally:
        conn.close()
