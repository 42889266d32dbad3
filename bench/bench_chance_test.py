"""The chance test's false-warning rate and power (issue 32), and its verdict on the shared multiple-choice sets.

Simulated benchmarks (models x items, abilities N(0, 1), b ~ N(0, 1), log a ~ N(.2, .3)) with a known lower
asymptote, stated at .25: true .25 gives the false-warning rate, true .12 (and .20, .0) the power of
:func:`benchloupe.engine.irt.asymptote.chance_lr_test` (warns at p < .001 with the estimate at least .03 away),
beside the old floor rule (:func:`~benchloupe.engine.irt.asymptote.check_chance`, which fired only far below the
stated value).  Then every shared multiple-choice set (``--shared``) with its stated 1/choices: the empirical
floor, the estimate, the log-likelihood gain, and whether each rule warns.  Prints one JSON line per condition.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/bench_chance_test.py [--reps 50] [--shared ../shared]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

from benchloupe.engine.irt.asymptote import chance_lr_test, check_chance, empirical_floor

sys.path.insert(0, str(Path(__file__).resolve().parent))


def simulate(c: float, n_models: int, n_items: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_models)
    b, a = rng.normal(0, 1, n_items), np.exp(rng.normal(0.2, 0.3, n_items))
    p = c + (1 - c) * expit(a * (theta[:, None] - b))
    return (rng.random(p.shape) < p).astype(np.int8)


def wilson(k: int, n: int) -> list[float]:
    if n == 0:
        return [float("nan"), float("nan")]
    z, ph = 1.959964, k / n
    mid, half = (ph + z * z / (2 * n)) / (1 + z * z / n), z * np.sqrt(ph * (1 - ph) / n + z * z / (4 * n * n)) / (
        1 + z * z / n)
    return [round(mid - half, 4), round(mid + half, 4)]


def simulated(reps: int) -> None:
    for n_models, n_items in ((300, 60), (2000, 200)):
        for true in (0.25, 0.20, 0.12, 0.0):
            lr = floor_rule = 0
            est, secs = [], []
            for r in range(reps):
                y = simulate(true, n_models, n_items, seed=1000 * r + int(true * 100) + n_models)
                k = np.ones_like(y)
                t0 = time.perf_counter()
                t = chance_lr_test(y, k, 0.25)
                secs.append(time.perf_counter() - t0)
                lr += bool(t.rejected)
                est.append(t.estimate)
                floor_rule += check_chance(empirical_floor(y, k, chance=0.25)) is not None
            print(json.dumps({"models": n_models, "items": n_items, "true_c": true, "stated": 0.25, "reps": reps,
                              "lr_warns": lr / reps, "lr_warns_ci95": wilson(lr, reps),
                              "old_floor_rule_warns": floor_rule / reps, "mean_estimate": round(float(np.mean(est)), 4),
                              "median_s": round(float(np.median(secs)), 3)}), flush=True)


def shared(root: Path) -> None:
    import tempfile

    from bench_mcq import chance_file

    data = root / "data"
    mats = {"arc": lambda: pd.read_csv(next((data / "metabench").glob("arc-*.responses.csv.gz")), index_col=0),
            "truthfulqa": lambda: pd.read_csv(next((data / "metabench").glob("truthfulqa-*.responses.csv.gz")),
                                              index_col=0),
            "sat12": lambda: pd.read_csv(data / "classic_irt" / "SAT12_scored.csv").drop(columns=["person"]),
            "chembench": lambda: pd.read_csv(data / "chembench" / "matrix_models_all_correct.csv.gz", index_col=0)}
    with tempfile.TemporaryDirectory() as tmp:
        for name, load in mats.items():
            m = load()
            m.columns = m.columns.astype(str)
            ch = pd.read_csv(chance_file(name, data, Path(tmp)), dtype={"key": str}).set_index("key")["chance"]
            stated = ch.reindex(m.columns).fillna(0.0).to_numpy(float)
            vals = m.to_numpy(float)
            k = np.isfinite(vals).astype(np.int8)
            y = np.where(k > 0, np.nan_to_num(vals), 0).round().astype(np.int8)
            fl = empirical_floor(y, k, chance=stated)
            t0 = time.perf_counter()
            t = chance_lr_test(y, k, stated)
            print(json.dumps({"set": name, "shape": list(m.shape), "stated": round(t.stated, 4),
                              "empirical_floor": round(fl.floor, 4), "estimate": round(t.estimate, 4),
                              "ci95": [round(v, 4) for v in t.ci], "loglik_gain": round(t.gain, 1),
                              "p": float(f"{t.p_value:.3g}"), "tested_cells": [t.n_models, t.n_items],
                              "lr_warns": t.rejected, "old_floor_rule_warns": check_chance(fl) is not None,
                              "seconds": round(time.perf_counter() - t0, 2)}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--shared", type=Path, default=None, help="the shared folder (its data/): the real sets too")
    args = ap.parse_args()
    if args.reps > 0:  # --reps 0: the shared sets only
        simulated(args.reps)
    if args.shared:
        shared(args.shared)


if __name__ == "__main__":
    main()
