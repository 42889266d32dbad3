"""Subset recovery on every real set in ../shared/data (issue 14, "compression that beats random"): Spearman of the
frozen-item ability refit with the full-data ranking for the targeted selection, top Fisher and the paper's other
strategies, beside random selection with 2.5-97.5 % intervals over ``--draws`` random subsets.  Prints JSON.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_recovery.py [--shared ../shared] [--sets chembench,arc]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_joint  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchloupe.engine.informativeness import subset_recovery, summarise_recovery  # noqa: E402
from benchloupe.engine.joint import JointConfig, StaticData, fit_joint  # noqa: E402

FRACTIONS = (0.025, 0.05, 0.10, 0.20, 0.30, 0.50, 0.80)


def metabench(name: str) -> StaticData:
    path = next((bench_joint.DATA / "metabench").glob(f"{name}-*.responses.csv.gz"))
    y = pd.read_csv(path, index_col=0).to_numpy(float)
    if y.shape[0] < y.shape[1]:
        y = y.T
    return StaticData(np.nan_to_num(y), np.isfinite(y))


def sat12() -> StaticData:
    df = pd.read_csv(bench_joint.DATA / "classic_irt" / "SAT12_scored.csv")
    y = df.drop(columns=["person", "Person"], errors="ignore").select_dtypes("number").to_numpy(float)
    return StaticData(np.nan_to_num(y), np.isfinite(y))


SETS = {
    "chembench": lambda: (bench_joint.chembench(), None),
    "arc": lambda: (metabench("arc"), None),
    "gsm8k": lambda: (metabench("gsm8k"), None),
    "truthfulqa": lambda: (metabench("truthfulqa"), None),
    "alpacaeval": lambda: bench_joint.alpacaeval()[:2],
    "sat12": lambda: (sat12(), None),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(ROOT.parent / "shared"))
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--strategies", default="targeted,targeted_log,top_fisher,top_sharpness,difficulty_matched,random")
    args = ap.parse_args()
    bench_joint.DATA = Path(args.shared) / "data"
    out = []
    for name in args.sets.split(","):
        S, A = SETS[name]()
        cfg = JointConfig(mode="joint" if A is not None else "static")
        load0 = os.getloadavg()[0]
        t = time.perf_counter()
        res = fit_joint(S, A, cfg)
        tab = subset_recovery(res, S, A, cfg, fractions=FRACTIONS, strategies=tuple(args.strategies.split(",")),
                              seeds=tuple(range(args.draws)))
        summ = summarise_recovery(tab)
        piv = summ.pivot(index="fraction", columns="strategy", values="spearman_mean")
        rnd = summ[summ.strategy == "random"].set_index("fraction")
        rows = {f"{f:g}": {**{s: round(float(piv.loc[f, s]), 4) for s in piv.columns},
                           "random_lo": round(float(rnd.loc[f, "spearman_lo"]), 4),
                           "random_hi": round(float(rnd.loc[f, "spearman_hi"]), 4)} for f in piv.index}
        worst = float((piv["targeted"] - piv["random"]).min()) if "targeted" in piv else None
        out.append({"set": name, "shape": [int(v) for v in S.shape] + ([int(A.shape[1])] if A is not None else []),
                    "wall_s": round(time.perf_counter() - t, 1), "load": [round(load0, 2),
                                                                          round(os.getloadavg()[0], 2)],
                    "targeted_minus_random_min": None if worst is None else round(worst, 4), "curves": rows})
        print(json.dumps(out[-1]), flush=True)


if __name__ == "__main__":
    main()
