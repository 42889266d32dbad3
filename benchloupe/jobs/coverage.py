"""Coverage runs (paper 003 §3, Appendix C): the 1PL difficulty fit, DDM and gaps, the C.3 diagnostics and the
C.6 posterior uncertainty, saved as a run whose largest gaps become ``gap`` flags (BenchFill targets); and
Algorithm 1 calibration exported as a new benchmark.

Items that BenchFill added and the curator accepted have no benchmark results yet (the annotators are other
models); they enter the difficulty set with the raw difficulty their online calibration gave (section 4.1),
which is what "recomputes coverage" after an accept means here.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sstats

from benchloupe.engine import coverage
from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.irt import OnePLConfig
from benchloupe.store import read, runs
from benchloupe.store.db import connect
from benchloupe.store.writer import derive_benchmark

from . import Analysis, RunContext, fingerprint, register


@dataclass(frozen=True)
class CoverageConfig:
    """Coverage of paper 003 (§3.1, C.3, C.4, C.6): 1PL MAP with N(0,1) priors, guessing from item chance levels,
    top-5 gap sum, uniform target, Laplace posterior uncertainty with 1,000 draws.

    ``target``: "uniform", "beta:A,B", or "benchmark:NAME" (the normalised difficulties of another benchmark's
    latest coverage run). ``group`` restricts the run to one item group (per-topic coverage).
    """

    method: str = "map"
    guessing: bool = True
    k: int = 5
    target: str = "uniform"
    uncertainty: str = "laplace"
    n_draws: int = 1000
    seed: int = 0
    group: str = ""


def parse_target(conn, spec: str):
    spec = (spec or "uniform").strip()
    if spec == "uniform":
        return None
    if spec.startswith("beta:"):
        try:
            a, b = (float(x) for x in spec[5:].split(","))
        except ValueError:
            raise EngineError(f"target {spec!r}: write beta:A,B with two positive numbers, e.g. beta:2,2") from None
        return coverage.TargetDistribution.from_scipy(sstats.beta(a, b), f"beta({a:g},{b:g})")
    if spec.startswith("benchmark:"):
        other = spec[len("benchmark:"):]
        rid = runs.latest_run(conn, read.benchmark_id(conn, other), ("coverage",))
        if rid is None:
            raise EngineError(f"target {spec!r}: run `benchloupe coverage {other}` first")
        z = runs.run_items(conn, rid)["z"].dropna().to_numpy()
        return coverage.TargetDistribution.from_samples(z, f"benchmark {other}")
    raise EngineError(f"unknown target {spec!r}; use uniform, beta:A,B or benchmark:NAME")


def _inputs(conn, benchmark: str, config: CoverageConfig):
    sm = read.load_static(conn, benchmark)
    its = sm.items
    keep = np.ones(len(its), bool)
    if config.group:
        keep = (its["group"] == config.group).to_numpy()
        if not keep.any():
            groups = ", ".join(sorted(set(its["group"])))
            raise EngineError(f"benchmark {benchmark!r} has no item group {config.group!r}; groups: {groups}")
    observed = sm.mask.any(axis=0)
    fitted = keep & observed
    extra = keep & ~observed
    prior_b = np.array([json.loads(m).get("difficulty_raw") if isinstance(m, str) else None
                        for m in its["metadata"]], dtype=object)
    added = extra & np.array([v is not None for v in prior_b])
    if fitted.sum() < 2:
        raise EngineError(f"benchmark {benchmark!r} has {int(fitted.sum())} items with results; coverage needs 2+")
    chance = None
    if config.guessing and "chance" in its:
        ch = its["chance"].to_numpy(float)[fitted]
        chance = np.nan_to_num(ch, nan=0.0) if np.isfinite(ch).any() else None
    return sm, fitted, added, prior_b, chance


def run_coverage(db_path, benchmark: str, config: CoverageConfig = CoverageConfig(), *,
                 progress: Progress = no_progress, cancel: threading.Event | None = None, **_) -> int:
    """1PL fit + coverage report + diagnostics (+ uncertainty); gap flags for the top-k gaps."""
    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        sm, fitted, added, prior_b, chance = _inputs(conn, benchmark, config)
        target = parse_target(conn, config.target)
        y = sm.correct[:, fitted]
        mask = sm.mask[:, fitted]
        succ = None if sm.trials is None else sm.successes[:, fitted]
        tri = None if sm.trials is None else sm.trials[:, fitted]
        ctx = RunContext(db_path, "coverage", benchmark, config, config.seed)
        ctx.start(conn, fingerprint(y, mask, succ, tri))
        with ctx.guard(conn):
            t = time.perf_counter()
            progress(0, 3, "1PL difficulty fit")
            fit_cfg = OnePLConfig(method=config.method)
            if succ is not None:
                res = coverage.analyse(None, None, successes=succ, trials=tri, chance=chance, target=target,
                                       k=config.k, seed=config.seed, fit_config=fit_cfg, progress=progress,
                                       cancel=cancel)
            else:
                res = coverage.analyse(y, mask, chance=chance, target=target, k=config.k, seed=config.seed,
                                       fit_config=fit_cfg, progress=progress, cancel=cancel)
            t = ctx.lap("fit_and_metrics_s", t)
            check_cancel(cancel)
            b_all = res.fit.b
            item_ids = sm.items["id"].to_numpy()[fitted]
            if added.any():  # accepted BenchFill items join with their online-calibrated difficulty
                b_all = np.concatenate([b_all, prior_b[added].astype(float)])
                item_ids = np.concatenate([item_ids, sm.items["id"].to_numpy()[added]])
                report = coverage.coverage_report(b_all, target=target, k=config.k, seed=config.seed)
            else:
                report = res.report
            unc = None
            if config.uncertainty != "none" and res.fit.method == "map":
                progress(2, 3, f"C.6 posterior uncertainty ({config.uncertainty})")
                unc = coverage.metric_uncertainty(
                    res.fit, target=target, correct=y if succ is None else None, mask=mask if succ is None else None,
                    successes=succ, trials=tri,
                    config=coverage.UncertaintyConfig(method=config.uncertainty, n_draws=config.n_draws,
                                                      seed=config.seed, k=config.k),
                    progress=progress, cancel=cancel)
                t = ctx.lap("uncertainty_s", t)
            d = res.diagnostics
            metrics = {"n_items": int(len(b_all)), "n_models": int(y.shape[0]), "n_benchfill_items": int(added.sum()),
                       "target": report.target, "ddm": report.ddm, "ddm_uniform": report.ddm_uniform,
                       "max_gap": report.max_gap, "k": report.k, "topk_sum": report.topk_sum,
                       "uniform_baseline_max_gap": report.uniform_baseline_max_gap,
                       "max_gap_ratio": report.max_gap_ratio, "uniform_exceed_prob": report.uniform_exceed_prob,
                       "b_min": report.b_min, "b_max": report.b_max,
                       "fit_objective": res.fit.objective, "fit_iterations": res.fit.iterations,
                       "fit_converged": res.fit.converged,
                       "model_information": d.model_information, "item_information": d.item_information,
                       "model_inversion_rate": d.model_inversion_rate, "item_inversion_rate": d.item_inversion_rate,
                       "diagnostic_checks": d.checks, "diagnostics_passed": d.passed}
            if unc is not None:
                metrics.update({"uncertainty": unc.method, "ddm_sd": unc.ddm_sd, "max_gap_sd": unc.max_gap_sd,
                                "topk_sum_sd": unc.topk_sum_sd,
                                "prob_max_gap_exceeds_uniform": unc.prob_max_gap_exceeds_uniform})
            se = np.concatenate([res.fit.b_se, np.full(int(added.sum()), np.nan)])
            items = pd.DataFrame({"item_id": item_ids, "difficulty": b_all, "z": report.normalised, "b_se": se})
            models = pd.DataFrame({"model_id": sm.models["id"].to_numpy(), "theta": res.fit.theta})
            gaps = report.gaps.reset_index(drop=True)
            top = gaps.head(config.k)
            flags = pd.DataFrame({"kind": "gap", "score": top["width"].to_numpy(),
                                  "payload": [{**{k: float(v) for k, v in row.items() if isinstance(v, (int, float))},
                                               "rank": r + 1} for r, row in enumerate(top.to_dict("records"))]})
            artifacts = {"gaps": gaps, "ecdf": report.ecdf}
            if unc is not None:
                artifacts["uncertainty_draws"] = unc.draws.describe().reset_index()
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=metrics, timings={**ctx.timings, "total_s": round(time.perf_counter() - t0, 4)},
                models=models, items=items, artifacts=artifacts, flags=flags))
            progress(3, 3, "coverage done")
            return ctx.run_id
    finally:
        conn.close()


@dataclass(frozen=True)
class CalibrateConfig:
    """Quantile-matching calibration (paper 003 Appendix D, Algorithm 1) toward ``target`` keeping ``k`` items
    (0 = half the benchmark, the paper leaves k open)."""

    k: int = 0
    target: str = "uniform"


def run_calibrate(db_path, benchmark: str, config: CalibrateConfig = CalibrateConfig(), *, name: str | None = None,
                  progress: Progress = no_progress, cancel: threading.Event | None = None, **_) -> int:
    """Algorithm 1 on the latest coverage run's difficulties; with *name*, exports the subset as a benchmark."""
    conn = connect(db_path)
    try:
        bid = read.benchmark_id(conn, benchmark)
        cov = runs.latest_run(conn, bid, ("coverage",))
        if cov is None:
            raise EngineError(f"no coverage run for {benchmark!r}; run `benchloupe coverage {benchmark}` first")
        ri = runs.run_items(conn, cov)
        target = parse_target(conn, config.target)
        ctx = RunContext(db_path, "calibrate", benchmark, {**config.__dict__, "coverage_run": cov, "export": name},
                         None)
        ctx.start(conn, fingerprint(ri["z"].to_numpy()))
        with ctx.guard(conn):
            progress(0, 1, "Algorithm 1: quantile matching")
            plan = coverage.quantile_match(ri["z"].to_numpy(), target, k=config.k or None)
            sweep = coverage.calibration_sweep(ri["z"].to_numpy(), target)
            kept_ids = ri["item_id"].to_numpy()[plan.keep]
            metrics = {"k": plan.k, "target": plan.target, "w1_before": plan.w1_before, "w1_after": plan.w1_after,
                       "ddm_after_renormalised": getattr(plan, "ddm_after_renormalised", None), "coverage_run": cov}
            if name:
                new_bid = derive_benchmark(conn, benchmark, name, [int(i) for i in kept_ids],
                                           reason="Algorithm 1 calibration", detail={"run_coverage": cov, "k": plan.k})
                metrics["exported_benchmark"] = name
                metrics["exported_benchmark_id"] = new_bid
            items = pd.DataFrame({"item_id": kept_ids, "keep_order": np.arange(1, len(kept_ids) + 1)})
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(metrics=metrics, items=items,
                                                                artifacts={"sweep": sweep}))
            progress(1, 1, "done")
            return ctx.run_id
    finally:
        conn.close()


register(Analysis("coverage", "Difficulty coverage: 1PL, DDM, gaps, diagnostics (paper 003)", "coverage",
                  CoverageConfig, "static", lambda db, bench, config=None, **kw: run_coverage(
                      db, bench, config or CoverageConfig(), **kw)))
register(Analysis("calibrate", "Quantile-matching calibration, Algorithm 1 (paper 003)", "coverage", CalibrateConfig,
                  "static", lambda db, bench, config=None, **kw: run_calibrate(db, bench, config or CalibrateConfig(),
                                                                                 **kw)))
