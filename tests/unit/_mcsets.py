"""The shared multiple-choice sets (../shared/data) as StaticData with chance = 1 / number of choices (issue 23):
metabench ARC and TruthfulQA (four-way as the Open LLM Leaderboard scored them: c = .25), SAT12 (five options:
c = .2) and ChemBench (c = 1 / len(target_scores) on its multiple-choice questions, 0 on the numeric ones)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from benchloupe.engine.joint import StaticData
from tests.conftest import DATA, need_shared

MC_SETS = ("arc", "truthfulqa", "sat12", "chembench")


def metabench(name: str, chance: float | None) -> StaticData:
    need_shared("data", "metabench")
    path = next((DATA / "metabench").glob(f"{name}-*.responses.csv.gz"))
    y = pd.read_csv(path, index_col=0).to_numpy(float)
    if y.shape[0] < y.shape[1]:
        y = y.T
    return StaticData(np.nan_to_num(y), np.isfinite(y), chance=chance)


def sat12(chance: float | None) -> StaticData:
    df = pd.read_csv(need_shared("data", "classic_irt", "SAT12_scored.csv"))
    y = df.drop(columns=["person", "Person"], errors="ignore").select_dtypes("number").to_numpy(float)
    return StaticData(np.nan_to_num(y), np.isfinite(y), chance=chance)


def chembench_chance(columns) -> np.ndarray:
    """1 / number of choices of each ChemBench question that has ``target_scores`` (multiple choice), else 0."""
    q = pd.read_csv(need_shared("data", "chembench", "questions.csv.gz"))
    scores = dict(zip(q["key"], q["target_scores"]))
    out = []
    for key in columns:
        t = scores.get(key)
        out.append(1.0 / len(json.loads(t)) if isinstance(t, str) and t.strip().startswith("{") else 0.0)
    return np.asarray(out)


def chembench(with_chance: bool) -> StaticData:
    df = pd.read_csv(need_shared("data", "chembench", "matrix_models_all_correct.csv.gz"), index_col=0)
    y = df.to_numpy(float)
    return StaticData(np.nan_to_num(y), np.isfinite(y), chance=chembench_chance(df.columns) if with_chance else None)


def mc_set(name: str, with_chance: bool = True) -> StaticData:
    """One of MC_SETS, with its chance levels or without (the plain 2PL)."""
    if name in ("arc", "truthfulqa"):
        return metabench(name, 0.25 if with_chance else None)
    if name == "sat12":
        return sat12(0.2 if with_chance else None)
    if name == "chembench":
        return chembench(with_chance)
    raise KeyError(name)
