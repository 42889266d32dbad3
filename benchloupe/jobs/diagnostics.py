"""DualEval diagnostics as stored runs (paper 000 §4.2, §4.3, Appendix D): Fisher compression with the
subset-recovery experiment, residual anomaly candidates (and the synthetic contamination protocol), screening a
newly imported model against a frozen clean fit, and the question-level cluster bootstrap.

Each run fits DualEval first (mode "auto": joint when static results and arena rewards are both present, else
the one source there is), with the paper's Appendix B settings.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from benchloupe.columns import Columns
from benchloupe.engine import anomaly, contamination, informativeness, joint
from benchloupe.engine.common import EngineError, Progress, Stages, check_cancel, no_progress
from benchloupe.engine.informativeness import (  # noqa: F401 - for the faces: CompressConfig.strategy's choices,
    NOISE_Z,  # and the random baseline's noise band in compress's recovery table
    SELECTIONS,
    random_se,
)
from benchloupe.engine.joint.subsets import static_rows
from benchloupe.engine.stats import auprc, auroc
from benchloupe.hints import Alt, Opt, say
from benchloupe.store import curation, read, runs
from benchloupe.store.db import connect
from benchloupe.store.writer import derive_benchmark

from .base import Analysis, RunContext, fingerprint, register
from .data import (
    CHANCE_MODES,
    JointInputs,
    rank_desc,
    report_chance,
    run_chance,
    start_run,
)


def _fit(inputs: JointInputs, mode: str, progress, cancel) -> tuple[joint.JointConfig, joint.JointResult]:
    cfg = joint.JointConfig(mode=mode)
    static = inputs.static if cfg.uses_static else None
    arena = inputs.arena if cfg.uses_arena else None
    if static is None and arena is None:
        raise EngineError(f"mode {mode!r} needs {'static results' if cfg.uses_static else 'arena rewards'}")
    return cfg, joint.fit_joint(static, arena, cfg, progress=progress, cancel=cancel)


def _all_items(inputs: JointInputs, cfg: joint.JointConfig) -> np.ndarray:
    ids = []
    if inputs.static_items is not None and cfg.uses_static:
        ids.append(inputs.static_items["id"].to_numpy())
    if inputs.arena_items is not None and cfg.uses_arena:
        ids.append(inputs.arena_items["id"].to_numpy())
    return np.concatenate(ids) if ids else np.zeros(0, int)


# ------------------------------------------------------------------------------------------------ compression

def _check_chance_mode(mode: str) -> None:
    if mode not in CHANCE_MODES:
        raise EngineError(f"chance must be one of {', '.join(CHANCE_MODES)} (stated: the imported levels; estimate: "
                          f"one lower asymptote estimated from the data; none: the 2PL), got {mode!r}")


PURPOSES = ("ranking", "estimate")


@dataclass(frozen=True)
class CompressConfig:
    """Fisher-information compression (paper 000 §4.2): fractions 2.5 %-100 %, strategies targeted (the default
    selection; information spread over the ``target`` models: all, top:N or theta:LO,HI), top Fisher, top sharpness,
    difficulty-matched, random and random with 2PL+BT refit (scored against full-data DualEval, or its own
    full-data baseline with ``baseline_reference`` own), ``seeds`` random draws (of random 2PL+BT; plain random
    draws at least 10 and up to ``random_draws``, until its mean's standard error is small beside the targeted
    margin, issue 34.5); abilities refit with item
    parameters frozen. ``export_fraction`` > 0 with ``export_name`` writes the ``strategy`` subset as a new
    benchmark; ``retire_lowest`` > 0 retires that many least informative items (chance-aware information).
    ``chance``: stated (the imported chance levels, tested against the data), estimate (one shared lower
    asymptote estimated from the data) or none (the 2PL).  ``purpose`` estimate (``--for estimate``) selects ``k``
    items for predicting a new model's full accuracy instead (issue 34; benchloupe.jobs.estimate); ``validate``
    (sizes such as 10,25,50,100) cross-validates every selection x estimator over held-out models."""

    mode: str = "auto"
    seeds: int = 3
    recovery: bool = True
    strategy: str = informativeness.DEFAULT_STRATEGY
    target: str = "all"
    baseline_reference: str = "dualeval"
    export_fraction: float = 0.0
    export_name: str = ""
    retire_lowest: int = 0
    chance: str = "stated"
    random_draws: int = 50
    purpose: str = "ranking"
    k: int = 0
    validate: str = ""

    def __post_init__(self) -> None:
        _check_chance_mode(self.chance)
        if self.purpose not in PURPOSES:
            raise EngineError(say(Opt("purpose", spelled="--for"), f" takes {' or '.join(PURPOSES)} (ranking: the "
                                  "subset-recovery compression; estimate: k items to predict a new model's full "
                                  f"accuracy), got {self.purpose!r}"))
        if self.purpose == "estimate" and self.k < 1 and not self.validate:
            raise EngineError(say(Opt("purpose", "estimate", spelled="--for"), " needs ", Opt("k", "K"),
                                  ", the number of items to select"))
        if self.k and self.purpose != "estimate":
            raise EngineError(say(Opt("k", "K"), " is the size of an estimation subset: add ",
                                  Opt("purpose", "estimate", spelled="--for"), " (a ranking subset's size is ",
                                  Opt("export_fraction"), ")"))
        if self.strategy not in informativeness.SELECTIONS:
            raise EngineError(f"strategy must be one of {', '.join(informativeness.SELECTIONS)}, got "
                              f"{self.strategy!r}")
        if self.baseline_reference not in ("dualeval", "own"):
            raise EngineError("baseline_reference must be 'dualeval' (the paper's Fig. 2) or 'own'")
        if self.seeds < 1:
            raise EngineError("seeds must be at least 1")


def run_compress(db_path, benchmark: str, config: CompressConfig = CompressConfig(), *, arena: str | None = None,
                 reward_model: str | None = None, progress: Progress = no_progress, cancel: threading.Event | None = None, **_) -> int:
    if config.purpose == "estimate" or config.validate:
        from .estimate import run_compress_estimate  # issue 34: subsets for predicting accuracy

        return run_compress_estimate(db_path, benchmark, config, progress=progress, cancel=cancel)
    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        if config.export_fraction and not config.export_name:
            raise EngineError("export_fraction needs export_name, the new benchmark's name")
        inputs, mode, ctx = start_run(conn, db_path, "compress", benchmark, config, 0, arena, reward_model)
        t = ctx.lap("load_s", t0)
        with ctx.guard(conn):
            inputs = run_chance(conn, ctx, inputs, config, cancel, progress)
            _check_compressible(benchmark, inputs, mode)
            cfg, res = _fit(inputs, mode, progress, cancel)
            t = ctx.lap("fit_s", t)
            static = inputs.static if cfg.uses_static else None
            arena_d = inputs.arena if cfg.uses_arena else None
            scores = informativeness.fisher_scores(res, static, arena_d, cfg)
            information = informativeness.mean_information(res, static, arena_d, cfg)
            item_ids = _all_items(inputs, cfg)
            metrics: dict = {"mode": mode, "n_items": int(len(scores)), "objective": res.objective,
                             "selection": informativeness.describe_strategy(config.strategy),
                             **_chance_metrics(static)}
            warnings: list[str] = []
            artifacts = {}
            if config.recovery:
                check_cancel(cancel)
                table = informativeness.subset_recovery(res, static, arena_d, cfg, seeds=tuple(range(config.seeds)),
                                                        target=config.target,
                                                        baseline_reference=config.baseline_reference,
                                                        progress=progress, cancel=cancel)
                if "random" in set(table["strategy"]):  # issue 34.5: enough draws for a meaningful band
                    table = informativeness.more_random_draws(res, static, arena_d, cfg, table,
                                                              strategy=config.strategy,
                                                              max_draws=max(config.random_draws, config.seeds),
                                                              target=config.target, progress=progress,
                                                              cancel=cancel)
                t = ctx.lap("recovery_s", t)
                metrics["recovery_refits"] = informativeness.recovery_refits(table)
                summary = informativeness.summarise_recovery(table)
                rd = summary.loc[summary["strategy"] == "random", "draws"]
                if len(rd):
                    metrics["random_draws"] = [int(rd.min()), int(rd.max())]
                if not np.isfinite(summary["spearman_mean"].to_numpy(dtype=float)).any():
                    raise EngineError(say(
                        f"no variance in the full-data ranking of {benchmark!r}: every model ties, so subset recovery has "
                        "nothing to recover (its correlations are undefined); import results that tell the models "
                        "apart, or pass ", Opt("recovery", "no")))
                artifacts.update({"recovery": table, "recovery_summary": summary})
                for strat in ("top_fisher", config.strategy, "random"):
                    at10 = summary[(summary["strategy"] == strat) & np.isclose(summary["fraction"], 0.10)]
                    if len(at10):
                        metrics[f"{strat}_10pct_spearman"] = float(at10["spearman_mean"].iloc[0])
                vs = informativeness.versus_random(summary)
                metrics["versus_random"] = vs
                warnings.extend(informativeness.losses_to_random(vs, config.strategy))
            if config.export_fraction:
                keep = informativeness.select_subset(res, static, arena_d, cfg, config.strategy,
                                                     config.export_fraction, target=config.target)
                new_id = derive_benchmark(conn, benchmark, config.export_name, [int(i) for i in item_ids[keep]],
                                          reason=f"{config.strategy} compression",
                                          detail={"fraction": config.export_fraction, "run": ctx.run_id,
                                                  "strategy": config.strategy, "target": config.target})
                metrics.update({"exported_benchmark": config.export_name, "exported_benchmark_id": new_id,
                                "exported_items": int(len(keep))})
            if config.retire_lowest:
                low = informativeness.lowest_information(information, config.retire_lowest)
                for i in low:
                    curation.set_item_status(conn, int(item_ids[i]), "retired",
                                             f"lowest Fisher information ({information[i]:.3g}), compress run "
                                             f"{ctx.run_id}")
                metrics["retired_items"] = int(len(low))
            if warnings:
                metrics["warnings"] = warnings
            report_chance(metrics, inputs)
            a = np.concatenate([res.a_static if cfg.uses_static and static is not None else [],
                                res.a_arena if cfg.uses_arena and arena_d is not None else []])
            b = np.concatenate([res.b_static if cfg.uses_static and static is not None else [],
                                res.b_arena if cfg.uses_arena and arena_d is not None else []])
            items = pd.DataFrame({"item_id": item_ids, "fisher": scores, "information": information,
                                  "difficulty": b, "sharpness": a, "fisher_rank": rank_desc(scores)})
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=metrics, timings={**ctx.timings, "total_s": round(time.perf_counter() - t0, 4)}, items=items,
                models=pd.DataFrame({"model_id": inputs.models["id"], "theta": res.theta}), artifacts=artifacts))
            return ctx.run_id
    finally:
        conn.close()


MIN_COMPRESS_ITEMS = 2  # Fisher ranks and subset recovery compare items: one item has nothing to compare


def _check_compressible(benchmark: str, inputs: JointInputs, mode: str) -> None:
    """Refuse, in one line before any fit, a benchmark compress cannot say anything about (issue 37 #12: an
    all-right benchmark failed with an internal TypeError and its run row said ``done``): fewer than
    :data:`MIN_COMPRESS_ITEMS` items with results (too few items), or static results that never vary (every
    observed cell right, or every one wrong: no item tells models apart, Fisher information is zero)."""
    static = inputs.static if mode != "arena" else None
    n_items = 0
    if static is not None:
        n_items += int(static.mask.any(axis=0).sum())
    if inputs.arena is not None and mode != "static":
        n_items += int(inputs.arena.shape[1])
    if n_items < MIN_COMPRESS_ITEMS:
        raise EngineError(f"compress needs at least {MIN_COMPRESS_ITEMS} items with results; {benchmark!r} has "
                          f"{n_items} (too few items): import more items")
    if static is None or (inputs.arena is not None and mode != "static"):
        return
    seen = static.mask
    if not seen.any():
        return
    got = np.asarray(static.correct)[seen].astype(np.float64)
    top = np.asarray(static.trials)[seen].astype(np.float64) if static.trials is not None else np.ones_like(got)
    for name, same in (("correct", np.all(got == top)), ("wrong", np.all(got == 0))):
        if same:
            raise EngineError(f"{benchmark!r} has no variance: every observed result is {name}, so no item tells "
                              "the models apart (Fisher information is zero everywhere); import results that differ")


def _chance_metrics(static) -> dict:
    """How many static items carry a known chance level (guessing) and its mean, for the run's summary."""
    c = None if static is None else getattr(static, "chance", None)
    if c is None:
        return {"items_with_chance": 0}
    c = np.asarray(c, float)
    return {"items_with_chance": int((c > 0).sum()), "mean_chance": round(float(c[c > 0].mean()), 4)}


# ------------------------------------------------------------------------------------------------ anomalies

@dataclass(frozen=True)
class AnomalyConfig:
    """Residual anomaly detection (paper 000 §4.3, Table 8): cells with |standardised residual| > 3.5 become
    candidates for triage. ``protocol`` also runs the synthetic contamination protocol (rates 0.5/1/2/5 %,
    5 seeds, +2.0 reward boost) and reports cell-level AUROC/AUPRC per detector (Appendix K), beside the oracle
    ceiling of the benchmark (issue 23). ``chance``: stated | estimate | none (see CompressConfig)."""

    mode: str = "auto"
    threshold: float = 3.5
    protocol: bool = False
    chance: str = "stated"

    def __post_init__(self) -> None:
        _check_chance_mode(self.chance)
        if not (np.isfinite(self.threshold) and self.threshold > 0):
            raise EngineError(f"threshold must be a positive number of standard deviations, got {self.threshold}")


PROTOCOL_COLUMNS = ["auroc", "auprc", "precision_at_k", "item_auroc", "item_auprc", "item_precision_at_k"]


def _protocol(res, cfg, static, arena, progress, cancel, *, truth_chance=None):
    """The section 4.3 synthetic protocol as the run reports it (issue 23): every rate, both detectors, the
    guessing-aware residual and the 2PL one when the items carry a chance level, and beside each static row the
    oracle ceiling (:func:`_ceiling`) with ``ceiling_noise``, two Monte Carlo standard errors of the row's mean
    difference from it over the seeds.  Returns (per-seed rows, means per (target, p_model, detector, rate), the
    printed table)."""
    progress(0, 1, "synthetic contamination protocol")
    guessing = static is not None and static.chance is not None
    tables = []
    for target, data_ok in (("static", static is not None), ("arena", arena is not None)):
        if data_ok:
            t = anomaly.contamination_experiment(static, arena, cfg, target=target, clean=res, progress=progress,
                                                 cancel=cancel)
            t["p_model"] = "guessing" if guessing and target == "static" else "2pl"
            tables.append(t)
    if guessing:  # the same protocol with the chance level ignored, to show what it changes
        t = anomaly.contamination_experiment(replace(static, chance=None), arena, cfg, target="static",
                                             progress=progress, cancel=cancel)
        t["p_model"] = "2pl"
        tables.append(t)
    proto = pd.concat(tables, ignore_index=True)
    summ = proto.groupby(["target", "p_model", "detector", "rate"], sort=False)[PROTOCOL_COLUMNS].mean().reset_index()
    table = summ[["target", "p_model", "detector", "rate", "auroc", "auprc", "item_auroc"]].copy()
    for c in ("ceiling_auroc", "ceiling_auprc", "ceiling_noise"):
        table[c] = np.nan
    if static is not None:
        oracle = _ceiling(res, cfg, static, arena, progress, cancel, truth_chance)
        if len(oracle):
            ceil = oracle.groupby("rate")[["auroc", "auprc"]].mean()
            st = table["target"] == "static"
            table.loc[st, "ceiling_auroc"] = table.loc[st, "rate"].map(ceil["auroc"]).to_numpy()
            table.loc[st, "ceiling_auprc"] = table.loc[st, "rate"].map(ceil["auprc"]).to_numpy()
            table.loc[st, "ceiling_noise"] = [_noise(proto, oracle, r) for r in table[st].itertuples()]
            oracle = oracle.assign(target="static", p_model="oracle", detector="true_p")
            proto = pd.concat([proto, oracle], ignore_index=True)
    table["below_ceiling"] = table["ceiling_auroc"] - table["auroc"]
    return proto, summ, table


def _ceiling(res, cfg, static, arena, progress, cancel, truth_chance=None) -> pd.DataFrame:
    """The oracle ceiling (:func:`benchloupe.engine.anomaly.oracle_ceiling`; issue 32: a bound the detector does
    not beat beyond Monte Carlo noise): data simulated from a model that fits them, scored with its true
    probabilities and with the detector's own clean fit redone on the simulated data (guessing-aware with the
    run's chance levels, and the 2PL when the items carry them).  The model is the run's fit, except where the
    data reject the stated chance (*truth_chance*: the estimated levels, from the chance test): a refit with
    them, since data simulated with a floor the data do not show hide injections the real data give away."""
    if truth_chance is not None:
        progress(0, 1, "oracle ceiling: refitting with the estimated chance levels (the data reject the stated)")
        truth = replace(static, chance=truth_chance)
        p_true = joint.fit_joint(truth, arena, cfg, cancel=cancel).p_static()
    else:
        truth, p_true = static, res.p_static()

    def refit(chance):
        return lambda sim: joint.fit_joint(replace(sim, chance=chance), arena, cfg, cancel=cancel).p_static()

    refits = {"refit": refit(static.chance)}
    if static.chance is not None:
        refits["refit_2pl"] = refit(None)
    progress(0, 1, "oracle ceiling: the protocol on data simulated from the fit, scored with its probabilities "
                   "and with the detector's fit redone on them")
    return anomaly.oracle_ceiling(truth, p_true, refits=refits, cancel=cancel)


def _noise(proto: pd.DataFrame, oracle: pd.DataFrame, row) -> float:
    """Two standard errors of the mean, over the seeds, of a protocol row's AUROC minus the ceiling's (the two
    are independent draws: the real data with injections, the simulated data with theirs)."""
    det = proto[(proto["target"] == row.target) & (proto["p_model"] == row.p_model)
                & (proto["detector"] == row.detector) & (proto["rate"] == row.rate)].set_index("seed")["auroc"]
    ceil = oracle[oracle["rate"] == row.rate].set_index("seed")["auroc"]
    d = (det - ceil).dropna()
    return float(2 * d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")


CEILING_SLACK = 0.002  # beaten only beyond two Monte Carlo standard errors and this (AUROC is printed to 4 places)


def _protocol_metrics(table: pd.DataFrame, *, guessing: bool, chance_mode: str = "stated",
                      truth_chance: str = "") -> dict:
    """The protocol's headline numbers: the minimum AUROC of the primary static row (clean reference, the fit's
    own p model) as before, the ceiling's range and the largest shortfall below it over every static row.
    ``protocol_ceiling_holds`` is False where the clean-reference detector beats the ceiling beyond Monte Carlo
    noise (two standard errors of its mean difference, and :data:`CEILING_SLACK`), with a warning that says the
    data depart from the model the ceiling was simulated from.  *truth_chance* names the chance levels the
    ceiling was simulated with when they are not the run's (the estimate, where the data reject the stated)."""
    st = table[table["target"] == "static"]
    first = st[(st["detector"] == "clean_reference") & (st["p_model"] == ("guessing" if guessing else "2pl"))]
    out = {"protocol_min_auroc_clean_reference_static": float(first["auroc"].min()) if len(first) else None,
           "protocol_min_item_auroc_clean_reference_static": float(first["item_auroc"].min()) if len(first) else None}
    if len(st) and st["ceiling_auroc"].notna().any():
        out.update({"protocol_ceiling_auroc_min": float(st["ceiling_auroc"].min()),
                    "protocol_ceiling_auroc_max": float(st["ceiling_auroc"].max()),
                    "protocol_max_below_ceiling_clean_reference": float(first["below_ceiling"].max())
                    if len(first) else None,
                    "protocol_max_below_ceiling_any": float(st["below_ceiling"].max())})
        if truth_chance:
            out["protocol_ceiling_chance"] = truth_chance
        over = -first["below_ceiling"] - first["ceiling_noise"].fillna(0.0).clip(lower=CEILING_SLACK)
        beaten = bool(len(first)) and bool((over > 0).any())
        out["protocol_ceiling_holds"] = not beaten
        if beaten:
            worst = first.loc[over.idxmax()]
            advice = [] if chance_mode != "stated" or not guessing else [
                "; ", Opt("chance", "estimate"), " simulates it with a floor estimated from the data"]
            out["protocol_warnings"] = [say(
                f"the clean-reference detector beats the oracle ceiling by {-worst['below_ceiling']:.3f} at "
                f"{worst['rate']:.1%} (beyond Monte Carlo noise, {worst['ceiling_noise']:.3f}), although the ceiling "
                "was simulated from a model fitted to these data and scored with that detector's own fit redone "
                "on them: the data depart from the fitted model (guessing that differs between items, structure "
                "the model lacks); read the ceiling as the model's reference, not a bound", *advice)]
    return out


def _truth_detection(conn, benchmark: str, inputs: JointInputs, static_residuals) -> dict:
    """Where the store holds injected cells (demo workspace): how well |residual| finds them.  ``static_residuals``
    makes the models x items residual matrix, only when there is truth to score it against (issue 26)."""
    t = read.truth(conn, benchmark, "cell")
    if t.empty:
        return {}
    res_static = static_residuals()
    if res_static is None:
        return {}
    rows = {n: i for i, n in enumerate(inputs.models["name"])}
    cols = {k: j for j, k in enumerate(inputs.static_items["key"])}
    labels = np.zeros(res_static.shape, bool)
    for key in t["key"]:
        m, item = key.split("\t")
        if m in rows and item in cols:
            labels[rows[m], cols[item]] = True
    ok = inputs.static.mask & np.isfinite(res_static)
    return {"truth_injected_cells": int(labels.sum()), "truth_auroc": auroc(res_static[ok], labels[ok]),
            "truth_auprc": auprc(res_static[ok], labels[ok])}


def _truth_chance(static, chance_metrics: dict) -> tuple[np.ndarray | None, str]:
    """Where the chance test rejected the stated levels (jobs.data.resolve_chance): the levels the data support,
    ``c_i = g stated_i / mean(stated)`` with ``g`` the test's estimate (one shared asymptote when every item
    states the same level), and words for them; (None, "") otherwise."""
    if static is None or static.chance is None or not chance_metrics.get("chance_test_rejected"):
        return None, ""
    stated = np.asarray(static.chance, float)
    mean, g = float(stated[stated > 0].mean()), float(chance_metrics["chance_test_estimate"])
    return np.where(stated > 0, stated * g / mean, 0.0), (f"estimated asymptote {g:.3f} (the data reject the "
                                                          f"stated {mean:.3f})")


def run_anomalies(db_path, benchmark: str, config: AnomalyConfig = AnomalyConfig(), *, arena: str | None = None,
                  reward_model: str | None = None, progress: Progress = no_progress,
                  cancel: threading.Event | None = None, report: dict | None = None, **_) -> int:
    """Fit, find the candidate cells, store the run and its ``anomaly`` flags; returns the run id.

    ``report``, when given, receives ``"unexpected_cells"`` once the run is stored: the flags' cells as
    :class:`~benchloupe.columns.Columns` (model name, item key, source, residual, expected_p, observed) in the order
    :func:`benchloupe.store.curation.flag_cells` reads them back, the same values, so that the command that prints
    them does not read back the 210,060 flags it has just written (issue 26)."""
    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        inputs, mode, ctx = start_run(conn, db_path, "anomalies", benchmark, config, 0, arena, reward_model)
        tick = ctx.lap("load_s", t0)
        with ctx.guard(conn):
            inputs = run_chance(conn, ctx, inputs, config, cancel, progress)
            cfg, res = _fit(inputs, mode, progress, cancel)
            tick = ctx.lap("fit_s", tick)
            static = inputs.static if cfg.uses_static else None
            arena_d = inputs.arena if cfg.uses_arena else None
            cands = anomaly.anomaly_candidates(res, static, arena_d, threshold=config.threshold)
            tick = ctx.lap("candidates_s", tick)
            metrics = {"mode": mode, "threshold": config.threshold, "candidates": int(len(cands)),
                       "static_candidates": int((cands["source"] == "static").sum()) if len(cands) else 0,
                       "arena_candidates": int((cands["source"] == "arena").sum()) if len(cands) else 0}
            metrics.update(_truth_detection(conn, inputs.static_benchmark or benchmark, inputs,
                                            lambda: anomaly.residuals(res, static, None).static))
            artifacts = {}
            if config.protocol:
                truth_chance, truth_words = _truth_chance(static, inputs.chance_report[0])
                proto, summ, table = _protocol(res, cfg, static, arena_d, progress, cancel,
                                               truth_chance=truth_chance)
                artifacts.update({"contamination_protocol": proto, "contamination_summary": summ,
                                  "protocol_table": table})
                pm = _protocol_metrics(table, guessing=static is not None and static.chance is not None,
                                       chance_mode=config.chance, truth_chance=truth_words)
                metrics["warnings"] = list(metrics.get("warnings", [])) + pm.pop("protocol_warnings", [])
                metrics.update(pm)
                tick = ctx.lap("protocol_s", tick)
            theta = res.theta
            flags = _anomaly_flags(cands, inputs, res, mode)
            ctx.lap("flags_s", tick)
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=report_chance(metrics, inputs),
                timings={**ctx.timings, "total_s": round(time.perf_counter() - t0, 4)},
                models=pd.DataFrame({"model_id": inputs.models["id"], "theta": theta}),
                items=pd.DataFrame({"item_id": inputs.static_items["id"], "difficulty": res.b_static,
                                    "sharpness": res.a_static}) if static is not None else None,
                artifacts=artifacts, flags=flags))
            if report is not None:
                report["unexpected_cells"] = _unexpected_cells(cands, inputs)
            return ctx.run_id
    finally:
        conn.close()


def _item_column(source: np.ndarray, qi: np.ndarray, static_values, arena_values) -> np.ndarray:
    """Per candidate, the value of its item (static or arena source) from the two items' columns."""
    out = np.empty(len(qi), dtype=object)
    static = source == "static"
    for sel, values in ((static, static_values), (~static, arena_values)):
        if sel.any():
            out[sel] = values[qi[sel]]
    return out


def _unexpected_cells(cands: pd.DataFrame, inputs: JointInputs) -> Columns:
    """The candidates as the command prints them: model name and item key (as the store holds them: the inputs
    were read from it), the payload's source, residual, expected_p and observed (the floats its JSON text was
    written from, which read back as the same floats). The flags were inserted in candidate order (ids
    ascending) and candidates come largest |residual| first, so this is ``flag_cells``' order (|score|
    descending, then id)."""
    if not len(cands):
        return Columns({k: [] for k in ("model", "item", "source", "residual", "expected_p", "observed")})
    source = cands["source"].to_numpy(object)
    mi = cands["model_idx"].to_numpy(np.int64)
    qi = cands["item_idx"].to_numpy(np.int64)
    keys = [None if f is None else f["key"].to_numpy(object) for f in (inputs.static_items, inputs.arena_items)]
    return Columns({"model": inputs.models["name"].to_numpy(object)[mi], "item": _item_column(source, qi, *keys),
                    "source": source, "residual": cands["residual"].to_numpy(float),
                    "expected_p": cands["expected_p"].to_numpy(float), "observed": cands["observed"].to_numpy(float)})


def _anomaly_flags(cands: pd.DataFrame, inputs: JointInputs, res: joint.JointResult, mode: str) -> Columns | None:
    """One ``anomaly`` flag per candidate cell, its payload the cell's residual, expectation, observation and the
    fit's parameters there; built column-wise (5,000 x 14,000 gave 210,000 candidates: 13 s row by row), the
    payload as JSON text (``runs.PAYLOAD_JSON``: no dict and no ``json.dumps`` per flag)."""
    if not len(cands):
        return None
    source = cands["source"].to_numpy()
    mi = cands["model_idx"].to_numpy(np.int64)
    qi = cands["item_idx"].to_numpy(np.int64)
    static = source == "static"
    item_id, b, a = np.zeros(len(qi), np.int64), np.zeros(len(qi)), np.zeros(len(qi))
    for sel, items, bb, aa in ((static, inputs.static_items, res.b_static, res.a_static),
                               (~static, inputs.arena_items, res.b_arena, res.a_arena)):
        if sel.any():
            item_id[sel] = items["id"].to_numpy()[qi[sel]]
            b[sel], a[sel] = bb[qi[sel]], aa[qi[sel]]
    resid = cands["residual"].to_numpy(float)
    # the payload's JSON text written a column at a time, the same text as the dict's (store.runs.json_objects)
    payload = runs.json_objects({"source": source.astype(str), "residual": resid,
                                 "expected_p": cands["expected_p"].to_numpy(float),
                                 "observed": cands["observed"].to_numpy(float), "theta": res.theta[mi],
                                 "b": b, "a": a, "mode": np.full(len(qi), mode, dtype=object)})
    # Columns, not a DataFrame: pandas would turn the 210,060 payload texts into an Arrow string column (0.3 s) that
    # the store's writer turns back into Python strings
    return Columns({"kind": "anomaly", "item_id": item_id, "model_id": inputs.models["id"].to_numpy()[mi],
                    "score": resid, runs.PAYLOAD_JSON: payload})


# ------------------------------------------------------------------------------------------------ screening

@dataclass(frozen=True)
class ScreenConfig:
    """Screen a model's newly imported static results against a frozen clean fit (paper 000 §4.3, operational
    setting): its ability is fitted with every item frozen at the clean run's parameters, then cells with
    |residual| > 3.5 are listed. ``run`` = the clean calibration run (0 = the latest static or joint fit)."""

    model: str = ""
    run: int = 0
    threshold: float = 3.5


def run_screen(db_path, benchmark: str, config: ScreenConfig = ScreenConfig(), *, progress: Progress = no_progress,
               cancel: threading.Event | None = None, **_) -> int:
    conn = connect(db_path)
    try:
        if not config.model:
            raise EngineError(say("screening needs ", Opt("model"), ", the newly imported model to check"))
        bid = read.benchmark_id(conn, benchmark)
        clean = config.run or runs.latest_run(conn, bid, ("static", "joint"))
        if clean is None:
            raise EngineError(say(f"no clean static or joint fit of {benchmark!r}; fit one before importing the new model (",
                                  Alt(f"`benchloupe fit static {benchmark}`", "the static analysis on screen 4"), "), or ", Opt("run", verb="pass")))
        clean_run = runs.get_run(conn, clean)
        fitted = set(runs.run_models(conn, clean)["name"])
        sm = read.load_static(conn, benchmark)
        rows = np.flatnonzero(sm.models["name"].to_numpy() == config.model)
        if not rows.size:
            raise EngineError(f"model {config.model!r} has no static results in {benchmark!r}; import them first")
        if config.model in fitted:
            raise EngineError(f"model {config.model!r} was part of clean run {clean}; screening needs a fit without "
                              "it (the frozen reference must not have seen the new results)")
        ri = runs.run_items(conn, clean)
        params = ri.set_index("item_id")
        known = sm.items["id"].isin(params.index).to_numpy()
        if not known.any():
            raise EngineError(f"clean run {clean} has no item parameters for {benchmark!r}")
        b = params.reindex(sm.items["id"])["difficulty"].to_numpy(float)
        a = params.reindex(sm.items["id"])["sharpness"].to_numpy(float)
        chance = pd.to_numeric(sm.items.get("chance"), errors="coerce") if "chance" in sm.items else None
        chance = None if chance is None or not chance.fillna(0).any() else chance.fillna(0).to_numpy(float)
        frozen = joint.JointResult(config=joint.JointConfig(mode="static"), theta=np.zeros(1), b_static=b,
                                   k_static=np.log(a), b_arena=np.zeros(0), k_arena=np.zeros(0), gamma=float("nan"),
                                   objective=float("nan"), iterations=0, converged=True, pairs=None,
                                   chance_static=chance)
        tr = None if sm.trials is None else sm.trials[rows[0]]
        y = sm.correct[rows[0]].astype(float) if tr is None else sm.successes[rows[0]].astype(float)
        m = (sm.mask[rows[0]] if tr is None else tr > 0) & known
        ctx = RunContext(db_path, "screen", benchmark, {**config.__dict__, "run": clean}, None,
                         [(benchmark, "static")])
        ctx.start(conn, fingerprint(y, m, b))
        with ctx.guard(conn):
            progress(0, 1, f"screening {config.model} against run {clean}")
            out = anomaly.screen_model(frozen, y, m, threshold=config.threshold, new_trials=tr)
            model_id = int(sm.models["id"].iat[rows[0]])
            flags = [{"kind": "anomaly", "item_id": int(sm.items["id"].iat[int(c.item_idx)]), "model_id": model_id,
                      "score": float(c.residual),
                      "payload": {"source": "static", "residual": float(c.residual), "expected_p": float(c.expected_p),
                                  "observed": float(c.observed), "theta": out.theta, "b": float(b[int(c.item_idx)]),
                                  "a": float(a[int(c.item_idx)]), "screen": True, "clean_run": clean}}
                     for c in out.candidates.itertuples(index=False)]
            metrics = {"model": config.model, "theta": out.theta, "clean_run": clean,
                       "clean_kind": clean_run["kind"], "observed_cells": int(m.sum()),
                       "unexpected_cells": len(flags)}
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=metrics, models=pd.DataFrame({"model_id": [model_id], "theta": [out.theta]}),
                flags=pd.DataFrame(flags) if flags else None))
            progress(1, 1, "done")
            return ctx.run_id
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------------ bootstrap

@dataclass(frozen=True)
class BootstrapConfig:
    """Question-level cluster bootstrap (paper 000 Appendix D): B = 100 replicates resampling items within each
    source, rewards re-standardised per replicate; per-model SE, 95 % interval and rank interval. ``compare``
    also bootstraps the arena BT baseline and the static-only 2PL on the same replicate draws and reports Table 4
    (median SE and median 95 % rank-interval width per method)."""

    mode: str = "auto"
    B: int = 100
    seed: int = 0
    compare: bool = False


def run_bootstrap(db_path, benchmark: str, config: BootstrapConfig = BootstrapConfig(), *, arena: str | None = None,
                  reward_model: str | None = None, progress: Progress = no_progress,
                  cancel: threading.Event | None = None, **_) -> int:
    from benchloupe.engine import bootstrap  # here: its Bradley-Terry baseline loads scipy.optimize (~0.15 s)

    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        inputs, mode, ctx = start_run(conn, db_path, "bootstrap", benchmark, config, config.seed, arena, reward_model)
        t = ctx.lap("load_s", t0)
        with ctx.guard(conn):
            inputs = run_chance(conn, ctx, inputs, config, cancel, progress)
            cfg = joint.JointConfig(mode=mode)
            st, ar = inputs.static if cfg.uses_static else None, inputs.arena if cfg.uses_arena else None
            full = joint.fit_joint(st, ar, cfg, cancel=cancel)
            t = ctx.lap("fit_s", t)
            res = bootstrap.cluster_bootstrap(st, ar, cfg, B=config.B, seed=config.seed, full=full,
                                              progress=progress, cancel=cancel)
            t = ctx.lap("replicates_s", t)
            models = pd.DataFrame({"model_id": inputs.models["id"], "theta": res.theta, "se": res.se,
                                   "lo": res.ci_low, "hi": res.ci_high, "rank_lo": res.rank_low,
                                   "rank_hi": res.rank_high})
            models["rank"] = rank_desc(res.theta)
            metrics = {"mode": mode, "B": res.B, "failed_replicates": res.failed,
                       "median_se": float(np.nanmedian(res.se)),
                       "median_rank_ci_width": float(np.nanmedian(res.rank_high - res.rank_low))}
            artifacts = {"replicates": {"thetas": res.thetas}}
            if config.compare:
                results = {"dualeval": res}
                for method, ok in (("arena_bt", cfg.uses_arena and inputs.arena is not None),
                                   ("static_2pl", cfg.uses_static and inputs.static is not None)):
                    if ok and not (method == "static_2pl" and mode == "static"):
                        results[method] = bootstrap.method_bootstrap(
                            inputs.static if cfg.uses_static else None, inputs.arena if cfg.uses_arena else None,
                            cfg, method=method, B=config.B, seed=config.seed, progress=progress, cancel=cancel)
                t4 = bootstrap.table4(results)
                artifacts["table4"] = pd.DataFrame(t4)
                metrics["table4"] = t4
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=report_chance(metrics, inputs),
                timings={**ctx.timings, "total_s": round(time.perf_counter() - t0, 4)}, models=models,
                artifacts=artifacts))
            return ctx.run_id
    finally:
        conn.close()


def _runner(fn, cls):
    return lambda db, bench, config=None, **kw: fn(db, bench, config or cls(), **kw)


register(Analysis("compress", "Fisher-information compression and subset recovery (paper 000 §4.2)", "calibration",
                  CompressConfig, "any", _runner(run_compress, CompressConfig)))
register(Analysis("anomalies", "Residual anomaly candidates (paper 000 §4.3)", "calibration", AnomalyConfig, "any",
                  _runner(run_anomalies, AnomalyConfig)))
register(Analysis("screen", "Screen a new model against a frozen clean fit (§4.3)", "calibration", ScreenConfig,
                  "static", _runner(run_screen, ScreenConfig)))
register(Analysis("bootstrap", "Question-level cluster bootstrap (Appendix D)", "calibration", BootstrapConfig, "any",
                  _runner(run_bootstrap, BootstrapConfig)))


# ------------------------------------------------------------------------------------------ contamination windows

@dataclass(frozen=True)
class ContaminationConfig:
    """Contamination windows (issue 14): per model, the residual shift on items dated on or before its cutoff vs
    after, with a bootstrap interval and a permutation p (Holm over models), also with item parameters fitted
    without that model. Item dates come from item metadata ``date_key``, model cutoffs from model metadata
    ``cutoff_key`` (import them with an item-metadata file and a models file); left empty, each is "date" /
    "cutoff" when present, else the one date-valued metadata key of its side (the run says which it used), and a
    key that cannot be found is refused with the keys the items and the models do have (issue 23)."""

    mode: str = "auto"
    date_key: str = ""  # "" = "date" when items have it, else their only date-valued metadata key
    cutoff_key: str = ""  # "" = "cutoff" when models have it, else their only date-valued metadata key
    alpha: float = 0.05
    n_boot: int = 1000
    n_perm: int = 2000
    seed: int = 0
    refit_without: bool = True
    min_cells: int = 5

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise EngineError(f"alpha must lie in (0, 1), got {self.alpha}")
        if self.n_boot < 100 or self.n_perm < 100:
            raise EngineError("n_boot and n_perm need at least 100 resamples each")
        if self.min_cells < 2:
            raise EngineError("min_cells must be at least 2 dated cells on each side of a cutoff")


def _metadata_values(frame: pd.DataFrame, key: str) -> list:
    out = []
    for raw in frame.get("metadata", pd.Series([None] * len(frame))):
        try:
            meta = json.loads(raw) if isinstance(raw, str) else (raw or {})
        except json.JSONDecodeError:
            meta = {}
        out.append(meta.get(key) if isinstance(meta, dict) else None)
    return out


DATE_TEXT = re.compile(r"\d{4}(-\d{1,2}(-\d{1,2})?([T ]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?)?"
                       r"|\d{4}/\d{1,2}/\d{1,2}|\d{1,2}/\d{1,2}/\d{4}")


def metadata_keys(frame: pd.DataFrame) -> dict[str, bool]:
    """Every metadata key of the rows of ``frame`` -> whether it is date-valued: every value that is not null is
    text that reads as a date (ISO ``2024-03-01``, ``2024-03``, a bare year ``2024``, ``2024/3/1``, ``3/1/2024``).
    Numbers are not dates here (a count or a score would pass for "days since 1970")."""
    seen: dict[str, bool] = {}
    texts: dict[str, set] = {}  # per key still date-valued: its distinct date-like texts, read once at the end
    for raw in frame.get("metadata", pd.Series([None] * len(frame))):
        try:
            meta = json.loads(raw) if isinstance(raw, str) else (raw or {})
        except json.JSONDecodeError:
            meta = {}
        if not isinstance(meta, dict):
            continue
        for k, v in meta.items():
            k = str(k)
            if v is None:
                seen.setdefault(k, True)
                continue
            if not seen.get(k, True):
                continue
            ok = isinstance(v, str) and DATE_TEXT.fullmatch(v.strip()) is not None
            seen[k] = ok
            if ok:
                texts.setdefault(k, set()).add(v.strip())
    # one to_days per key over its distinct texts (it reads each text alone: format="mixed"), not one per value
    # (14,000 items: 14,022 pandas calls, ~40 s of contamination's load; issue 26)
    for k, values in texts.items():
        if seen[k]:
            seen[k] = bool(np.isfinite(contamination.to_days(sorted(values))).all())
    return seen


def _keys_text(keys: dict[str, bool]) -> str:
    if not keys:
        return "none"
    shown = sorted(keys)[:12]
    return ", ".join(f"{k} (date)" if keys[k] else k for k in shown) + (f" and {len(keys) - 12} more"
                                                                      if len(keys) > 12 else "")


def _window_keys(benchmark: str, items: pd.DataFrame, models: pd.DataFrame, config) -> tuple[str, str, list[str]]:
    """(item date key, model cutoff key, notes): the keys given, else "date" / "cutoff", else the one date-valued
    key of each side; one EngineError naming the keys both sides have when either cannot be settled."""
    sides = (("item", "date", config.date_key, metadata_keys(items), "date_key",
              "an item-metadata file with a date column"),
             ("model", "cutoff", config.cutoff_key, metadata_keys(models), "cutoff_key",
              "a models file with a cutoff column"))
    chosen, notes, problems = [], [], []
    for side, default, given, keys, opt, fix in sides:
        dates = [k for k, is_date in keys.items() if is_date]
        if given:
            key = given if given in keys else None
            if key is None:
                problems.append(f"no {side} has metadata key {given!r}")
        elif default in keys:
            key = default
        elif len(dates) == 1:
            key = dates[0]
            notes.append(f"{side} {'dates' if side == 'item' else 'cutoffs'}: metadata key {key!r}, the only "
                         f"date-valued {side} key (no {default!r}; name another with --{opt.replace('_', '-')})")
        else:
            key = None
            problems.append(f"no {side} has a {default!r} key" + (
                f" and {len(dates)} {side} keys hold dates ({', '.join(map(repr, dates))}): name one" if dates
                else f" and no {side} key holds dates: import {fix}"))
        chosen.append(key)
    if problems:
        raise EngineError(say(
            f"contamination windows of {benchmark!r}: " + "; ".join(problems)
            + f". Item metadata keys: {_keys_text(sides[0][3])}. Model metadata keys: {_keys_text(sides[1][3])}. "
            "Choose with ", Opt("date_key", "KEY"), " and ", Opt("cutoff_key", "KEY")))
    return chosen[0], chosen[1], notes


def _model_metadata(conn, model_ids) -> pd.DataFrame:
    ids = [int(i) for i in model_ids]
    rows = conn.execute(f"SELECT id, metadata FROM models WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall()
    meta = dict(rows)
    return pd.DataFrame({"id": ids, "metadata": [meta.get(i, "{}") for i in ids]})


def run_contamination(db_path, benchmark: str, config: ContaminationConfig = ContaminationConfig(), *,
                      arena: str | None = None, reward_model: str | None = None, progress: Progress = no_progress,
                      cancel: threading.Event | None = None, **_) -> int:
    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        inputs, mode, ctx = start_run(conn, db_path, "contamination", benchmark, config, config.seed, arena, reward_model)
        with ctx.guard(conn):
            # one monotone percentage over the stages (issue 32: 97.6 % -> 2.4 % when the window tests began)
            stages = Stages(progress, {"chance": 0.05, "fit": 0.1, "refits": 0.4, "windows": 0.45})
            inputs = run_chance(conn, ctx, inputs, config, cancel, stages.part("chance"))
            if inputs.static is None or mode == "arena":
                raise EngineError(f"contamination windows compare static residuals; {benchmark!r} has no static "
                                  "results in this mode")
            model_meta = _model_metadata(conn, inputs.models["id"])
            date_key, cutoff_key, key_notes = _window_keys(benchmark, inputs.static_items, model_meta, config)
            days = contamination.to_days(_metadata_values(inputs.static_items, date_key))
            cut = contamination.to_days(_metadata_values(model_meta, cutoff_key))
            t = ctx.lap("load_s", t0)
            cfg, res = _fit(inputs, mode, stages.part("fit"), cancel)
            t = ctx.lap("fit_s", t)
            static = inputs.static
            arena_d = inputs.arena if cfg.uses_arena else None
            # only the models with a cutoff are tested: their rows alone (no models x items float64 matrices)
            with_cut = np.flatnonzero(np.isfinite(cut))
            pos = {int(m): k for k, m in enumerate(with_cut)}
            sub = static_rows(static, with_cut)
            rate = anomaly.observed_rate(sub)
            weight = np.asarray(sub.trials if sub.trials is not None else sub.mask, float)
            p_cut = replace(res, theta=res.theta[with_cut]).p_static()
            resid = contamination.residual_matrix(p_cut, rate, sub.mask)
            tested = [m for m in with_cut
                      if min((days[static.mask[m] & np.isfinite(days)] <= cut[m]).sum(),
                             (days[static.mask[m] & np.isfinite(days)] > cut[m]).sum()) >= config.min_cells]
            resid_loo = None
            t = ctx.lap("residuals_s", t)
            if config.refit_without and tested:
                p_loo = contamination.leave_one_out_p(static, arena_d, cfg, tested, progress=stages.part("refits"), cancel=cancel,
                                                      full=res, out_rows=with_cut)
                resid_loo = contamination.residual_matrix(p_loo, rate, sub.mask)
                t = ctx.lap("leave_one_out_s", t)
                loo_refits = len(tested)
            else:
                loo_refits = 0
            n_perm = max(config.n_perm, int(np.ceil(20 * max(len(tested), 1) / config.alpha)))
            table = contamination.contamination_windows(
                resid, weight, days, cut[with_cut], resid_loo=resid_loo, alpha=config.alpha, n_boot=config.n_boot,
                n_perm=n_perm, seed=config.seed, min_cells=config.min_cells, progress=stages.part("windows"), cancel=cancel,
                rows=with_cut)
            ids = inputs.models["id"].to_numpy()
            item_ids = inputs.static_items["id"].to_numpy()
            table.insert(0, "model_id", ids[table["model_idx"].to_numpy(int)] if len(table) else [])
            table["model"] = inputs.models["name"].to_numpy()[table["model_idx"].to_numpy(int)] if len(table) else []
            table["cutoff_day"] = cut[table["model_idx"].to_numpy(int)] if len(table) else []
            cells = []
            flags = []
            for row in table.itertuples(index=False):
                m = int(row.model_idx)
                k = pos[m]
                ok = static.mask[m] & np.isfinite(days) & np.isfinite(resid[k])
                cells.append(pd.DataFrame({"model_id": int(ids[m]), "item_id": item_ids[ok], "item_day": days[ok],
                                           "residual": resid[k, ok],
                                           "residual_loo": resid_loo[k, ok] if resid_loo is not None else np.nan,
                                           "pre_cutoff": days[ok] <= cut[m]}))
                if not row.flagged:
                    continue
                payload = {"source": "contamination_window", "residual": float(row.shift),
                           "expected_p": float(np.nanmean(p_cut[k, ok & (days <= cut[m])])),
                           "observed": float(np.mean(rate[k, ok & (days <= cut[m])])),
                           "shift": float(row.shift), "ci": [float(row.ci_low), float(row.ci_high)],
                           "p_perm": float(row.p_perm), "p_holm": float(row.p_holm), "n_pre": int(row.n_pre),
                           "n_post": int(row.n_post), "cutoff_day": float(cut[m]), "mode": mode,
                           "plot_artifact": "window_residuals",
                           "series": contamination.binned_series(days[ok], resid[k, ok])}
                if "shift_loo" in table.columns and np.isfinite(getattr(row, "shift_loo", np.nan)):
                    payload.update({"shift_loo": float(row.shift_loo), "p_perm_loo": float(row.p_perm_loo),
                                    "ci_loo": [float(row.ci_low_loo), float(row.ci_high_loo)]})
                flags.append({"kind": "anomaly", "model_id": int(ids[m]), "score": float(row.shift),
                              "payload": payload})
            t = ctx.lap("windows_s", t)
            metrics = {"mode": mode, "date_key": date_key, "cutoff_key": cutoff_key, "notes": key_notes,
                       "dated_items": int(np.isfinite(days).sum()), "leave_one_out_refits": loo_refits,
                       "refits": {"fits": 1 + loo_refits, "full_fit": 1, "leave_one_model_out": loo_refits,
                                  "start": ("warm from the full fit, the model's row dropped" if arena_d is None
                                            and cfg.mode == "static" else "cold, the model's cells and pairs "
                                            "masked (joint: nonconvex)") if loo_refits else None},
                       "models_with_cutoff": int(np.isfinite(cut).sum()), "models_tested": int(len(table)),
                       "models_flagged": int(table["flagged"].sum()) if len(table) else 0, "n_perm": n_perm,
                       "alpha": config.alpha}
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=report_chance(metrics, inputs),
                timings={**ctx.timings, "total_s": round(time.perf_counter() - t0, 4)},
                models=pd.DataFrame({"model_id": ids, "theta": res.theta}),
                artifacts={"windows": table.drop(columns=["model_idx"]),
                           "window_residuals": pd.concat(cells, ignore_index=True) if cells else pd.DataFrame()},
                flags=pd.DataFrame(flags) if flags else None))
            return ctx.run_id
    finally:
        conn.close()


register(Analysis("contamination", "Contamination windows: residual shift before vs after each model's cutoff",
                  "calibration", ContaminationConfig, "static", _runner(run_contamination, ContaminationConfig)))
