"""Full-benchmark accuracy from k items (issue 34): every selection x estimator, cross-validated over models on the
shared metabench ARC, GSM8K and TruthfulQA (Open LLM Leaderboard per-item 0/1), printed as JSON.

Per benchmark: a seeded subsample of ``--models`` models (the machine is shared; say so in the table), 5 folds over
them, the static 2PL fitted on the other folds (benchloupe.engine.estimate_validate), k = 10, 25, 50, 100 where the
benchmark has more items.  Beside benchloupe's estimators (mean, irt, pirt, gpirt: the engine's versions with a MAP
ability; ours: EAP p-IRT with the misfit-shrunk residual and the calibrated interval), tinyBenchmarks' three
estimators re-implemented here from their paper (Polo et al. 2024, "tinyBenchmarks: evaluating LLMs with fewer
examples", section 3) with their ability fit as in their released code (maximum likelihood on the seen items, no
prior; ours bounds it to the calibration grid):

* ``tb_irt``: the mean over all items of p_j(theta_hat);
* ``tb_pirt``: lambda * (mean of the seen responses) + (1 - lambda) * (mean of p_j(theta_hat) over the unseen items),
  lambda = k / N;
* ``tb_gpirt``: lambda' * (the selection's weighted mean: anchor cluster sizes) + (1 - lambda') * tb_pirt, lambda'
  chosen on the training models (tinyBenchmarks validates it on its training models; we take the grid value with
  the smallest mean absolute error there).

Their item model is a multidimensional IRT fitted with py-irt; ours is the frozen unidimensional 2PL of the fold,
the same for every estimator, so the comparison isolates the estimators and the selections.

The checks the issue asks for, per benchmark and k: ours on the curve subset against (a) the random subset's plain
mean, (b) 2PL + MAP ability from k random items (``irt`` on ``random``), (c) the compress default's targeted
subset's plain mean, (d) the best tinyBenchmarks estimator on their anchor points; and ours' coverage.

``--adaptive SE`` instead simulates computerized adaptive testing (``estimate --adaptive``) to that sd;
``--benchmarks sim`` runs the simulated study (:func:`simulated`) beside or instead of the real ones.

Usage: ``python bench/bench_estimate.py [--models 1500] [--max-test 200] [--ks 10,25,50,100] [--adaptive 0.01]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data" / "metabench"
FILES = {"arc": "arc-2PL-MAP-0.005-seed=1.responses.csv.gz", "gsm8k": "gsm8k-2PL-EAPsum-0.001-seed=1.responses.csv.gz",
         "truthfulqa": "truthfulqa-2PL-EAPsum-0.01-seed=1.responses.csv.gz"}


def simulated(models: int, seed: int = 0, n_items: int = 120) -> np.ndarray:
    """The simulated study: 3PL responses with a chance level of .25 and a person misfit (a second ability, sd .3
    around the first, on half the items), fitted as every benchmark here is (a 2PL without chance levels): the
    tails the 2PL misses (guesses on hard items) and the misfit of real models, with the truth known."""
    rng = np.random.default_rng(seed + 7)
    a, b = np.exp(rng.normal(0.2, 0.35, n_items)), rng.normal(0, 1.2, n_items)
    th = rng.normal(0, 1, models)
    th2 = np.where(np.arange(n_items)[None, :] < n_items // 2, th[:, None],
                   th[:, None] + 0.3 * rng.normal(size=(models, 1)))
    p = 0.25 + 0.75 / (1 + np.exp(-a * (th2 - b)))
    return (rng.random(p.shape) < p).astype(float)


def _mle_theta(cal, y, mask):
    """tinyBenchmarks' ability: maximum likelihood on the seen items (their code: BFGS on the log-likelihood, no
    prior); a prior 1,000 times wider than the population keeps all-correct patterns finite, then the grid bounds."""
    from dataclasses import replace

    from benchloupe.engine import estimate as E

    wide = replace(cal, theta_sd=cal.theta_sd * 1000, _p=None)
    return np.clip(E.map_theta(wide, y, mask, iterations=100), cal.grid[0], cal.grid[-1])


def _tb_parts(cal, y, mask):
    from benchloupe.engine import estimate as E

    th = _mle_theta(cal, y, mask)
    P = E.curves(th, cal.a, cal.b, cal.c)
    k = mask.sum(axis=1)
    lam = k / cal.n_items
    seen_mean = (y * mask).sum(axis=1) / k
    unseen_mean = (P * ~mask).sum(axis=1) / np.maximum(cal.n_items - k, 1)
    return P.mean(axis=1), lam * seen_mean + (1 - lam) * unseen_mean


def _weighted_mean(y, mask, w):
    if w is None:
        return (y * mask).sum(axis=1) / mask.sum(axis=1)
    return (y * mask * w[None, :]).sum(axis=1) / (mask * w[None, :]).sum(axis=1)


def tb_irt(cal, ytr, mtr, yte, mte, w):
    return _tb_parts(cal, yte, mte)[0]


def tb_pirt(cal, ytr, mtr, yte, mte, w):
    return _tb_parts(cal, yte, mte)[1]


def tb_gpirt(cal, ytr, mtr, yte, mte, w):
    from benchloupe.engine import estimate as E

    lam = E.gp_lambda(_weighted_mean(ytr, mtr, w), _tb_parts(cal, ytr, mtr)[1], ytr.mean(axis=1))
    return lam * _weighted_mean(yte, mte, w) + (1 - lam) * _tb_parts(cal, yte, mte)[1]


EXTRA = {"tb_irt": tb_irt, "tb_pirt": tb_pirt, "tb_gpirt": tb_gpirt}


def _checks(summary: pd.DataFrame, long: pd.DataFrame) -> list[dict]:
    out = []
    ours_long = long[(long["selection"] == "curve") & (long["estimator"] == "ours")]
    for k, g in summary.groupby("k"):
        cell = g.set_index(["selection", "estimator"])
        ours = cell.loc[("curve", "ours")]
        tb = g[(g["selection"] == "anchor") & g["estimator"].str.startswith("tb_")].sort_values("mae").iloc[0]
        row = {"k": int(k), "ours_curve_mae": float(ours["mae"]), "ours_curve_p90": float(ours["p90"]),
               "ours_curve_coverage": float(ours["coverage"]), "ours_curve_width": float(ours["width"]),
               "random_mean_mae": float(cell.loc[("random", "mean"), "mae"]),
               "random_2pl_map_mae": float(cell.loc[("random", "irt"), "mae"]),
               "targeted_mean_mae": float(cell.loc[("targeted", "mean"), "mae"]),
               "best_tinybenchmarks": f"{tb['estimator']} on anchor", "best_tinybenchmarks_mae": float(tb["mae"])}
        row["beats_baselines"] = row["ours_curve_mae"] < min(row["random_mean_mae"], row["random_2pl_map_mae"],
                                                             row["targeted_mean_mae"])
        row["vs_tinybenchmarks_points"] = round(row["ours_curve_mae"] - row["best_tinybenchmarks_mae"], 3)
        by_fold = ours_long[ours_long["k"] == k].groupby("fold")
        row["ours_curve_coverage_by_fold"] = [round(float(c), 3) for c in by_fold["covered"].mean()]
        row["ours_curve_mae_by_fold"] = [round(100 * float(e), 2) for e in by_fold["error"].mean()]
        best = g.sort_values("mae").iloc[0]
        row["best_overall"] = f"{best['estimator']} on {best['selection']} ({best['mae']:.2f})"
        out.append(row)
    return out


def adaptive(y: np.ndarray, target_se: float, seed: int = 0, max_test: int = 100) -> dict:
    """Computerized adaptive testing (``estimate --adaptive``) simulated over 5 folds: items needed for the target
    sd, the error and coverage reached, the error of as many random items, and the interval's stretch
    (:func:`~benchloupe.engine.estimate_validate.cat_scale`) and coverage in each fold."""
    from benchloupe.engine import estimate as E
    from benchloupe.engine import estimate_validate as ev

    rng = np.random.default_rng(seed)
    parts = np.array_split(rng.permutation(len(y)), 5)
    rows, stretch = [], []
    for test in parts:
        train = np.setdiff1d(np.arange(len(y)), test)
        test = np.sort(rng.choice(test, min(max_test, len(test)), replace=False))
        cal, _, _ = ev.fold_calibration(y[train], np.ones_like(y[train], bool), None)
        sc = ev.cat_scale(y[train], np.ones_like(y[train], bool), None, target_se=target_se, seed=seed)
        stretch.append(round(sc, 3))
        r = E.simulate_cat(cal, y[test], target_se=target_se, scale=sc)
        rnd = np.zeros((len(test), cal.n_items), bool)
        for i, k in enumerate(r.items):
            rnd[i, rng.choice(cal.n_items, int(k), replace=False)] = True
        e = E.estimate(cal, y[test], rnd)
        rows.append(pd.DataFrame({"fold": len(stretch), "items": r.items, "err": np.abs(r.accuracy - r.truth),
                                  "cov": (r.truth >= r.lo) & (r.truth <= r.hi), "rnd": np.abs(e.accuracy - r.truth)}))
    df = pd.concat(rows)
    return {"target_se": target_se, "models": len(df), "items_median": float(df["items"].median()),
            "items_p90": float(df["items"].quantile(0.9)), "mae_points": round(100 * df["err"].mean(), 2),
            "coverage": round(float(df["cov"].mean()), 3), "random_same_k_mae_points": round(100 * df["rnd"].mean(), 2),
            "stretch_by_fold": stretch, "coverage_by_fold": [round(float(c), 3) for c in df.groupby("fold")["cov"].mean()]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=1500, help="models per benchmark (seeded subsample)")
    ap.add_argument("--max-test", type=int, default=None, help="held-out models per fold at most")
    ap.add_argument("--ks", default="10,25,50,100")
    ap.add_argument("--benchmarks", default="arc,gsm8k,truthfulqa", help="and sim: the simulated study")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--adaptive", type=float, default=None, metavar="SE",
                    help="instead: simulate adaptive testing to this sd of the predicted accuracy")
    args = ap.parse_args(argv)
    from benchloupe.engine import estimate_validate as ev

    if not DATA.exists():
        print(json.dumps({"skipped": f"{DATA} is absent"}))
        return 0
    report = {"models_per_benchmark": args.models, "folds": 5, "seed": args.seed, "benchmarks": {}}
    for name in args.benchmarks.split(","):
        y = simulated(args.models, args.seed) if name == "sim" else \
            pd.read_csv(DATA / FILES[name], index_col=0).to_numpy(float)
        total = len(y)
        rows = np.random.default_rng(args.seed).permutation(total)[: args.models]
        y = y[np.sort(rows)]
        ks = [int(k) for k in args.ks.split(",") if int(k) < y.shape[1]]
        t0 = time.perf_counter()
        if args.adaptive is not None:
            report["benchmarks"][name] = {"shape": [total, y.shape[1]], "models_used": len(y),
                                          **adaptive(y, args.adaptive, args.seed),
                                          "seconds": round(time.perf_counter() - t0, 1)}
            continue
        long = ev.cross_validate(y, np.ones_like(y, bool), ks, seed=args.seed, max_test=args.max_test, extra=EXTRA)
        summary = ev.summarise(long)
        report["benchmarks"][name] = {"shape": [total, y.shape[1]], "models_used": len(y),
                                      "seconds": round(time.perf_counter() - t0, 1),
                                      "checks": _checks(summary, long), "table": summary.to_dict("records")}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
