"""Speed figures for the DualEval engine (issue 3).  Prints JSON; best of 3 wall-clock runs unless noted.

Usage: python bench/bench_joint.py [--quick] [--skip-large]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data"

from benchloupe.engine.bootstrap import cluster_bootstrap  # noqa: E402
from benchloupe.engine.joint import ArenaData, JointConfig, StaticData, fit_joint  # noqa: E402
from benchloupe.engine.stats import spearman  # noqa: E402
from tests.unit._joint_sim import simulate  # noqa: E402


def best_of(fn, n=3):
    times, out = [], None
    for _ in range(n):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def row(name, secs, res, **extra):
    d = {"case": name, "best_s": round(secs, 3), "objective": res.objective, "iterations": res.iterations,
         "converged": res.converged}
    d.update(extra)
    return d


def chembench():
    df = pd.read_csv(DATA / "chembench" / "matrix_models_all_correct.csv.gz", index_col=0)
    y = df.to_numpy(float)
    return StaticData(np.nan_to_num(y), np.isfinite(y))


def alpacaeval():
    ann = pd.read_csv(DATA / "alpacaeval" / "annotations_ae2_long.csv.gz",
                      usecols=["generator_2", "instruction_id", "preference"])
    ann = ann.dropna(subset=["preference"]).drop_duplicates(["generator_2", "instruction_id"], keep="last")
    wide = ann.pivot(index="generator_2", columns="instruction_id", values="preference")
    r = wide.to_numpy(float)
    static = StaticData((np.nan_to_num(r) >= 1.5).astype(float), np.isfinite(r))  # the reference's stand-in
    return static, ArenaData(r), list(wide.index)


def gsm8k():
    path = next((DATA / "metabench").glob("gsm8k-*.responses.csv.gz"))
    df = pd.read_csv(path, index_col=0)
    y = df.to_numpy(float)
    if y.shape[0] < y.shape[1]:
        y = y.T
    return StaticData(np.nan_to_num(y), np.isfinite(y))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-large", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(2)
    out = []
    paper = JointConfig()
    truth, S, A = simulate(18, 300, 300, seed=1)
    secs, res = best_of(lambda: fit_joint(S, A, paper))
    t = time.perf_counter()
    adam = fit_joint(S, A, JointConfig(optimizer="adam"))
    out.append(row("paper-sized joint 18x300+300 (paper settings)", secs, res, adam_objective=adam.objective,
                   adam_s=round(time.perf_counter() - t, 3), n_pairs=len(res.pairs),
                   spearman_truth=spearman(res.theta, truth["theta"])))
    secs, boot = best_of(lambda: cluster_bootstrap(S, A, paper, B=100, seed=0), n=1)
    out.append({"case": "bootstrap B=100 paper-sized (1 run)", "best_s": round(secs, 3),
                "median_se": float(np.median(boot.se))})
    if (DATA / "chembench").exists():
        C = chembench()
        for name, cfg in [("paper", JointConfig(mode="static")), ("reference", JointConfig.reference(mode="static"))]:
            secs, res = best_of(lambda cfg=cfg: fit_joint(C, None, cfg), n=3 if name == "paper" else 1)
            out.append(row(f"ChemBench static {C.shape} ({name} settings)", secs, res))
    if (DATA / "metabench").exists():
        G = gsm8k()
        secs, res = best_of(lambda: fit_joint(G, None, JointConfig(mode="static")))
        out.append(row(f"metabench GSM8K static {G.shape} (paper settings)", secs, res))
    if (DATA / "alpacaeval").exists():
        AS, AA, _ = alpacaeval()
        secs, res = best_of(lambda: fit_joint(AS, AA, JointConfig()), n=1)
        out.append(row(f"AlpacaEval 2 joint {AA.shape} (paper settings)", secs, res, n_pairs=len(res.pairs)))
        secs, res = best_of(lambda: fit_joint(None, AA, JointConfig(mode="arena")), n=1)
        out.append(row(f"AlpacaEval 2 arena-only {AA.shape} (paper settings)", secs, res))
    if not args.skip_large:
        rng = np.random.default_rng(0)
        th, b, a = rng.normal(size=5000), rng.normal(size=14000), np.exp(rng.normal(0.5, 0.3, 14000))
        y = (rng.random((5000, 14000)) < 1 / (1 + np.exp(-a * (th[:, None] - b)))).astype(float)
        L = StaticData(y, np.ones_like(y, bool))
        del y
        secs, res = best_of(lambda: fit_joint(L, None, JointConfig(mode="static", max_iter=300)), n=1)
        out.append(row("simulated static 5000x14000 (L-BFGS fallback, 1 run)", secs, res,
                       spearman_truth=spearman(res.theta, th)))
    print(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
