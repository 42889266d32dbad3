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
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy import stats as sstats

from benchloupe.engine import coverage, dense
from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.coverage import robustness as rb
from benchloupe.engine.irt import OnePLConfig
from benchloupe.hints import Alt, Opt, say
from benchloupe.store import read, runs
from benchloupe.store.db import connect
from benchloupe.store.writer import derive_benchmark
from benchloupe.words import count

from .base import Analysis, RunContext, fingerprint, register


@dataclass(frozen=True)
class CoverageConfig:
    """Coverage of paper 003 (§3.1, C.3, C.4, C.6): 1PL MAP with N(0,1) priors, guessing from item chance levels,
    top-5 gap sum, uniform target, Laplace posterior uncertainty with 1,000 draws, a C.6 interval for each of
    the ``interval_gaps`` widest gaps, the lattice / tail readout and the Theorem B.2 bound at ``delta``
    (Lipschitz constant ``lipschitz``, rollouts per item from the data).

    ``target``: "uniform", "beta:A,B", or "benchmark:NAME" (the normalised difficulties of another benchmark's
    latest coverage run). ``group`` restricts the run to one item group (per-topic coverage).
    ``robustness``: comma list of ``loo`` (C.3 leave-one-out; ``folds`` > 0 = that many model folds),
    ``bic`` (C.5 1PL vs 2PL vs MIRT-2/3), ``priors`` (hierarchical-prior sensitivity), or ``all``.
    ``prior``: "normal" (the paper's N(0, 1) priors), or a C.3 hierarchical variant fitted at its joint mode:
    "hierarchical_theta" (theta ~ N(mu, sigma^2), mu ~ N(0, 1), sigma ~ HalfNormal(1)) or "hierarchical_b".
    ``improvement``: "PRE_MODEL,POST_MODEL": the E.2 one-sided stratified randomisation test (``permutations``
    reassignments) of the post model's gain, on the original items and on all items (original + BenchFill).
    """

    method: str = "map"
    guessing: bool = True
    k: int = 5
    target: str = "uniform"
    uncertainty: str = "laplace"
    n_draws: int = 1000
    seed: int = 0
    group: str = ""
    interval_gaps: int = 20
    delta: float = 0.05
    lipschitz: float = 1.0
    robustness: str = ""
    folds: int = 0
    improvement: str = ""
    permutations: int = 100_000
    prior: str = "normal"


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
            raise EngineError(say(f"target {spec!r}: run ", Alt(f"`benchloupe coverage {other}`", f"coverage on {other}"),
                                  " first"))
        z = runs.run_items(conn, rid)["z"].dropna().to_numpy()
        return coverage.TargetDistribution.from_samples(z, f"benchmark {other}")
    raise EngineError(f"unknown target {spec!r}; use uniform, beta:A,B or benchmark:NAME")


def _inputs(sm, benchmark: str, config: CoverageConfig):
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
    prior_b = np.full(len(its), None, dtype=object)  # only items without results can carry an online b
    for j in np.flatnonzero(extra):
        meta = its["metadata"].iloc[j]
        prior_b[j] = json.loads(meta).get("difficulty_raw") if isinstance(meta, str) else None
    added = extra & np.array([v is not None for v in prior_b], dtype=bool)
    if fitted.sum() < 2:
        raise EngineError(f"benchmark {benchmark!r} has {count(int(fitted.sum()), 'item')} with results; coverage "
                          "needs 2+")
    chance = None
    if config.guessing and "chance" in its:
        ch = its["chance"].to_numpy(float)[fitted]
        chance = np.nan_to_num(ch, nan=0.0) if np.isfinite(ch).any() else None
    return sm, fitted, added, prior_b, chance



def _added_se(conn, items: pd.DataFrame) -> np.ndarray:
    """The standard error of each accepted BenchFill item's online-calibrated difficulty (its proposal's
    ``se``), NaN where the proposal is gone or never had one."""
    cands = []
    for meta in items["metadata"]:
        got = json.loads(meta).get("candidate") if isinstance(meta, str) else None
        cands.append(int(got) if isinstance(got, int | float) and not isinstance(got, bool) else None)
    known = [c for c in cands if c is not None]
    se: dict[int, object] = {}
    if known:
        se = dict(conn.execute(f"SELECT id, json_extract(payload, '$.se') FROM fill_candidates WHERE id IN "
                               f"({','.join('?' * len(known))})", known).fetchall())
    out = [se.get(c) if c is not None else None for c in cands]
    return np.array([float(v) if isinstance(v, int | float) else np.nan for v in out], float)


def validate_config(config: CoverageConfig) -> None:
    """Bad options get one line before anything is computed or stored."""
    checks = [(config.k >= 1, say(Opt("k"), f" must be at least 1; got {config.k}")),
              (config.interval_gaps >= 1, say(Opt("interval_gaps"), f" must be at least 1; got {config.interval_gaps}")),
              (0 < config.delta < 1, say(Opt("delta"), f" is a probability in (0, 1) (Theorem B.2); got {config.delta}")),
              (np.isfinite(config.lipschitz) and config.lipschitz >= 0,
               say(Opt("lipschitz"), f" must be a finite number >= 0; got {config.lipschitz}")),
              (config.folds == 0 or config.folds >= 2, say(Opt("folds"), f" must be 0 (one model at a time) or >= 2; got "
                                                           f"{config.folds}")),
              (config.permutations >= 1, say(Opt("permutations"), f" must be at least 1; got {config.permutations}")),
              (config.n_draws >= 2 or config.uncertainty == "none", say(Opt("n_draws"), f" must be at least 2; got "
                                                                         f"{config.n_draws}")),
              (config.prior in ("normal", "hierarchical_theta", "hierarchical_b"),
               say(Opt("prior"), f" must be normal, hierarchical_theta or hierarchical_b; got {config.prior!r}")),
              (config.uncertainty in ("laplace", "bootstrap", "none"),
               say(Opt("uncertainty"), f" must be laplace, bootstrap or none; got {config.uncertainty!r}"))]
    for ok, msg in checks:
        if not ok:
            raise EngineError(msg)


def _arena_difficulties(conn, benchmark: str):
    """Arena prompts have no 0/1 difficulty in paper 003; the DualEval joint fit (paper 000) gives each prompt a
    difficulty on the same ability scale. Returns (run id, items frame) of the latest joint run that used this
    benchmark as its arena set, or None."""
    fits = runs.list_runs(conn, benchmark, kind="joint")
    for rid, status in zip(fits["id"], fits["status"], strict=True):
        if status != "done":
            continue
        ri = runs.run_items(conn, int(rid))
        if "source" in ri and (ri["source"] == "arena").any():
            return int(rid), ri[ri["source"] == "arena"].reset_index(drop=True), runs.run_models(conn, int(rid))
    return None


def _refuse_arena(conn, benchmark: str):
    arena = read.items(conn, benchmark, kind="arena", status="active", with_text=False)
    if len(arena):
        raise EngineError(say(
            f"benchmark {benchmark!r} has arena prompts only ({len(arena)}); paper 003 coverage needs 0/1 results. ",
            Alt(f"Run `benchloupe fit joint STATIC --arena {benchmark}` first",
                f"Run the joint analysis (screen 4) on a static benchmark with its arena benchmark field set to {benchmark} "
                "first"),
            ": coverage then uses the joint fit's arena difficulties"))


STORED_GAPS = 1000


def _stored_gaps(gaps: pd.DataFrame) -> pd.DataFrame:
    """The widest ``STORED_GAPS`` gaps of positive width (a lattice benchmark has thousands of empty ones: items
    tied on one level), in rank order: what `benchloupe fill --gap N` and the Coverage screen read."""
    return gaps[gaps["width"] > 0].head(STORED_GAPS).reset_index(drop=True)


def _flags(gaps: pd.DataFrame, k: int) -> pd.DataFrame:
    top = gaps.head(k)
    payload = []
    for r, row in enumerate(top.to_dict("records")):
        d = {key: (bool(v) if isinstance(v, (bool, np.bool_)) else float(v) if isinstance(v, (int, float, np.number))
                   else v) for key, v in row.items() if not (isinstance(v, float) and np.isnan(v))}
        payload.append({**d, "rank": r + 1})
    return pd.DataFrame({"kind": "gap", "score": top["width"].to_numpy(), "payload": payload})


def _readout_metrics(res) -> dict:
    lat = res.lattice
    out = {"ability_range": [res.ability_lo, res.ability_hi], "max_gap_trusted": res.max_gap_trusted,
           "max_gap_ci": list(res.max_gap_ci), "undetectable_width": res.undetectable_width,
           "b2_bound": res.b2_bound, "delta": res.delta, "lipschitz": res.lipschitz, "rollouts": res.rollouts,
           "n_tail_gaps_topk": res.n_tail_gaps_topk, "warnings": list(res.warnings)}
    if lat is not None:
        out.update({"lattice": lat.present, "n_levels": lat.n_levels, "sum_score_levels": lat.sum_score_levels,
                    "tied_fraction": lat.tied_fraction, "ddm_floor": lat.ddm_floor,
                    "max_gap_floor": lat.max_gap_floor})
    return out


def _run_arena_coverage(conn, db_path, benchmark, config, target, found, progress) -> int:
    """Coverage of an arena benchmark from the DualEval arena difficulties (no C.3 or C.6: no 0/1 data)."""
    joint_id, ri, rm = found
    # the joint fit holds the static benchmark's models too (130 beside the arena's 40, issue 32 point 8): the
    # ability range and the model count are those of this benchmark's models
    mine = set(read.models(conn, benchmark)["id"].astype(int))
    rm = rm[rm["model_id"].astype(int).isin(mine)].reset_index(drop=True)
    ctx = RunContext(db_path, "coverage", benchmark, config, config.seed)
    b = ri["difficulty"].to_numpy(float)
    ctx.start(conn, fingerprint(b))
    with ctx.guard(conn):
        progress(0, 1, f"coverage of the arena difficulties of joint run #{joint_id}")
        report = coverage.coverage_report(b, target=target, k=config.k, seed=config.seed)
        res = coverage.readout(report, rm["theta"].to_numpy(float), k=config.k, delta=config.delta,
                               lipschitz=config.lipschitz)
        source = f"joint run #{joint_id} arena difficulties (DualEval pairwise IRT, paper 000)"
        warnings = [f"difficulties from {source}: not the paper-003 1PL; no C.3 diagnostics or C.6 intervals",
                    *res.warnings]
        metrics = {"n_items": int(b.size), "n_models": int(len(rm)), "difficulty_source": source,
                   "target": report.target, "ddm": report.ddm, "ddm_uniform": report.ddm_uniform,
                   "max_gap": report.max_gap, "k": report.k, "topk_sum": report.topk_sum,
                   "uniform_baseline_max_gap": report.uniform_baseline_max_gap, "baseline": report.baseline,
                   "max_gap_ratio": report.max_gap_ratio, "uniform_exceed_prob": report.uniform_exceed_prob,
                   "b_min": report.b_min, "b_max": report.b_max, **_readout_metrics(res), "warnings": warnings,
                   "diagnostics_passed": False}
        metrics.pop("max_gap_ci", None)  # no C.6 draws here: no interval (it printed "[nan, nan]")
        items = pd.DataFrame({"item_id": ri["item_id"].to_numpy(), "difficulty": b, "z": report.normalised})
        gaps = _stored_gaps(res.gaps)
        runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
            metrics=metrics, items=items, artifacts={"gaps": gaps, "ecdf": report.ecdf},
            flags=_flags(gaps, config.k)))
        progress(1, 1, "coverage done")
        return ctx.run_id


def run_coverage(db_path, benchmark: str, config: CoverageConfig = CoverageConfig(), *,
                 progress: Progress = no_progress, cancel: threading.Event | None = None, device: str = "auto",
                 **_) -> int:
    """1PL fit + coverage report + diagnostics + trust readout (+ uncertainty, + robustness); gap flags for the
    top-k gaps.  ``device`` (auto | cpu | cuda, as on the fits) runs the C.6 uncertainty draws' metrics on numpy
    or torch (:mod:`benchloupe.engine.dense`); the run's metrics record it under ``compute``."""
    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        target = parse_target(conn, config.target)
        validate_config(config)
        dense.resolve(device)  # `--device cuda` without a GPU is refused on every path, before anything runs
        robust = _robustness_set(config.robustness)
        sm = read.load_static(conn, benchmark)
        if not len(sm.items):
            found = _arena_difficulties(conn, benchmark)
            if found is None:
                _refuse_arena(conn, benchmark)
            else:
                return _run_arena_coverage(conn, db_path, benchmark, config, target, found, progress)
        sm, fitted, added, prior_b, chance = _inputs(sm, benchmark, config)
        y = sm.correct[:, fitted]
        mask = sm.mask[:, fitted]
        succ = None if sm.trials is None else sm.successes[:, fitted]
        tri = None if sm.trials is None else sm.trials[:, fitted]
        n_draws = 0 if config.uncertainty == "none" else config.n_draws
        backend = dense.resolve(device, int(fitted.sum()) * n_draws)  # before the run exists
        ctx = RunContext(db_path, "coverage", benchmark, config, config.seed)
        ctx.start(conn, fingerprint(y, mask, succ, tri))
        ctx.lap("load_s", t0)
        with ctx.guard(conn), dense.use(backend):
            t = time.perf_counter()
            progress(0, 3, "1PL difficulty fit")
            data = dict(successes=succ, trials=tri) if succ is not None else {}
            yy, mm = (None, None) if succ is not None else (y, mask)
            fit_cfg = OnePLConfig(method=config.method)
            prior_info = None
            if config.prior != "normal":
                if config.method != "map":
                    raise EngineError(say(Opt("prior"), " applies to the MAP fit (", Opt("method", "map"), ")"))
                fit_cfg, _, rounds, conv = rb.hierarchical_config(yy, mm, **data, chance=chance,
                                                                  variant=config.prior, cancel=cancel)
                prior_info = {"prior": config.prior, "rounds": rounds, "converged": conv,
                              "mu": fit_cfg.prior_mean_theta if config.prior == "hierarchical_theta"
                              else fit_cfg.prior_mean_b,
                              "sigma": fit_cfg.prior_sd_theta if config.prior == "hierarchical_theta"
                              else fit_cfg.prior_sd_b}
            unc_cfg = None
            if config.uncertainty != "none" and config.method == "map" and not added.any():
                unc_cfg = coverage.UncertaintyConfig(method=config.uncertainty, n_draws=config.n_draws,
                                                     seed=config.seed, k=config.k)
            res = coverage.analyse(yy, mm, **data, chance=chance, target=target, k=config.k, seed=config.seed,
                                   fit_config=fit_cfg, uncertainty=unc_cfg, interval_gaps=config.interval_gaps,
                                   delta=config.delta, lipschitz=config.lipschitz, progress=progress, cancel=cancel,
                                   timings=ctx.timings)
            t = ctx.lap("fit_metrics_uncertainty_s", t)
            check_cancel(cancel)
            b_all = res.fit.b
            item_ids = sm.items["id"].to_numpy()[fitted]
            readout = res.resolution
            report = res.report
            unc = res.uncertainty
            if added.any():  # accepted BenchFill items join with their online-calibrated difficulty
                added_b = prior_b[added].astype(float)
                b_all = np.concatenate([b_all, added_b])
                item_ids = np.concatenate([item_ids, sm.items["id"].to_numpy()[added]])
                report = coverage.coverage_report(b_all, target=target, k=config.k, seed=config.seed)
                lat = readout.lattice
                if lat is not None:  # the added items' lattice steps are unknown (NaN): never "below resolution"
                    pad = np.full(int(added.sum()), np.nan)
                    lat = replace(lat, step_down=np.concatenate([lat.step_down, pad]),
                                  step_up=np.concatenate([lat.step_up, pad]))
                m = min(config.interval_gaps, len(report.gaps))
                if config.uncertainty != "none" and config.method == "map":
                    # C.6 over the benchmark as it now stands: the added items in every draw (issue 21 item 7)
                    unc = coverage.metric_uncertainty(
                        res.fit, target=target, correct=yy, mask=mm, successes=succ, trials=tri,
                        config=coverage.UncertaintyConfig(method=config.uncertainty, n_draws=config.n_draws,
                                                          seed=config.seed, k=config.k),
                        locations=coverage.gap_locations(report, m), added_b=added_b,
                        added_se=_added_se(conn, sm.items[added]), progress=progress, cancel=cancel)
                readout = coverage.readout(report, res.fit.theta, lattice_info=lat, k=config.k, delta=config.delta,
                                           lipschitz=config.lipschitz, rollouts=readout.rollouts, interval_gaps=m,
                                           location_widths=None if unc is None else unc.location_widths,
                                           max_gap_ci=None if unc is None else unc.max_gap_ci)
            d = res.diagnostics
            widest = readout.gaps.iloc[0]  # the headline max gap must be a resolvable gap inside the ability range
            resolution_ok = not bool(widest["below_resolution"])
            tails_ok = not bool(widest["tail"])
            checks = {**d.checks, "difficulty_resolution": resolution_ok, "max_gap_inside_ability_range": tails_ok}
            metrics = {"n_items": int(len(b_all)), "n_models": int(y.shape[0]), "n_benchfill_items": int(added.sum()),
                       "difficulty_source": f"1PL {config.method.upper()} fit of this benchmark (paper 003 C.3)",
                       "target": report.target, "ddm": report.ddm, "ddm_uniform": report.ddm_uniform,
                       "max_gap": report.max_gap, "k": report.k, "topk_sum": report.topk_sum,
                       "uniform_baseline_max_gap": report.uniform_baseline_max_gap, "baseline": report.baseline,
                       "max_gap_ratio": report.max_gap_ratio, "uniform_exceed_prob": report.uniform_exceed_prob,
                       "b_min": report.b_min, "b_max": report.b_max,
                       "fit_objective": res.fit.objective, "fit_iterations": res.fit.iterations,
                       "fit_converged": res.fit.converged,
                       "model_information": d.model_information, "item_information": d.item_information,
                       "model_inversion_rate": d.model_inversion_rate, "item_inversion_rate": d.item_inversion_rate,
                       "c3_passed": d.passed, "diagnostic_checks": checks, "diagnostics_passed": all(checks.values()),
                       "prior": prior_info or {"prior": "normal", "mu": 0.0, "sigma": 1.0},
                       **_readout_metrics(readout)}
            metrics["compute"] = dense.provenance(backend)
            if unc is not None:
                metrics.update({"uncertainty": unc.method, "ddm_sd": unc.ddm_sd, "max_gap_sd": unc.max_gap_sd,
                                "max_gap_mean": unc.max_gap_mean, "topk_sum_sd": unc.topk_sum_sd,
                                "prob_max_gap_exceeds_uniform": unc.prob_max_gap_exceeds_uniform,
                                "max_gap_ci": list(unc.max_gap_ci)})
            se = np.concatenate([res.fit.b_se, np.full(int(added.sum()), np.nan)])
            items = pd.DataFrame({"item_id": item_ids, "difficulty": b_all, "z": report.normalised, "b_se": se})
            models = pd.DataFrame({"model_id": sm.models["id"].to_numpy(), "theta": res.fit.theta})
            gaps = _stored_gaps(readout.gaps)
            metrics["n_gaps_stored"] = len(gaps)
            artifacts = {"gaps": gaps, "ecdf": report.ecdf}
            if readout.lattice is not None and readout.lattice.present:
                artifacts["lattice_levels"] = pd.DataFrame({"z": readout.lattice.levels_z})
            if unc is not None:
                artifacts["uncertainty_draws"] = unc.draws.describe().reset_index()
            if config.improvement:
                metrics["improvement_test"] = _improvement(sm, config)
            if robust:
                progress(2, 3, "robustness analyses")
                rob = _robustness(robust, config, yy, mm, succ, tri, chance, res, cancel, progress)
                metrics["robustness"] = rob["summary"]
                artifacts.update(rob["artifacts"])
                t = ctx.lap("robustness_s", t)
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=metrics, timings={**ctx.timings, "total_s": round(time.perf_counter() - t0, 4)},
                models=models, items=items, artifacts=artifacts, flags=_flags(gaps, config.k)))
            progress(3, 3, "coverage done")
            return ctx.run_id
    finally:
        conn.close()


def _improvement(sm, config) -> dict:
    """E.2 on the benchmark's own results of two models (pre and post training)."""
    names = [x.strip() for x in config.improvement.split(",")]
    if len(names) != 2 or not all(names):
        raise EngineError(say(Opt("improvement"), f" {config.improvement!r}: write PRE_MODEL,POST_MODEL (two model names)"))
    known = list(sm.models["name"])
    rows = []
    for nm in names:
        if nm not in known:
            raise EngineError(say(Opt("improvement"), f": model {nm!r} has no results on {sm.benchmark!r}"))
        rows.append(known.index(nm))
    if sm.trials is not None:
        s, t = sm.successes.astype(np.int64), sm.trials.astype(np.int64)
    else:
        s, t = np.where(sm.mask, sm.correct, 0).astype(np.int64), sm.mask.astype(np.int64)
    origin = sm.items["origin"].to_numpy() if "origin" in sm.items else np.full(sm.shape[1], "original")
    out = {"pre": names[0], "post": names[1]}
    for label, cols in (("original", origin == "original"), ("all_items", np.ones(sm.shape[1], bool))):
        both = cols & (t[rows[0]] > 0) & (t[rows[1]] > 0)
        if not both.any():
            out[label] = None
            continue
        out[label] = rb.improvement_test(s[rows[0], both], t[rows[0], both], s[rows[1], both], t[rows[1], both],
                                         n_permutations=config.permutations, seed=config.seed)
    return out


_ROBUSTNESS = ("loo", "bic", "priors")


def _robustness_set(spec: str) -> tuple[str, ...]:
    parts = [p.strip() for p in (spec or "").split(",") if p.strip()]
    if "all" in parts:
        return _ROBUSTNESS
    bad = [p for p in parts if p not in _ROBUSTNESS]
    if bad:
        raise EngineError(f"unknown robustness analysis {bad[0]!r}; use a comma list of loo, bic, priors or all")
    return tuple(dict.fromkeys(parts))


def _robustness(which, config, y, mask, succ, tri, chance, res, cancel, progress) -> dict:
    summary: dict = {}
    artifacts: dict = {}
    data = dict(correct=y, mask=mask, successes=succ, trials=tri, chance=chance)
    if "loo" in which:
        loo = rb.leave_one_out(res.fit, **data, folds=config.folds or None, k=config.k, cancel=cancel,
                               progress=progress)
        summary["loo"] = loo.summary
        artifacts["loo"] = loo.table
    if "bic" in which:
        cmp_ = rb.compare_models(**data, cancel=cancel, progress=progress)
        summary["bic"] = cmp_.summary
        artifacts["bic"] = cmp_.table
    if "priors" in which:
        pri = rb.prior_sensitivity(res.fit, **data, k=config.k, cancel=cancel, progress=progress)
        summary["priors"] = pri.summary
        artifacts["priors"] = pri.table
    return {"summary": summary, "artifacts": artifacts}


def _reference_scores(conn, benchmark: str, item_ids: np.ndarray, spec: str):
    """D.1 inputs: the source's models x items mean scores (on the coverage run's items) and the reference score
    of each shared model, the mean over the other benchmarks of its mean score there."""
    others = [x.strip() for x in spec.split(",") if x.strip()]
    if not others or benchmark in others:
        raise EngineError(say(Opt("reference"), " needs other benchmarks than the source, e.g. ", Opt("reference", "bench-a,bench-b")))
    src = read.load_static(conn, benchmark)
    col = {int(i): j for j, i in enumerate(src.items["id"])}
    cols = np.array([col[int(i)] for i in item_ids if int(i) in col])
    if cols.size != len(item_ids):
        raise EngineError(f"the latest coverage run of {benchmark!r} has items no longer active; rerun coverage")

    def cell_scores(sm):
        if sm.trials is not None:
            return np.where(sm.trials > 0, sm.successes / np.maximum(sm.trials, 1), np.nan)
        return np.where(sm.mask, sm.correct, np.nan).astype(float)

    names = list(src.models["name"])
    per_bench = []
    for other in others:
        sm = read.load_static(conn, other)
        sc = np.nanmean(cell_scores(sm), axis=1) if sm.shape[1] else np.full(len(sm.models), np.nan)
        per_bench.append(dict(zip(sm.models["name"], sc, strict=True)))
    shared = [n for n in names if all(n in d and np.isfinite(d[n]) for d in per_bench)]
    if len(shared) < 3:
        raise EngineError(f"the D.1 experiment needs at least three models shared by {benchmark!r} and "
                          f"{', '.join(others)}; found {len(shared)}")
    rows = [names.index(n) for n in shared]
    scores = cell_scores(src)[np.ix_(rows, cols)]
    ref = np.array([np.mean([d[n] for d in per_bench]) for n in shared])
    return scores, ref, len(shared)


@dataclass(frozen=True)
class CalibrateConfig:
    """Quantile-matching calibration (paper 003 Appendix D, Algorithm 1) toward ``target`` keeping ``k`` items
    (0 = half the benchmark, the paper leaves k open). ``reference``: comma list of other benchmarks sharing
    models: runs the D.1 experiment (rank agreement of Full, ``random_prunings`` random subsets and Algorithm 1
    with the reference ranking, their mean score) and adds the agreement to the k sweep."""

    k: int = 0
    target: str = "uniform"
    reference: str = ""
    random_prunings: int = 30


def latest_coverage(conn, benchmark: str) -> tuple[int, int]:
    """(the benchmark's id, its latest finished coverage run), which calibrate and BenchFill work from; without one,
    the one line saying how to make it."""
    bid = read.benchmark_id(conn, benchmark)
    cov = runs.latest_run(conn, bid, ("coverage",))
    if cov is None:
        raise EngineError(say(f"no coverage run for {benchmark!r}; run ",
                              Alt(f"`benchloupe coverage {benchmark}`", "coverage (r on the Coverage screen)"), " first"))
    return bid, cov


def run_calibrate(db_path, benchmark: str, config: CalibrateConfig = CalibrateConfig(), *, name: str | None = None,
                  progress: Progress = no_progress, cancel: threading.Event | None = None, **_) -> int:
    """Algorithm 1 on the latest coverage run's difficulties; with *name*, exports the subset as a benchmark."""
    conn = connect(db_path)
    try:
        bid, cov = latest_coverage(conn, benchmark)
        ri = runs.run_items(conn, cov)
        target = parse_target(conn, config.target)
        ctx = RunContext(db_path, "calibrate", benchmark, {**config.__dict__, "coverage_run": cov, "export": name},
                         None)
        ctx.start(conn, fingerprint(ri["z"].to_numpy()))
        with ctx.guard(conn):
            progress(0, 1, "Algorithm 1: quantile matching")
            z = ri["z"].to_numpy()
            plan = coverage.quantile_match(z, target, k=config.k or None)
            kept_ids = ri["item_id"].to_numpy()[plan.keep]
            metrics = {"k": plan.k, "target": plan.target, "w1_before": plan.w1_before, "w1_after": plan.w1_after,
                       "ddm_after_renormalised": getattr(plan, "ddm_after_renormalised", None), "coverage_run": cov}
            artifacts = {}
            if config.reference:
                scores, ref, shared = _reference_scores(conn, benchmark, ri["item_id"].to_numpy(), config.reference)
                exp = rb.calibration_experiment(scores, z, ref, k=plan.k, target=target,
                                                n_random=config.random_prunings)
                artifacts["experiment"] = exp
                metrics["experiment"] = {r.variant: {"spearman": r.spearman, "kendall": r.kendall, "w1": r.w1}
                                         for r in exp.itertuples()}
                metrics["experiment_models"] = shared
                sweep = rb.calibration_curve(z, target, item_scores=scores, reference=ref,
                                             n_random=config.random_prunings)
            else:
                sweep = rb.calibration_curve(z, target)
            if name:
                new_bid = derive_benchmark(conn, benchmark, name, [int(i) for i in kept_ids],
                                           reason="Algorithm 1 calibration", detail={"run_coverage": cov, "k": plan.k})
                metrics["exported_benchmark"] = name
                metrics["exported_benchmark_id"] = new_bid
            items = pd.DataFrame({"item_id": kept_ids, "keep_order": np.arange(1, len(kept_ids) + 1)})
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(metrics=metrics, items=items,
                                                                artifacts={"sweep": sweep, **artifacts}))
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
