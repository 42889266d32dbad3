"""Speed figures for the DualEval engine (issue 3).  Prints JSON; best of 3 wall-clock runs unless noted.

Run with OPENBLAS_NUM_THREADS=1 (set below when unset; multi-threaded OpenBLAS thrashes on the shared 2-core
machine).  Every row carries the 1-minute load average before and after it (``load``), because the machine is shared
and the figures inflate with it, and ``before_s``: the figure of the previous optimiser (docs/DUALEVAL.md, same
machine, load average 5-6) where one was measured.

Usage: python bench/bench_joint.py [--skip-large]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
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


# the previous optimiser's figures (docs/DUALEVAL.md before this change; same machine, load average 5-6)
BEFORE_S = {"paper-sized joint": 11.42, "bootstrap": 150.0, "ChemBench static (32, 2854) (paper": 10.82,
            "ChemBench static (32, 2854) (reference": 69.03, "GSM8K": 10.67, "AlpacaEval 2 joint": 402.06,
            "AlpacaEval 2 arena-only": 160.19}


def load() -> float:
    return round(os.getloadavg()[0], 2)


def timed(name, fn, n=3):
    """Best of ``n`` runs of ``fn`` (returns its last result) with the load average around them."""
    before = load()
    secs, res = best_of(fn, n)
    d = {"case": name, "best_s": round(secs, 3), "runs": n, "load": [before, load()]}
    prev = next((v for k, v in BEFORE_S.items() if name.startswith(k)), None)
    if prev is not None:
        d["before_s"] = prev
    if hasattr(res, "objective"):
        d.update(objective=res.objective, iterations=res.iterations, converged=res.converged)
    return d, res


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
    out = []
    paper = JointConfig()
    truth, S, A = simulate(18, 300, 300, seed=1)
    d, res = timed("paper-sized joint 18x300+300 (paper settings)", lambda: fit_joint(S, A, paper))
    t = time.perf_counter()
    adam = fit_joint(S, A, JointConfig(optimizer="adam"))
    d.update(adam_objective=adam.objective, adam_s=round(time.perf_counter() - t, 3), n_pairs=len(res.pairs),
             spearman_truth=spearman(res.theta, truth["theta"]))
    out.append(d)
    d, boot = timed("bootstrap B=100 paper-sized", lambda: cluster_bootstrap(S, A, paper, B=100, seed=0))
    d["median_se"] = float(np.median(boot.se))
    out.append(d)
    if (DATA / "chembench").exists():
        C = chembench()
        for name, cfg in [("paper", JointConfig(mode="static")), ("reference", JointConfig.reference(mode="static"))]:
            out.append(timed(f"ChemBench static {C.shape} ({name} settings)", lambda cfg=cfg: fit_joint(C, None, cfg))[0])
    if (DATA / "metabench").exists():
        G = gsm8k()
        out.append(timed(f"GSM8K metabench static {G.shape} (paper settings)",
                         lambda: fit_joint(G, None, JointConfig(mode="static")))[0])
    if (DATA / "alpacaeval").exists():
        AS, AA, _ = alpacaeval()
        d, res = timed(f"AlpacaEval 2 joint {AA.shape} (paper settings)", lambda: fit_joint(AS, AA, JointConfig()))
        d["n_pairs"] = len(res.pairs)
        out.append(d)
        out.append(timed(f"AlpacaEval 2 arena-only {AA.shape} (paper settings)",
                         lambda: fit_joint(None, AA, JointConfig(mode="arena")))[0])
    if not args.skip_large:
        rng = np.random.default_rng(0)
        th, b, a = rng.normal(size=5000), rng.normal(size=14000), np.exp(rng.normal(0.5, 0.3, 14000))
        y = (rng.random((5000, 14000)) < 1 / (1 + np.exp(-a * (th[:, None] - b)))).astype(float)
        L = StaticData(y, np.ones_like(y, bool))
        del y
        d, res = timed("simulated static 5000x14000 (block-coordinate Newton, 1 run)",
                       lambda: fit_joint(L, None, JointConfig(mode="static")), n=1)
        d.update(spearman_truth=spearman(res.theta, th), spearman_b_truth=spearman(res.b_static, b))
        out.append(d)
    print(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
