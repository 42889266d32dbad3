"""C.6 coverage uncertainty draws: 1,000 Laplace draws of the 1PL difficulties on 12 x 41,871 (issue 16 figure:
"coverage with 1,000 uncertainty draws on 12 x 41,871: <= 2 s").  Prints JSON.

Simulated 1PL (``bench_coverage_trust._sim``, seed 1).  Timed, best of ``--repeats``, with the 1-minute load average
before and after: ``metric_uncertainty`` alone (the draws: sampling, per-draw sort, DDM / max gap / top-k, the 20
tracked gap locations), and the whole ``coverage.analyse`` with the draws (fit, report, diagnostics, lattice and
readout included).  ``max_values`` is raised so that all 1,000 draws are made (the default cap of 20 M values would
make 477 on 41,871 items).  Usage: python bench/bench_coverage_draws.py [--repeats 3] [--draws 1000]
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

from bench_coverage_trust import _sim  # noqa: E402

from benchloupe.engine import coverage  # noqa: E402
from benchloupe.engine.coverage import resolution  # noqa: E402
from benchloupe.engine.irt import fit_1pl  # noqa: E402


def load() -> float:
    return round(os.getloadavg()[0], 2)


def best_of(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(round(time.perf_counter() - t0, 3))
    return min(times), times, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--draws", type=int, default=1000)
    args = ap.parse_args()
    _, _, y = _sim(12, 41871, seed=1)
    yf = y.astype(float)
    cfg = coverage.UncertaintyConfig(n_draws=args.draws, max_values=args.draws * y.shape[1])
    fit = fit_1pl(yf)
    report = coverage.coverage_report(fit.b)
    locs = resolution.gap_locations(report, min(20, len(report.gaps)))
    out = {"shape": list(y.shape), "draws": args.draws}
    before = load()
    best, runs, unc = best_of(lambda: coverage.metric_uncertainty(fit, config=cfg, correct=yf, locations=locs),
                              args.repeats)
    out["metric_uncertainty"] = {"best_s": best, "runs_s": runs, "load": [before, load()],
                                 "n_draws_made": len(unc.draws), "max_gap_ci": list(unc.max_gap_ci),
                                 "ddm_mean": unc.ddm_mean, "max_gap_mean": unc.max_gap_mean}
    before = load()
    best, runs, a = best_of(lambda: coverage.analyse(yf, uncertainty=cfg), args.repeats)
    out["analyse_with_draws"] = {"best_s": best, "runs_s": runs, "load": [before, load()],
                                 "n_draws_made": len(a.uncertainty.draws)}
    print(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
