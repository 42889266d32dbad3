"""Calibration runs (DualEval, paper 000 §3-4): joint, static-only, arena-only fits and the two arena
baselines, saved as runs with provenance, per-model abilities and ranks, per-item difficulty and sharpness,
the pair flags, and the metrics of §4.1 / Appendix E (plus recovery of stored truth on simulated data)."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from benchloupe.engine import informativeness, joint
from benchloupe.engine.common import EngineError, Progress, Stages, check_cancel, no_progress
from benchloupe.engine.joint import VARIANTS, JointConfig  # noqa: F401 - the faces take them from here (issue 27)
from benchloupe.engine.stats import spearman
from benchloupe.hints import Alt, Hinted, Opt, say
from benchloupe.store import read, runs
from benchloupe.store.db import connect

from .base import Analysis, RunContext, fingerprint, register
from .data import JointInputs, load_joint, rank_desc, resolve_chance, truth_vector


@dataclass(frozen=True)
class BaselineConfig:
    """Arena baselines (paper 000 §4.1): Bradley-Terry on reward-derived soft pairs, or average reward.
    Pair flags use the same percentiles as the joint fit (Appendix B)."""

    tie_pct: float = 15.0
    bb_pct: float = 15.0
    lambda_reg: float = 0.01
    variant: str = "paper"


MIN_EXTERNAL_MATCHES = 10  # below this a Spearman with an external ranking says little (and is often blank)


@dataclass
class ExternalRanking:
    """An external score per workspace model (NaN where unknown) and how the names matched."""

    scores: np.ndarray
    matched: int
    total: int
    unmatched: list[str]
    source: str
    warnings: list[str]
    normalised: int = 0

    def metrics(self) -> dict:
        return {"external_source": self.source, "external_matched": self.matched, "external_models": self.total,
                "external_matched_normalised": self.normalised}


def _name_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def _csv(path: str, what: str | Hinted) -> pd.DataFrame:
    if not Path(path).is_file():
        raise EngineError(say(f"{path}: no such file for ", what))
    try:
        return pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise EngineError(say(f"{path}: not a readable CSV for ", what, f" ({str(exc).splitlines()[0]})")) from None


def read_external(spec: str | Path | None, models: pd.DataFrame, *, model_column: str | None = None,
                  name_map: str | Path | None = None) -> ExternalRanking | None:
    """A user-supplied ranking aligned with *models* (Table 2's Public rho; higher is better).

    ``FILE`` is a CSV with a model column (``model_column``, else model, name or model_name) and a score column
    (score, else the first numeric column); ``FILE:COLUMN`` names the score column, e.g. an official
    leaderboard's ``leaderboard.csv:win_rate``.  A row matches a workspace model by its name, one of its aliases,
    through ``name_map`` (either a column of FILE or a second CSV whose first two columns are (name in FILE,
    workspace model name)), and last by the name's lower-case letters and digits alone when that key is unique on
    both sides (``GPT-4 Turbo`` = ``gpt4_turbo``; counted in ``normalised``).  How many models matched is reported,
    with a warning below ``MIN_EXTERNAL_MATCHES``.
    """
    if not spec:
        return None
    path, column = str(spec), None
    if not Path(path).exists() and ":" in path:
        path, column = path.rsplit(":", 1)
    df = _csv(path, say(Opt("external"), " (CSV with model and score columns)"))
    cols = ", ".join(map(str, df.columns))
    if model_column is not None and model_column not in df.columns:
        raise EngineError(say(f"{path}: no model column {model_column!r} for ", Opt("external_model"), f"; columns are {cols}"))
    mcol = model_column or next((c for c in ("model", "name", "model_name") if c in df.columns), None)
    if column is None:
        column = "score" if "score" in df.columns else next(
            (c for c in df.columns if c != mcol and pd.api.types.is_numeric_dtype(df[c])), None)
    if mcol is None or column not in df.columns:
        raise EngineError(say(f"{path}: an external ranking needs a model (or name) column and a score column; "
                              f"columns are {cols}; name them with ", Opt("external_model", "COLUMN"), " and FILE:COLUMN"))
    score = pd.to_numeric(df[column], errors="coerce")
    if score.notna().sum() == 0:
        raise EngineError(f"{path}: score column {column!r} holds no numbers; name another with FILE:COLUMN")
    ext_names = df[mcol].astype(str)
    mapping: dict[str, str] = {}
    if name_map is not None:
        if str(name_map) in df.columns:
            mapping = {n: str(v) for n, v in zip(ext_names, df[str(name_map)]) if pd.notna(v)}
        else:
            mp = _csv(str(name_map), say(Opt("external_map"), " (CSV: name in the external file, workspace model name)"))
            if mp.shape[1] < 2:
                raise EngineError(f"{name_map}: a name map needs two columns (external name, workspace model name)")
            mapping = {str(a): str(b) for a, b in zip(mp.iloc[:, 0], mp.iloc[:, 1]) if pd.notna(a) and pd.notna(b)}
    by_name: dict[str, float] = {}
    for n, v in zip(ext_names, score):
        by_name.setdefault(n, v)
        if n in mapping:
            by_name.setdefault(mapping[n], v)
    keys = pd.Series([_name_key(n) for n in by_name])
    unique_keys = set(keys[~keys.duplicated(keep=False)])
    by_key = {k: v for k, v in zip(keys, by_name.values()) if k in unique_keys and k}
    ws_keys = pd.Series([_name_key(n) for n in models["name"]])
    ws_unique = set(ws_keys[~ws_keys.duplicated(keep=False)])
    aliases = models.get("aliases", pd.Series([""] * len(models)))
    out, unmatched, normalised = [], [], 0
    for name, al, key in zip(models["name"], aliases, ws_keys):
        v = by_name.get(name)
        if v is None:
            v = next((by_name[a] for a in str(al).split("|") if a and a in by_name), None)
        if v is None and key in ws_unique and key in by_key:
            v = by_key[key]
            normalised += np.isfinite(v)
        if v is None or not np.isfinite(v):
            unmatched.append(str(name))
            v = np.nan
        out.append(v)
    scores = np.array(out, float)
    matched = int(np.isfinite(scores).sum())
    warnings = []
    if matched < min(MIN_EXTERNAL_MATCHES, len(models)):
        shown = ", ".join(unmatched[:3]) + (" ..." if len(unmatched) > 3 else "")
        warnings.append(say(Opt("external"), f" matched only {matched} of {len(models)} models by name or alias "
                            f"(unmatched: {shown}); its Spearman is {'blank' if matched < 3 else 'unreliable'}: "
                            "map names with ", Opt("external_map"), " or pick the name column with ", Opt("external_model")))
    return ExternalRanking(scores, matched, len(models), unmatched, f"{Path(path).name}:{column}", warnings,
                           int(normalised))


def _model_frame(inputs: JointInputs, theta: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"model_id": inputs.models["id"].to_numpy(), "theta": theta, "rank": rank_desc(theta)})


def _truth_metrics(conn, inputs: JointInputs, theta: np.ndarray, b_static: np.ndarray | None) -> dict:
    out = {}
    bench = inputs.static_benchmark or inputs.arena_benchmark
    t = truth_vector(conn, bench, "model", "theta", inputs.models["name"])
    if t is not None:
        out["truth_spearman_theta"] = spearman(theta, t)
    if b_static is not None and inputs.static_items is not None:
        tb = truth_vector(conn, inputs.static_benchmark, "item", "b", inputs.static_items["key"])
        if tb is not None:
            out["truth_spearman_b"] = spearman(b_static, tb)
    return out


MAX_HELDOUT_SPLITS = 20


def default_heldout_splits(mode: str) -> int:
    """Held-out ECE splits when none are asked for: 1 for a static fit (its 3 warm refits cost 1.2x the fit at
    5,000 x 14,000; the ECE's spread between seeds is about 1e-4 there), 3 (Appendix E) otherwise."""
    return 1 if mode == "static" else 3


def run_fit(db_path, benchmark: str, config: joint.JointConfig = joint.JointConfig(), *, arena: str | None = None,
            reward_model: str | None = None, external: str | None = None, external_model: str | None = None,
            external_map: str | None = None, heldout: bool = True, seed: int = 0,
            progress: Progress = no_progress, cancel: threading.Event | None = None, device: str = "auto",
            chance: str = "stated", heldout_splits: int | None = None) -> int:
    """Fit DualEval in ``config.mode`` and save the run; returns its id.  ``external*``: see :func:`read_external`.
    ``device`` (auto | cpu | cuda) picks the compute backend of the dense passes; the run's metrics record it under
    ``compute`` (backend, device, dtype, passes-equivalent).  ``chance``: the static items' chance levels as
    imported ("stated", tested against the data), one shared lower asymptote estimated from the data
    ("estimate") or none ("none"; :func:`benchloupe.jobs.data.resolve_chance`).

    ``heldout_splits``: how many seeded 80/20 cell splits the held-out ECE (Appendix E) averages, seeds ``seed``,
    ``seed + 1``, ...; default (None) :func:`default_heldout_splits`: one for a static fit, whose three warm refits
    cost more than the fit itself at leaderboard scale (issue 26), the paper's three for joint and arena fits.
    The metrics say which (``heldout_splits``, ``heldout_seeds``)."""
    splits = default_heldout_splits(config.mode) if heldout_splits is None else int(heldout_splits)
    if not 1 <= splits <= MAX_HELDOUT_SPLITS:
        raise EngineError(f"the held-out calibration takes 1 to {MAX_HELDOUT_SPLITS} splits, got {heldout_splits}; "
                          "the paper's Appendix E averages 3")
    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        inputs = load_joint(conn, benchmark, arena=arena, reward_model=reward_model,
                            need_static=config.uses_static and config.mode == "static",
                            need_arena=config.mode == "arena")
        if config.mode == "joint" and (inputs.static is None or inputs.arena is None):
            raise EngineError(say(f"a joint fit needs static results and arena rewards; {benchmark!r} has only "
                              f"{'static' if inputs.static is not None else 'arena'} data: ", Opt("arena", "BENCHMARK", verb="pass"),
                              " or fit in static/arena mode"))
        ext = read_external(external, inputs.models, model_column=external_model, name_map=external_map)
        inputs_list = [(n, role) for n, role in ((inputs.static_benchmark, "static"), (inputs.arena_benchmark, "arena"))
                       if n]
        ctx = RunContext(db_path, config.mode, benchmark,
                         {**config.__dict__, "arena": inputs.arena_benchmark, "reward_model": inputs.reward_model,
                          "external": str(external) if external else None, "heldout": heldout, "device": device,
                          "chance": chance, "heldout_splits": splits},
                         seed, inputs_list)
        ctx.start(conn, fingerprint(*inputs.fingerprint_arrays()))
        ctx.timings["load_s"] = round(time.perf_counter() - t0, 4)
        with ctx.guard(conn):
            t = time.perf_counter()
            # one monotone percentage over the stages (issue 32: 6 % -> 0 % when the metrics began)
            stages = Stages(progress, {"chance": 0.1 if chance == "estimate" else 0.02, "fit": 0.5,
                                       "metrics": 0.45 if heldout else 0.05})
            inputs, chance_metrics, chance_warnings = resolve_chance(inputs, chance, cancel=cancel,
                                                                     progress=stages.part("chance"))
            static = inputs.static if config.uses_static else None
            arena_d = inputs.arena if config.uses_arena else None
            res = joint.fit_joint(static, arena_d, config, progress=stages.part("fit"), cancel=cancel, device=device)
            t = ctx.lap("fit_s", t)
            check_cancel(cancel)
            to_metrics = stages.part("metrics")
            to_metrics(0, 1, "metrics: held-out calibration and ranking agreement")
            seeds = tuple(seed + k for k in range(splits))
            metrics = joint.metrics(res, static, arena_d, external=None if ext is None else ext.scores,
                                    heldout=heldout, seeds=seeds, progress=to_metrics, cancel=cancel,
                                    timings=ctx.timings)
            t = ctx.lap("metrics_s", t)
            if heldout:
                metrics.update({"heldout_splits": splits, "heldout_seeds": list(seeds)})
            metrics.update(_truth_metrics(conn, inputs, res.theta, res.b_static if static is not None else None))
            metrics["gamma"] = res.gamma
            metrics["warnings"] = res.warnings + (res.pairs.warnings if res.pairs is not None else []) + \
                (ext.warnings if ext is not None else []) + (chance_warnings if static is not None else [])
            if static is not None:
                metrics.update(chance_metrics)
            metrics["compute"] = res.provenance
            if ext is not None:
                metrics.update(ext.metrics())
            fisher = informativeness.fisher_scores(res, static, arena_d, config)  # §4.2, static items first
            n_static = 0 if static is None else static.shape[1]
            items = []
            if static is not None:
                items.append(pd.DataFrame({"item_id": inputs.static_items["id"].to_numpy(), "difficulty": res.b_static,
                                           "sharpness": res.a_static, "fisher": fisher[:n_static], "source": "static"}))
            if arena_d is not None:
                items.append(pd.DataFrame({"item_id": inputs.arena_items["id"].to_numpy(), "difficulty": res.b_arena,
                                           "sharpness": res.a_arena, "fisher": fisher[n_static:], "source": "arena"}))
            artifacts = {}
            if res.pairs is not None:
                p = res.pairs
                artifacts["pairs"] = {"i": p.i.astype(np.int32), "j": p.j.astype(np.int32),
                                      "prompt": p.prompt.astype(np.int32), "z_gap": p.z_gap.astype(np.float32),
                                      "tie": p.tie, "both_bad": p.both_bad}
                metrics.update({"pairs": len(p), "tie_pairs": int(p.tie.sum()), "decisive_pairs": int(p.decisive.sum()),
                                "both_bad_pairs": int(p.bb_loss.sum()), "tie_delta": p.tie_delta,
                                "bb_threshold": p.bb_threshold})
            out = runs.RunOutputs(metrics=metrics, timings={**ctx.timings, "total_s": round(time.perf_counter() - t0, 4)},
                                  models=_model_frame(inputs, res.theta),
                                  items=pd.concat(items) if items else None, artifacts=artifacts)
            runs.save_outputs(conn, ctx.run_id, out)
            return ctx.run_id
    finally:
        conn.close()


def run_baseline(db_path, benchmark: str, config: BaselineConfig = BaselineConfig(), *, method: str,
                 arena: str | None = None, reward_model: str | None = None, external: str | None = None,
                 external_model: str | None = None, external_map: str | None = None,
                 progress: Progress = no_progress, cancel: threading.Event | None = None, seed: int = 0,
                 preference=None) -> int:
    """Arena Bradley-Terry (``method="bt"``) or average reward (``"avg-reward"``).

    ``bt`` on a benchmark with pairwise preferences and no rewards fits the preferences directly
    (``jobs.pairwise``, issue 12) with ``preference`` (a ``PairwiseConfig``: bootstrap replicates, prior alpha;
    default ``PairwiseConfig()``), which is refused where the rewards path is taken (it has no such settings)."""
    conn = connect(db_path)
    try:
        source = arena or benchmark
        if method == "bt" and not reward_model:
            from .data import has_arena, has_preferences
            from .pairwise import PairwiseConfig, run_preference_bt

            if not has_arena(conn, source) and has_preferences(conn, source):
                ext = read_external(external, read.models(conn, source), model_column=external_model,
                                    name_map=external_map)
                return run_preference_bt(db_path, source, preference or PairwiseConfig(), seed=seed,
                                         progress=progress, cancel=cancel, external=ext)
        if preference is not None:
            raise EngineError(say("bootstrap replicates and the prior's alpha apply to Bradley-Terry on pairwise "
                              f"preferences (battles, AlpacaEval pairs); {source!r} is fitted from its arena "
                              "rewards (for intervals there use ", Alt("`benchloupe bootstrap`", "the bootstrap analysis"), ")"))
        t0 = time.perf_counter()
        inputs = load_joint(conn, arena or benchmark, reward_model=reward_model, need_arena=True)
        ext = read_external(external, inputs.models, model_column=external_model, name_map=external_map)
        ctx = RunContext(db_path, method, benchmark, {**config.__dict__, "reward_model": inputs.reward_model}, None,
                         [(inputs.arena_benchmark, "arena")])
        ctx.start(conn, fingerprint(inputs.arena.rewards))
        with ctx.guard(conn):
            progress(0, 1, f"arena baseline {method}")
            jc = joint.JointConfig(mode="arena", tie_pct=config.tie_pct, bb_pct=config.bb_pct,
                                   lambda_reg=config.lambda_reg, variant=config.variant)
            res = joint.fit_bradley_terry(inputs.arena, jc) if method == "bt" else joint.average_reward(inputs.arena)
            check_cancel(cancel)
            metrics = {"objective": res.objective, "iterations": res.iterations, "converged": res.converged}
            metrics.update(_truth_metrics(conn, inputs, res.scores, None))
            metrics["warnings"] = ext.warnings if ext is not None else []
            if ext is not None:
                metrics["spearman_vs_external"] = spearman(res.scores, ext.scores)
                metrics.update(ext.metrics())
            out = runs.RunOutputs(metrics=metrics, timings={"total_s": round(time.perf_counter() - t0, 4)},
                                  models=_model_frame(inputs, res.scores))
            runs.save_outputs(conn, ctx.run_id, out)
            progress(1, 1, "done")
            return ctx.run_id
    finally:
        conn.close()


@dataclass(frozen=True)
class EvaluateConfig:
    """Table 2 held-out comparison (paper 000 §4.1): 3 random question splits, 20 % of questions held out; DualEval
    joint, static-only 2PL, arena BT and average reward scored on held-out decisive-pair accuracy, Static rho and
    Arena rho (and Public rho with --external).  ``variant``, ``tie_pct`` and ``lambda_reg`` as for ``fit``.
    ``ablation`` adds Appendix I's pair-treatment ablation (Table 5: pair accuracy and both-bad AUC);
    ``cross_reward_models`` fits DualEval under every reward model of the arena set and reports Appendix F's
    agreement (Spearman of abilities and item parameters).  When the arena set also holds human pairwise
    preferences, each reward model's agreement with them is reported (Appendix C)."""

    splits: int = 3
    holdout: float = 0.2
    seed: int = 0
    variant: str = "paper"
    tie_pct: float | None = None
    lambda_reg: float | None = None
    ablation: bool = False
    cross_reward_models: bool = False


def run_evaluate(db_path, benchmark: str, config: EvaluateConfig = EvaluateConfig(), *, arena: str | None = None,
                 reward_model: str | None = None, external: str | None = None, external_model: str | None = None,
                 external_map: str | None = None, progress: Progress = no_progress,
                 cancel: threading.Event | None = None, **_) -> int:
    """``benchloupe evaluate B --arena A``: the Table 2 comparison stored as a run (``comparison`` artifact with
    the table's rows and columns, ``comparison_splits`` per split, flattened ``<method>_<column>`` metrics)."""
    from benchloupe.engine.joint.evaluation import comparison_refits

    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        inputs = load_joint(conn, benchmark, arena=arena, reward_model=reward_model)
        jc = joint.JointConfig(mode="joint", variant=config.variant, tie_pct=config.tie_pct,
                               lambda_reg=config.lambda_reg)
        ext = read_external(external, inputs.models, model_column=external_model, name_map=external_map)
        roles = [(n, r) for n, r in ((inputs.static_benchmark, "static"), (inputs.arena_benchmark, "arena")) if n]
        ctx = RunContext(db_path, "evaluate", benchmark,
                         {**config.__dict__, "arena": inputs.arena_benchmark, "reward_model": inputs.reward_model,
                          "external": str(external) if external else None}, config.seed, roles)
        ctx.start(conn, fingerprint(*inputs.fingerprint_arrays()))
        with ctx.guard(conn):
            t = ctx.lap("load_s", t0)
            phase: dict = {}
            raw, table = joint.heldout_comparison(inputs.static, inputs.arena, jc, splits=config.splits,
                                                  holdout=config.holdout, seed=config.seed,
                                                  external=None if ext is None else ext.scores,
                                                  progress=progress, cancel=cancel, timings=phase)
            joint_passes = phase.pop("dualeval_passes", [])
            ctx.timings.update(phase)
            t = ctx.lap("comparison_s", t)
            metrics: dict = {"splits": config.splits, "holdout": config.holdout,
                             "heldout_pairs_mean": float(raw["heldout_pairs"].mean()),
                             "refits": {**comparison_refits(list(dict.fromkeys(raw["method"])), config.splits),
                                        "joint_fit_passes": joint_passes}}
            for row in table.itertuples(index=False):
                key = str(row.method).lower().replace(" ", "_")
                for col in ("pair_acc", "static_rho", "arena_rho", "external_rho"):
                    if hasattr(row, col):
                        metrics[f"{key}_{col}"] = float(getattr(row, col))
            artifacts = {"comparison": table, "comparison_splits": raw}
            if config.ablation:
                if inputs.arena is None:
                    raise EngineError(say("the pair-treatment ablation needs arena rewards; ", Opt("arena", "BENCHMARK", verb="pass")))
                abl = joint.pair_treatment_ablation(inputs.static, inputs.arena, jc, holdout=config.holdout,
                                                    seed=config.seed, progress=progress, cancel=cancel)
                artifacts["pair_ablation"] = abl
                metrics["pair_ablation"] = abl.to_dict("records")
            if inputs.arena is not None:
                rms = read.reward_models(conn, inputs.arena_benchmark)
                if config.cross_reward_models:
                    if len(rms) < 2:
                        raise EngineError(f"{inputs.arena_benchmark!r} has one reward model; cross-reward-model "
                                          "agreement needs rewards from two or more")
                    fits = {}
                    for rm in rms:
                        check_cancel(cancel)
                        progress(0, 1, f"DualEval under reward model {rm}")
                        d = load_joint(conn, benchmark, arena=arena, reward_model=rm)
                        fits[rm] = joint.fit_joint(d.static, d.arena, jc if d.static is not None
                                                   else replace(jc, mode="arena"), cancel=cancel)
                    cross = joint.cross_reward_agreement(fits)
                    artifacts["cross_reward_models"] = cross
                    metrics["cross_reward_models"] = cross.to_dict("records")
                human = _human_agreement(conn, inputs.arena_benchmark, rms, inputs.models)
                if human:
                    metrics["reward_vs_human"] = human
            warnings = list(ext.warnings) if ext is not None else []
            if inputs.arena is not None:
                warnings += joint.build_pairs(inputs.arena, jc).warnings
            missing = _missing_rows(inputs, benchmark, table)
            if missing:
                metrics["missing_methods"] = missing[0]
                warnings.append(missing[1])
            metrics["warnings"] = warnings
            if ext is not None:
                metrics.update(ext.metrics())
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=metrics, timings={**ctx.timings, "total_s": round(time.perf_counter() - t0, 4)},
                artifacts=artifacts))
            return ctx.run_id
    finally:
        conn.close()


def _missing_rows(inputs: JointInputs, benchmark: str, table: pd.DataFrame):
    """(methods absent from the Table 2 comparison, the line that says why and what to import), or None
    (issue 23: an arena-only benchmark printed two rows without a word)."""
    shown = {str(m) for m in table["method"]} if "method" in table else set()
    if inputs.static is None:
        gone = [m for m in ("DualEval", "Static 2PL") if m not in shown]
        return gone, say(
            f"{', '.join(gone) or 'the static columns'} and the Static rho column are missing: {benchmark!r} holds "
            "arena data only, and DualEval and the static 2PL are fitted on static (0/1 or successes/trials) results; "
            "import the same models' per-item correctness into a benchmark (import long / lm-eval / inspect / helm) and "
            "run evaluate on it with ", Opt("arena", inputs.arena_benchmark or benchmark))
    if inputs.arena is None:
        gone = [m for m in ("DualEval", "Arena BT", "Arena Avg Reward") if m not in shown]
        return gone, say(
            f"{', '.join(gone) or 'the arena rows'} and the Arena rho column need arena rewards: {benchmark!r} has "
            "static results only; import reward-model scores (import arena / alpacaeval) and ",
            Opt("arena", "BENCHMARK", verb="pass"))
    return None


def _human_agreement(conn, arena_benchmark: str, reward_models: list[str], models: pd.DataFrame) -> list[dict]:
    """Appendix C: each reward model's agreement with the human preferences stored for the arena set."""
    prefs = read.load_preferences(conn, arena_benchmark)
    if prefs.empty:
        return []
    out = []
    for rm in reward_models:
        am = read.load_arena(conn, arena_benchmark, reward_model=rm)
        mi = {n: i for i, n in enumerate(am.models["name"])}
        qi = {k: j for j, k in enumerate(am.items["key"])}
        a = prefs["model_a"].map(mi)
        b = prefs["model_b"].map(mi)
        q = prefs["item"].map(qi)
        ok = a.notna() & b.notna() & q.notna()
        res = joint.preference_agreement(am.rewards, a[ok].to_numpy(int), b[ok].to_numpy(int), q[ok].to_numpy(int),
                                         prefs["prob_a"][ok].to_numpy(float))
        res["missing"] += int((~ok).sum())
        out.append({"reward_model": rm, **res})
    return out


def _fit_runner(mode: str):
    def run(db_path, benchmark, config=None, **kw) -> int:
        config = config if config is not None else joint.JointConfig(mode=mode)
        if config.mode != mode:
            config = replace(config, mode=mode)
        return run_fit(db_path, benchmark, config, **kw)
    return run


def _baseline_runner(method: str):
    def run(db_path, benchmark, config=None, **kw) -> int:
        return run_baseline(db_path, benchmark, config or BaselineConfig(), method=method, **kw)
    return run


register(Analysis("joint", "DualEval joint fit (static 2PL + reward-distilled pairs)", "calibration",
                  joint.JointConfig, "static+arena", _fit_runner("joint")))
register(Analysis("static", "Static 2PL fit (DualEval static-only)", "calibration", joint.JointConfig, "static",
                  _fit_runner("static")))
register(Analysis("arena", "Arena-only pairwise IRT fit", "calibration", joint.JointConfig, "arena",
                  _fit_runner("arena")))
register(Analysis("evaluate", "Table 2 held-out method comparison (paper 000 §4.1)", "calibration", EvaluateConfig,
                  "any", lambda db, bench, config=None, **kw: run_evaluate(db, bench, config or EvaluateConfig(), **kw)))
register(Analysis("bt", "Arena Bradley-Terry baseline", "calibration", BaselineConfig, "arena", _baseline_runner("bt")))
register(Analysis("avg-reward", "Arena average-reward baseline", "calibration", BaselineConfig, "arena",
                  _baseline_runner("avg-reward")))
