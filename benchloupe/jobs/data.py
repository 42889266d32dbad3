"""Loading engine inputs from the store: static and arena matrices aligned on one joint model list."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchloupe.engine.common import EngineError
from benchloupe.engine.joint import ArenaData, StaticData
from benchloupe.hints import Opt, say
from benchloupe.store import read


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


def truth_vector(conn, benchmark: str, entity: str, name: str, keys) -> np.ndarray | None:
    """Stored ground truth aligned with *keys* (NaN where unknown); None when the benchmark has none."""
    t = read.truth(conn, benchmark, entity)
    t = t[t["name"] == name]
    if t.empty:
        return None
    m = dict(zip(t["key"], t["value"]))
    return np.array([m.get(k, np.nan) for k in keys], float)
