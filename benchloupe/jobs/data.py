"""Loading engine inputs from the store: static and arena matrices aligned on one joint model list."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from benchloupe.engine.common import EngineError, no_progress
from benchloupe.engine.joint import ArenaData, StaticData
from benchloupe.hints import Opt, say
from benchloupe.store import read

from .base import RunContext, fingerprint


@dataclass
class JointInputs:
    """Static and/or arena data on a shared model axis (``models``), with the store's item frames."""

    models: pd.DataFrame
    static: StaticData | None
    static_items: pd.DataFrame | None
    arena: ArenaData | None
    arena_items: pd.DataFrame | None
    reward_model: str | None
    static_benchmark: str | None
    arena_benchmark: str | None
    chance_report: tuple = ({}, [])  # (metrics, warnings) of resolve_chance, once a run has resolved the chance

    def fingerprint_arrays(self) -> tuple:
        """The arrays a run's input fingerprint is computed from."""
        return (None if self.static is None else self.static.correct,
                None if self.static is None else self.static.mask,
                None if self.arena is None else self.arena.rewards,
                None if self.arena is None or self.arena.preference_pairs is None else self.arena.preference_pairs.target)


def rank_desc(scores: np.ndarray) -> np.ndarray:
    """Rank 1 = highest score; NaN scores get no rank."""
    order = np.argsort(-np.nan_to_num(scores, nan=-np.inf), kind="stable")
    rank = np.empty(len(scores), float)
    rank[order] = np.arange(1, len(scores) + 1)
    rank[~np.isfinite(scores)] = np.nan
    return rank


def has_static(conn, benchmark: str) -> bool:
    bid = read.benchmark_id(conn, benchmark)
    return conn.execute("SELECT 1 FROM static_results WHERE benchmark_id = ? LIMIT 1", (bid,)).fetchone() is not None


def has_arena(conn, benchmark: str) -> bool:
    return bool(read.reward_models(conn, benchmark))


def has_preferences(conn, benchmark: str) -> bool:
    bid = read.benchmark_id(conn, benchmark)
    return conn.execute("SELECT 1 FROM preferences p JOIN items i ON i.id = p.item_id WHERE i.benchmark_id = ?"
                        " LIMIT 1", (bid,)).fetchone() is not None


def preference_arena(conn, benchmark: str, models: pd.DataFrame):
    """(ArenaData whose pairs are the benchmark's preferences, arena items frame) on the model axis ``models``."""
    from benchloupe.engine.pairwise import preference_pairs

    prefs = read.load_preferences(conn, benchmark)
    items = read.items(conn, benchmark, kind="arena", status="active")
    items = items[items["key"].isin(set(prefs["item"]))].reset_index(drop=True)
    prefs = prefs[prefs["item"].isin(set(items["key"]))]
    pos = {k: i for i, k in enumerate(items["key"])}
    index = {n: i for i, n in enumerate(models["name"])}
    pairs = preference_pairs(prefs["model_a"].map(index).to_numpy(), prefs["model_b"].map(index).to_numpy(),
                             prefs["item"].map(pos).to_numpy(), prefs["prob_a"].to_numpy(float), len(models),
                             len(items))
    return ArenaData(np.full((len(models), len(items)), np.nan), preference_pairs=pairs), items


def load_joint(conn, benchmark: str, *, arena: str | None = None, reward_model: str | None = None,
               need_static: bool = False, need_arena: bool = False) -> JointInputs:
    """Static results of *benchmark* and arena rewards of *arena* (default: the benchmark's own, if any).

    A model present in only one source is normal input: its cells in the other are simply missing.
    """
    sm = read.load_static(conn, benchmark) if has_static(conn, benchmark) else None
    arena_name = arena or benchmark
    if not has_arena(conn, arena_name):
        if has_preferences(conn, arena_name):
            arena_name = None  # preferences only: used as the arena pairs below
        elif not arena:
            arena_name = None
    am = read.load_arena(conn, arena_name, reward_model=reward_model) if arena_name else None
    if need_static and (sm is None or not sm.correct.size):
        raise EngineError(f"benchmark {benchmark!r} has no static (0/1) results; import some or fit in arena mode")
    pref_name = None
    if am is None:
        candidate = arena or benchmark
        pref_name = candidate if has_preferences(conn, candidate) else None
    if need_arena and am is None and pref_name is None:
        raise EngineError(say(f"benchmark {benchmark!r} has no arena rewards; ", Opt("arena", "BENCHMARK", verb="pass"),
                              " or fit in static mode"))
    pm = read.models(conn, pref_name) if pref_name else None
    frames = [f for f in (sm.models if sm is not None else None, am.models if am is not None else None, pm)
              if f is not None]
    if not frames:
        raise EngineError(f"benchmark {benchmark!r} holds no results to fit; import results first")
    models = pd.concat(frames).drop_duplicates("id").reset_index(drop=True)
    index = pd.Index(models["id"])
    static = arena_data = None
    if sm is not None and sm.correct.size:
        static = _static_data(sm, index)
    if am is not None:
        rows = index.get_indexer(am.models["id"])
        rewards = np.full((len(models), am.rewards.shape[1]), np.nan)
        rewards[rows] = am.rewards
        arena_data = ArenaData(rewards)
    arena_items = am.items if am is not None else None
    if pref_name is not None:  # preferences as the arena pairs (our extension, docs/DUALEVAL.md)
        arena_data, arena_items = preference_arena(conn, pref_name, models)
        arena_name = pref_name
    return JointInputs(models, static, sm.items if sm is not None else None, arena_data,
                       arena_items, am.reward_model if am is not None else None,
                       benchmark if sm is not None else None, arena_name)


def _static_data(sm: read.StaticMatrix, index: pd.Index) -> StaticData:
    """The engine's static input on the joint model axis: binomial cells (successes of trials) where the store holds
    counts, 0/1 otherwise, and the items' known chance level (guessing) where one was imported (issue 14)."""
    rows = index.get_indexer(sm.models["id"])
    n_items = sm.correct.shape[1]
    mask = np.zeros((len(index), n_items), bool)
    mask[rows] = sm.mask
    kw: dict = {"item_source": np.array(["static"] * n_items)}
    if sm.trials is not None:
        successes = np.zeros(mask.shape, np.int32)
        trials = np.zeros(mask.shape, np.int32)
        ok = sm.trials > 0
        successes[rows] = np.where(ok, sm.successes, 0)
        trials[rows] = np.where(ok, sm.trials, 0)
        mask[rows] = ok
        correct, kw["trials"] = successes, trials
    else:
        correct = np.zeros(mask.shape, np.int8)
        correct[rows] = np.where(sm.mask, sm.correct, 0)
    if "chance" in sm.items.columns:
        chance = pd.to_numeric(sm.items["chance"], errors="coerce").fillna(0.0).to_numpy(float)
        if chance.any():
            kw["chance"] = chance
    return StaticData(correct, mask, **kw)


CHANCE_MODES = ("stated", "estimate", "none")


def chance_rejected(test, floor: float) -> str:
    """The warning for a stated chance level the data reject (:func:`benchloupe.engine.irt.asymptote.
    chance_lr_test`): both numbers, the log-likelihood gain, and what it means for the guessing-aware results."""
    where = (f"a random {test.n_models} x {test.n_items} subset" if test.subsampled
             else f"{test.n_models} models x {test.n_items} items")
    ci = "" if not np.all(np.isfinite(test.ci)) else f" [{test.ci[0]:.3f}, {test.ci[1]:.3f}]"
    p = "p < 1e-6" if test.p_value < 1e-6 else f"p = {test.p_value:.2g}"
    return (f"the data reject the stated chance level {test.stated:.3f}: the shared lower asymptote estimated from "
            f"them is {test.estimate:.3f}{ci}, a log-likelihood gain of {test.gain:,.1f} over the stated value "
            f"(likelihood-ratio test, {p}, on {where}; empirical floor {floor:.3f}); guessing-aware results "
            f"(residuals, compression) assume the stated value (the anomaly protocol's oracle ceiling is "
            f"simulated with the estimate)")


def resolve_chance(inputs: JointInputs, mode: str = "stated", *, cancel=None,
                   progress=None) -> tuple[JointInputs, dict, list[str]]:
    """The static data's chance levels as a run uses them (issue 23), with what the run reports about them.

    ``stated``: the imported levels, tested against the data (issue 32): a likelihood-ratio test of the stated
    levels against one shared asymptote estimated from them (:func:`benchloupe.engine.irt.asymptote.
    chance_lr_test`; a warning with both numbers and the log-likelihood gain when the data reject them), else
    the empirical floor check (the weakest 10 % of models on the hardest 20 % of items; :func:`~benchloupe.engine.
    irt.asymptote.check_chance`).  ``estimate``: one lower asymptote shared by the items, estimated from the
    data by marginal ML (:func:`~benchloupe.engine.irt.asymptote.estimate_lower_asymptote`), replaces the stated
    levels on the items that have one (on every item when none has).  ``none``: the plain 2PL.
    Returns (inputs with the chance the run uses, metrics, warnings)."""
    from benchloupe.engine.irt.asymptote import (
        chance_lr_test,
        check_chance,
        empirical_floor,
        estimate_lower_asymptote,
    )

    if mode not in CHANCE_MODES:
        raise EngineError(f"chance must be one of {', '.join(CHANCE_MODES)}, got {mode!r}")
    st = inputs.static
    if st is None:
        return inputs, {}, []
    # the cells in their integer dtypes (0/1 data: the int8 values and the mask as trials; issue 26: int32 copies)
    k = st.trials if st.trials is not None else st.mask
    succ = st.correct if st.mask.all() else np.where(st.mask, st.correct, 0)
    k = k if st.mask.all() else np.where(st.mask, k, 0)
    stated = st.chance
    floor = empirical_floor(succ, k, chance=stated)
    metrics: dict = {"chance_mode": mode, "chance_floor": round(floor.floor, 4)}
    if stated is not None:
        metrics["chance_stated"] = round(float(np.mean(stated[stated > 0])), 4)
        metrics["chance_stated_hardest"] = round(floor.stated, 4)
    warnings: list[str] = []
    if mode == "none":
        return replace(inputs, static=replace(st, chance=None)), metrics, warnings
    if mode == "stated":
        test = None
        if stated is not None:
            if progress is not None:
                progress(0, 1, "testing the stated chance level against the data (likelihood ratio)")
            test = chance_lr_test(succ, k, stated, cancel=cancel)
        if test is not None:
            metrics.update({"chance_test_estimate": round(test.estimate, 4), "chance_test_loglik_gain": round(
                test.gain, 2), "chance_test_p": float(f"{test.p_value:.3g}"), "chance_test_rejected": test.rejected,
                "chance_test_cells": f"{test.n_models} x {test.n_items}"})
        if test is not None and test.rejected:
            warnings.append(say(chance_rejected(test, floor.floor), "; pass ", Opt("chance", "estimate"),
                                " to fit the estimated asymptote instead"))
            return inputs, metrics, warnings
        w = check_chance(floor)
        if w:
            warnings.append(say(w, ", or pass ", Opt("chance", "estimate"),
                                " to estimate a shared lower asymptote from the data"))
        return inputs, metrics, warnings
    progress = progress or no_progress
    progress(0, 1, "estimating a shared lower asymptote (marginal ML; seconds on thousands of models)")
    est = estimate_lower_asymptote(succ, k.astype(np.int32) if k.dtype == bool else k, cancel=cancel,
                                   progress=progress)
    targets = stated > 0 if stated is not None else np.ones(st.shape[1], bool)
    chance = np.where(targets, est.c, 0.0)
    metrics.update({"chance_estimated": round(est.c, 4), "chance_estimated_ci": [round(v, 4) for v in est.ci],
                    "chance_estimated_items": int(targets.sum()), "chance_estimate_loglik_gain": round(
                        est.loglik - est.loglik_c0, 2)})
    return replace(inputs, static=replace(st, chance=chance if chance.any() else None)), metrics, warnings


def truth_vector(conn, benchmark: str, entity: str, name: str, keys) -> np.ndarray | None:
    """Stored ground truth aligned with *keys* (NaN where unknown); None when the benchmark has none."""
    t = read.truth(conn, benchmark, entity)
    t = t[t["name"] == name]
    if t.empty:
        return None
    m = dict(zip(t["key"], t["value"]))
    return np.array([m.get(k, np.nan) for k in keys], float)


# ------------------------------------------------------------------ starting a run on joint inputs
# (shared by jobs.diagnostics and jobs.estimate, so neither imports the other)

def auto_mode(inputs: JointInputs, mode: str) -> str:
    if mode != "auto":
        return mode
    if inputs.static is not None and inputs.arena is not None:
        return "joint"
    return "static" if inputs.static is not None else "arena"


def start_run(conn, db_path, kind: str, benchmark: str, config, seed: int, arena: str | None,
           reward_model: str | None = None):
    """Load the joint inputs (arena rewards of ``reward_model`` when the arena set has several), resolve the
    "auto" mode and start the run; returns (inputs, mode, ctx)."""
    inputs = load_joint(conn, benchmark, arena=arena, reward_model=reward_model)
    mode = auto_mode(inputs, config.mode)
    roles = [(n, r) for n, r in ((inputs.static_benchmark, "static"), (inputs.arena_benchmark, "arena")) if n]
    ctx = RunContext(db_path, kind, benchmark, {**config.__dict__, "mode": mode, "reward_model": inputs.reward_model},
                     seed, roles)
    ctx.start(conn, fingerprint(*inputs.fingerprint_arrays()))
    return inputs, mode, ctx


def run_chance(conn, ctx, inputs: JointInputs, config, cancel, progress=None) -> JointInputs:
    """The chance levels the run uses (``config.chance``: stated | estimate | none; the stated ones otherwise),
    inside the run's guard so that a failed estimate fails the run; the report goes to ``inputs.chance_report``."""
    resolved, m, w = resolve_chance(inputs, getattr(config, "chance", "stated"), cancel=cancel, progress=progress)
    resolved.chance_report = (m, w)
    return resolved


def report_chance(metrics: dict, inputs: JointInputs) -> dict:
    """``metrics`` with the chance report of :func:`run_chance` merged in (its warnings appended)."""
    m, w = inputs.chance_report
    metrics.update(m)
    if w:
        metrics["warnings"] = list(metrics.get("warnings", [])) + list(w)
    return metrics
