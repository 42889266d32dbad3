"""The synthetic contamination protocol (paper 000 §4.3, A.5) on every real set in ../shared/data, clean-reference
detector, cell level (AUROC, AUPRC, precision@k) and item level (AUROC, precision@k), 2PL and, for the
multiple-choice sets, with the items' chance level in the fit (when the engine supports it).  Also the oracle bound on
simulated four-way multiple choice: the AUROC the *true* probabilities give.  Prints one JSON line per case.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_protocol.py [--shared ../shared] [--sets arc,sat12]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_joint  # noqa: E402
import bench_recovery  # noqa: E402
import numpy as np  # noqa: E402

from benchloupe.engine.anomaly import contamination_experiment  # noqa: E402
from benchloupe.engine.joint import JointConfig, StaticData  # noqa: E402

CHANCE = {"arc": 0.25, "truthfulqa": 0.25, "sat12": 0.2}  # ARC 4-way; TruthfulQA MC1 (4+ choices, 0.25 an upper
# bound on its guessing rate); SAT12 5-way
HAS_CHANCE = "chance" in StaticData.__dataclass_fields__


def _summary(tab):
    cols = ["auroc", "auprc", "precision_at_k", "item_auroc", "item_precision_at_k"]
    g = tab.groupby("rate")[cols].mean()
    return {f"{r:g}": {c: round(float(g.loc[r, c]), 4) for c in cols} for r in g.index}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"))
    ap.add_argument("--sets", default="chembench,arc,gsm8k,truthfulqa,sat12,alpacaeval")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    bench_joint.DATA = Path(args.shared) / "data"
    seeds = tuple(range(args.seeds))
    for name in args.sets.split(","):
        S, A = bench_recovery.SETS[name]()
        cfg = JointConfig(mode="joint" if A is not None else "static")
        variants = [("2pl", S)]
        if name in CHANCE and HAS_CHANCE:
            variants.append(("guessing", replace(S, chance=np.full(S.shape[1], CHANCE[name]))))
        for label, data in variants:
            for target in ("static",) + (("arena",) if A is not None else ()):
                t, load0 = time.perf_counter(), os.getloadavg()[0]
                tab = contamination_experiment(data, A, cfg, target=target, seeds=seeds,
                                               detectors=("clean_reference",))
                print(json.dumps({"set": name, "target": target, "p_model": label, "shape": list(S.shape),
                                  "wall_s": round(time.perf_counter() - t, 1),
                                  "load": [round(load0, 2), round(os.getloadavg()[0], 2)], "by_rate": _summary(tab)}),
                      flush=True)
    if HAS_CHANCE:  # oracle bound on simulated four-way multiple choice
        from benchloupe.engine.anomaly import _n_inject, static_candidates, static_residuals
        from benchloupe.engine.stats import auroc

        rng = np.random.default_rng(0)
        c = 0.25
        theta, b, a = rng.normal(size=60), rng.normal(0.5, 1.2, 400), np.exp(rng.normal(0.4, 0.3, 400))
        p = c + (1 - c) / (1 + np.exp(-a * (theta[:, None] - b)))
        y = (rng.random(p.shape) < p).astype(float)
        S = StaticData(y, np.ones_like(y, bool), chance=np.full(400, c))
        cand, n_all = static_candidates(S), int(S.mask.sum())
        out = {}
        for rate in (0.005, 0.01, 0.02, 0.05):
            vals = []
            for seed in seeds:
                inj = np.random.default_rng(seed).choice(cand, _n_inject(rate, n_all, len(cand)), replace=False)
                yy = y.copy().ravel()
                yy[inj] = 1
                lab = np.zeros(yy.size, bool)
                lab[inj] = True
                vals.append(auroc(static_residuals(p, yy.reshape(y.shape), S.mask).ravel(), lab))
            out[f"{rate:g}"] = round(float(np.mean(vals)), 4)
        fitted = {}
        for label, data in (("guessing", S), ("2pl", replace(S, chance=None))):
            tab = contamination_experiment(data, None, JointConfig(mode="static"), seeds=seeds,
                                           detectors=("clean_reference",))
            fitted[label] = {f"{r:g}": round(float(v), 4) for r, v in tab.groupby("rate").auroc.mean().items()}
        print(json.dumps({"set": "simulated 4-way MC 60x400", "oracle_true_p_auroc": out, "fitted_auroc": fitted}))


if __name__ == "__main__":
    main()
