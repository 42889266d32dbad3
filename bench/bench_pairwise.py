"""Bradley-Terry on pairwise battles: benchloupe.engine.pairwise vs evalica, same data, same run (issue 12).

1 M battles among 130 models drawn from a Bradley-Terry model plus 10 % ties; both fits start from the
model *names* of each battle (what an importer hands over), so both pay for indexing. Best of ``--repeats``.
Target: ours within 2x of evalica's ``bradley_terry``. Also: agreement of the two fits (max |delta theta|
after centring log-strengths), recovery of the true strengths (1 M battles without ties), and a 200-replicate bootstrap's time
and 95 % interval coverage of the truth (50 k of those battles). Prints JSON with the load average.
Usage: ``python bench/bench_pairwise.py [--battles 1000000 --models 130 --repeats 3]``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI does; small solves thrash with threads

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchloupe.engine.pairwise import PairwiseData, fit_bt  # noqa: E402


def simulate(n_battles: int, n_models: int, seed: int = 0, ties: float = 0.1):
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_models)
    theta -= theta.mean()
    a = rng.integers(0, n_models, n_battles)
    b = rng.integers(0, n_models - 1, n_battles)
    b = b + (b >= a)
    pa = 1 / (1 + np.exp(-(theta[a] - theta[b])))
    u = rng.random(n_battles)
    p = np.where(u < ties, 0.5, (rng.random(n_battles) < pa).astype(float))
    names = np.array([f"model-{i:03d}" for i in range(n_models)], dtype=object)
    return theta, names[a], names[b], p


def ours(xs, ys, p, alpha=0.0):
    codes, uniques = pd.factorize(np.concatenate([xs, ys]))
    n = len(xs)
    return fit_bt(PairwiseData(codes[:n], codes[n:], p, len(uniques)), alpha=alpha), list(uniques)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--battles", type=int, default=1_000_000)
    ap.add_argument("--models", type=int, default=130)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import evalica

    theta, xs, ys, p = simulate(args.battles, args.models)
    winners = np.where(p == 1, evalica.Winner.X, np.where(p == 0, evalica.Winner.Y, evalica.Winner.Draw))
    xl, yl, wl = list(xs), list(ys), list(winners)
    t_ours, t_ev = [], []
    for _ in range(args.repeats):
        t = time.perf_counter()
        res, names = ours(xs, ys, p)
        t_ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        ev = evalica.bradley_terry(xl, yl, wl)
        t_ev.append(time.perf_counter() - t)
    order = [int(n.split("-")[1]) for n in names]
    mine = np.empty(args.models)
    mine[order] = res.theta
    ev_theta = np.log(ev.scores.reindex([f"model-{i:03d}" for i in range(args.models)]).to_numpy())
    ev_theta -= ev_theta.mean()
    # Recovery and interval coverage need data from the Bradley-Terry model itself: no ties (random ties
    # pull every strength towards 0).
    theta, xs, ys, p = simulate(args.battles, args.models, seed=2, ties=0.0)
    full, names = ours(xs, ys, p)
    recovered = np.empty(args.models)
    recovered[[int(n.split("-")[1]) for n in names]] = full.theta
    t = time.perf_counter()
    sub = 50_000
    boot = fit_bt(PairwiseData(*_codes(xs[:sub], ys[:sub]), p[:sub], args.models), bootstrap=200, seed=1)
    t_boot = time.perf_counter() - t
    order_b = [int(n.split("-")[1]) for n in _codes(xs[:sub], ys[:sub], names_only=True)]
    lo, hi = np.empty(args.models), np.empty(args.models)
    lo[order_b], hi[order_b] = boot.lo, boot.hi
    print(json.dumps({
        "battles": args.battles, "models": args.models, "load_avg_1m": round(os.getloadavg()[0], 2),
        "ours_s": round(min(t_ours), 4), "evalica_s": round(min(t_ev), 4),
        "ratio_ours_over_evalica": round(min(t_ours) / min(t_ev), 3),
        "ours_iterations": res.iterations, "evalica_iterations": int(ev.iterations),
        "max_abs_diff_vs_evalica": float(np.abs(mine - ev_theta).max()),
        "max_abs_error_vs_truth_no_ties": float(np.abs(recovered - theta).max()),
        "bootstrap_200_on_50k_s": round(t_boot, 3),
        "bootstrap_95_coverage_of_truth": float(((lo <= theta) & (theta <= hi)).mean()),
    }, indent=1))


def _codes(xs, ys, names_only: bool = False):
    codes, uniques = pd.factorize(np.concatenate([xs, ys]))
    if names_only:
        return list(uniques)
    return codes[: len(xs)], codes[len(xs):]


if __name__ == "__main__":
    main()
