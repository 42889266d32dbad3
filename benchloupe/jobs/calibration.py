"""Calibration runs (DualEval, paper 000 §3-4): joint, static-only, arena-only fits and the two arena
baselines, saved as runs with provenance, per-model abilities and ranks, per-item difficulty and sharpness,
the pair flags, and the metrics of §4.1 / Appendix E (plus recovery of stored truth on simulated data)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from benchloupe.engine import informativeness, joint
from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.stats import spearman
from benchloupe.store import runs
from benchloupe.store.db import connect

from . import Analysis, RunContext, fingerprint, register
from .data import JointInputs, load_joint, rank_desc, truth_vector


@dataclass(frozen=True)
class BaselineConfig:
    """Arena baselines (paper 000 §4.1): Bradley-Terry on reward-derived soft pairs, or average reward.
    Pair flags use the same percentiles as the joint fit (Appendix B)."""

    tie_pct: float = 15.0
    bb_pct: float = 15.0
    lambda_reg: float = 0.01
    variant: str = "paper"


def read_external(spec: str | Path | None, models: pd.DataFrame) -> np.ndarray | None:
    """A user-supplied ranking, aligned with *models* (NaN where unknown; aliases count).

    ``FILE`` is a CSV with a model column (model, name or model_name) and a score column (score, else the first
    numeric column; higher is better); ``FILE:COLUMN`` names the score column, e.g. an official leaderboard's
    ``leaderboard.csv:win_rate``.
    """
    if not spec:
        return None
    path, column = str(spec), None
    if not Path(path).exists() and ":" in path:
        path, column = path.rsplit(":", 1)
    if not Path(path).exists():
        raise EngineError(f"{path}: no such file for --external (CSV with model and score columns)")
    df = pd.read_csv(path)
    mcol = next((c for c in ("model", "name", "model_name") if c in df.columns), None)
    if column is None:
        column = "score" if "score" in df.columns else next(
            (c for c in df.columns if c != mcol and pd.api.types.is_numeric_dtype(df[c])), None)
    if mcol is None or column not in df.columns:
        raise EngineError(f"{path}: an external ranking needs a model (or name) column and a score column; "
                          f"columns are {', '.join(map(str, df.columns))}; name one with FILE:COLUMN")
    m = dict(zip(df[mcol].astype(str), pd.to_numeric(df[column], errors="coerce")))
    aliases = models.get("aliases", pd.Series([""] * len(models)))
    out = []
    for name, al in zip(models["name"], aliases):
        v = m.get(name)
        if v is None:
            v = next((m[a] for a in str(al).split("|") if a and a in m), np.nan)
        out.append(v)
    return np.array(out, float)


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


def run_fit(db_path, benchmark: str, config: joint.JointConfig = joint.JointConfig(), *, arena: str | None = None,
            reward_model: str | None = None, external: str | None = None, heldout: bool = True, seed: int = 0,
            progress: Progress = no_progress, cancel: threading.Event | None = None, device: str = "auto") -> int:
    """Fit DualEval in ``config.mode`` and save the run; returns its id.  ``device`` (auto | cpu | cuda) picks the
    compute backend of the dense passes; the run's metrics record it under ``compute`` (backend, device, dtype,
    passes-equivalent)."""
    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        inputs = load_joint(conn, benchmark, arena=arena, reward_model=reward_model,
                            need_static=config.uses_static and config.mode == "static",
                            need_arena=config.mode == "arena")
        if config.mode == "joint" and (inputs.static is None or inputs.arena is None):
            raise EngineError(f"a joint fit needs static results and arena rewards; {benchmark!r} has only "
                              f"{'static' if inputs.static is not None else 'arena'} data: pass --arena BENCHMARK "
                              "or fit in static/arena mode")
        ext = read_external(external, inputs.models)
        inputs_list = [(n, role) for n, role in ((inputs.static_benchmark, "static"), (inputs.arena_benchmark, "arena"))
                       if n]
        ctx = RunContext(db_path, config.mode, benchmark,
                         {**config.__dict__, "arena": inputs.arena_benchmark, "reward_model": inputs.reward_model,
                          "external": str(external) if external else None, "heldout": heldout, "device": device},
                         seed, inputs_list)
        ctx.start(conn, fingerprint(*inputs.fingerprint_arrays()))
        ctx.timings["load_s"] = round(time.perf_counter() - t0, 4)
        with ctx.guard(conn):
            t = time.perf_counter()
            static = inputs.static if config.uses_static else None
            arena_d = inputs.arena if config.uses_arena else None
            res = joint.fit_joint(static, arena_d, config, progress=progress, cancel=cancel, device=device)
            t = ctx.lap("fit_s", t)
            check_cancel(cancel)
            progress(0, 1, "metrics: held-out calibration and ranking agreement")
            metrics = joint.metrics(res, static, arena_d, external=ext, heldout=heldout, seeds=(seed, seed + 1, seed + 2),
                                    progress=progress, cancel=cancel)
            t = ctx.lap("metrics_s", t)
            metrics.update(_truth_metrics(conn, inputs, res.theta, res.b_static if static is not None else None))
            metrics["gamma"] = res.gamma
            metrics["warnings"] = res.warnings
            metrics["compute"] = res.provenance
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
                 progress: Progress = no_progress, cancel: threading.Event | None = None, seed: int = 0) -> int:
    """Arena Bradley-Terry (``method="bt"``) or average reward (``"avg-reward"``)."""
    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        inputs = load_joint(conn, arena or benchmark, reward_model=reward_model, need_arena=True)
        ext = read_external(external, inputs.models)
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
            if ext is not None:
                metrics["spearman_vs_external"] = spearman(res.scores, ext)
            out = runs.RunOutputs(metrics=metrics, timings={"total_s": round(time.perf_counter() - t0, 4)},
                                  models=_model_frame(inputs, res.scores))
            runs.save_outputs(conn, ctx.run_id, out)
            progress(1, 1, "done")
            return ctx.run_id
    finally:
        conn.close()


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
register(Analysis("bt", "Arena Bradley-Terry baseline", "calibration", BaselineConfig, "arena", _baseline_runner("bt")))
register(Analysis("avg-reward", "Arena average-reward baseline", "calibration", BaselineConfig, "arena",
                  _baseline_runner("avg-reward")))
