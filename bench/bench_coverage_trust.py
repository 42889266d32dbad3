"""Issue 15 figures: coverage with diagnostics and uncertainty as a whole CLI process, leave-one-out speed, and
the simulation checks (gap-interval coverage, lattice / tail warnings, BIC model choice).

    python bench/bench_coverage_trust.py --speed     # CLI wall time, 12 x 41,871 and 200 x 14,000 (<= 3 s each)
    python bench/bench_coverage_trust.py --loo       # C.3 leave-one-out, 5,000 x 249 (<= 60 s)
    python bench/bench_coverage_trust.py --verify    # simulations where the truth is known
    python bench/bench_coverage_trust.py --real      # metabench GSM8K / ChemBench readouts (../shared/data)

Prints one JSON object. Timings are the best of ``--repeats`` runs; the load average is printed beside them
(the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchloupe.engine import coverage  # noqa: E402
from benchloupe.engine.coverage import robustness as rb  # noqa: E402
from benchloupe.engine.irt import fit_1pl  # noqa: E402

DATA = ROOT.parent / "shared" / "data"


def _sim(m, n, *, seed=0, missing=0.0, sd_b=1.0):
    rng = np.random.default_rng(seed)
    th = rng.normal(0, 1, m)
    b = rng.normal(0, sd_b, n)
    y = (rng.random((m, n)) < 1 / (1 + np.exp(-(th[:, None] - b)))).astype(np.int8)
    if missing:
        y[rng.random(y.shape) < missing] = -1
    return th, b, y


def _import(db, name, y):
    import pandas as pd

    from benchloupe.store.db import connect
    from benchloupe.store.importers.base import ParsedImport
    from benchloupe.store.writer import write_import

    conn = connect(db)
    try:
        write_import(conn, ParsedImport(name, "static", pd.DataFrame({"key": [f"i{j}" for j in range(y.shape[1])]}),
                                        pd.DataFrame({"name": [f"m{i}" for i in range(y.shape[0])]}), correct=y,
                                        source="bench"), fmt="bench")
    finally:
        conn.close()


def speed(repeats: int) -> dict:
    out = {}
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "s.db"
        cases = {"12x41871": _sim(12, 41871, seed=1)[2], "200x14000": _sim(200, 14000, seed=2, missing=0.02)[2]}
        for name, y in cases.items():
            _import(db, name, y)
        for name in cases:
            best, timings, cpus = float("inf"), None, []
            for _ in range(repeats):
                t0 = time.perf_counter()
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                r = subprocess.run([sys.executable, "-m", "benchloupe", "coverage", name, "--db", str(db), "--json"],
                                   capture_output=True, text=True, env=env, cwd=ROOT)
                wall = time.perf_counter() - t0
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus.append(round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 3))
                if r.returncode:
                    raise SystemExit(r.stderr)
                if wall < best:
                    best, timings = wall, json.loads(r.stdout)
            m = timings["metrics"]
            out[name] = {"cli_wall_s": round(best, 3), "cli_cpu_best_s": min(cpus), "cli_cpu_s": cpus,
                         "run_timings": timings["timings"],
                         "lattice": m.get("lattice"), "n_levels": m.get("n_levels"), "max_gap": m["max_gap"],
                         "max_gap_trusted": m["max_gap_trusted"], "diagnostics_passed": m["diagnostics_passed"],
                         "warnings": m["warnings"]}
    return out


def loo(repeats: int) -> dict:
    _, _, y = _sim(5000, 249, seed=3)
    yf = y.astype(float)
    t0 = time.perf_counter()
    fit = fit_1pl(yf)
    t_fit = time.perf_counter() - t0
    best, res = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = rb.leave_one_out(fit, yf)
        best = min(best, time.perf_counter() - t0)
    # accuracy of the one-step refits against exact refits for 20 of the 5,000 models
    exact = []
    for j in range(20):
        keep = np.ones(5000, bool)
        keep[j] = False
        exact.append(fit_1pl(yf[keep]).b)
    exact = np.array(exact)
    one_b = None
    ws = fit.laplace.w / np.sqrt(fit.laplace.h_theta)[:, None]
    s_full = np.diag(fit.laplace.h_b) - ws.T @ ws
    score = rb._score_matrix(fit.theta, fit.b, yf, np.ones_like(yf), fit.chance)
    one_b = np.array([fit.b + np.linalg.solve(
        s_full - np.diag(fit.laplace.w[j]) + np.outer(fit.laplace.w[j], fit.laplace.w[j]) / fit.laplace.h_theta[j],
        score[j]) for j in range(20)])
    return {"shape": [5000, 249], "fit_s": round(t_fit, 3), "loo_s": round(best, 3), "method": res.method,
            "summary": res.summary, "one_step_vs_exact_max_abs_b": float(np.abs(one_b - exact).max()),
            "exact_refit_b_change_max": float(np.abs(exact - fit.b).max())}


def _true_widths(b_true, loc_raw):
    z = np.sort((b_true - b_true.min()) / (b_true.max() - b_true.min()))
    loc = (loc_raw - b_true.min()) / (b_true.max() - b_true.min())
    pts = np.concatenate([[0.0], z, [1.0]])
    pos = np.clip(np.searchsorted(pts, loc, side="right"), 1, pts.size - 1)
    return np.where((loc >= 0) & (loc <= 1), pts[pos] - pts[pos - 1], 0.0)


def verify(reps: int) -> dict:
    out = {}
    # 1. C.6 interval coverage of each of the 20 widest gaps (true difficulties known), by gap class
    hits = {"gap": [0, 0], "tail": [0, 0], "all": [0, 0]}
    mg = []
    for r in range(reps):
        rng = np.random.default_rng(1000 + r)
        th, b = rng.normal(0, 1, 60), rng.normal(0, 1, 300)
        t = np.full((60, 300), 4)
        c = rng.binomial(t, 1 / (1 + np.exp(-(th[:, None] - b))))
        a = coverage.analyse(None, successes=c, trials=t, uncertainty=coverage.UncertaintyConfig(n_draws=500, seed=r))
        g = a.resolution.gaps.head(20)
        tw = _true_widths(b, coverage.gap_locations(a.report, 20))
        inside = ((g.ci_lo <= tw) & (tw <= g.ci_hi)).to_numpy()
        tail = g["tail"].to_numpy()
        for key, sel in (("gap", ~tail), ("tail", tail), ("all", np.ones(20, bool))):
            hits[key][0] += int(inside[sel].sum())
            hits[key][1] += int(sel.sum())
        zt = np.sort((b - b.min()) / (b.max() - b.min()))
        true_g = float(np.diff(np.concatenate([[0], zt, [1]])).max())
        mg.append((true_g, a.report.max_gap, a.uncertainty.max_gap_mean, a.resolution.max_gap_trusted,
                   a.resolution.max_gap_ci[0] <= true_g <= a.resolution.max_gap_ci[1]))
    mg = np.array(mg, float)
    out["gap_interval_coverage_95"] = {k: {"coverage": v[0] / max(v[1], 1), "n": v[1]} for k, v in hits.items()}
    out["max_gap_60x300x4"] = {"true_mean": mg[:, 0].mean(), "map_mean": mg[:, 1].mean(),
                               "posterior_mean": mg[:, 2].mean(), "trusted_mean": mg[:, 3].mean(),
                               "ci_covers_true": mg[:, 4].mean()}
    # 2. lattice warnings: raised exactly on the settings whose difficulties sit on few sum-score levels
    settings = {"12x3000 one rollout": (12, 3000, 1, 0.0, True), "30x3000 2% missing": (30, 3000, 1, 0.02, True),
                "200x14000 2% missing": (200, 14000, 1, 0.02, True), "60x200 8 rollouts": (60, 200, 8, 0.0, False),
                "800x150 one rollout": (800, 150, 1, 0.0, False), "5000x249 one rollout": (5000, 249, 1, 0.0, False)}
    lat = {}
    for name, (m, n, k, miss, expect) in settings.items():
        rng = np.random.default_rng(hash(name) % 2**32)
        th, b = rng.normal(0, 1, m), rng.normal(0, 1, n)
        t = np.where(rng.random((m, n)) < miss, 0, k)
        c = rng.binomial(t, 1 / (1 + np.exp(-(th[:, None] - b))))
        a = coverage.analyse(None, successes=c, trials=t)
        la = a.resolution.lattice
        warned = any(w.startswith("lattice:") for w in a.resolution.warnings)
        lat[name] = {"expected": expect, "warned": warned, "n_levels": la.n_levels,
                     "sum_score_levels": la.sum_score_levels, "max_gap": a.report.max_gap,
                     "max_gap_below_resolution": bool(a.resolution.gaps.below_resolution.iloc[0])}
    out["lattice_warnings"] = lat
    # 3. tail warnings: hard items beyond the abilities vs items inside the ability range
    tails = {}
    for name, sd_b, expect in (("b ~ N(0, 2), theta ~ N(0, 0.5)", 2.0, True), ("b ~ U(-1, 1), theta ~ N(0, 1.5)",
                                                                                None, False)):
        rng = np.random.default_rng(7)
        th = rng.normal(0, 0.5 if sd_b else 1.5, 200)
        b = rng.normal(0, sd_b, 400) if sd_b else rng.uniform(-1, 1, 400)
        t = np.full((200, 400), 4)
        c = rng.binomial(t, 1 / (1 + np.exp(-(th[:, None] - b))))
        a = coverage.analyse(None, successes=c, trials=t)
        tails[name] = {"expected": expect, "warned": any(w.startswith("tail:") for w in a.resolution.warnings),
                       "widest_gap_is_tail": bool(a.resolution.gaps["tail"].iloc[0]),
                       "ability_range": [a.resolution.ability_lo, a.resolution.ability_hi]}
    out["tail_warnings"] = tails
    # 4. BIC picks the generating model
    rng = np.random.default_rng(11)

    def sim(m, n, a, dims):
        th = rng.normal(0, 1, (m, dims))
        b = rng.normal(0, 1, n)
        return (rng.random((m, n)) < 1 / (1 + np.exp(-(th @ a.T - b)))).astype(float)

    a2 = np.zeros((300, 2))
    a2[:150, 0] = a2[150:, 1] = 2.0
    cases = {"1pl": sim(1000, 40, np.ones((40, 1)), 1), "2pl": sim(1000, 40, np.exp(rng.normal(0, 0.7, (40, 1))), 1),
             "mirt2": sim(300, 300, a2, 2)}
    out["bic"] = {k: {"selected": (cm := rb.compare_models(y)).selected,
                      "delta_bic": dict(zip(cm.table.model, np.round(cm.table.delta_bic, 1), strict=True))}
                  for k, y in cases.items()}
    return out


def _chembench():
    import pandas as pd

    m = pd.read_csv(DATA / "chembench" / "matrix_models_all_correct.csv.gz", index_col=0).drop(index="random_baseline")
    q = pd.read_csv(DATA / "chembench" / "questions.csv.gz").set_index("key")

    def chance(scores):
        if not isinstance(scores, str):
            return 0.0
        vals = list(json.loads(scores).values())
        return 1.0 / len(vals) if sum(v == 1 for v in vals) == 1 else 0.0

    return m.to_numpy(float), q["target_scores"].reindex(m.columns).map(chance).fillna(0.0).to_numpy()


def real() -> dict:
    import pandas as pd

    if not DATA.exists():
        return {"skipped": f"no {DATA}"}
    out = {}
    sets = {"ChemBench 31 x 2854": _chembench()}
    for name, g in (("gsm8k", 0.0), ("arc", 0.25), ("truthfulqa", 0.0)):
        path = next((DATA / "metabench").glob(f"{name}-*.responses.csv.gz"))
        sets[f"metabench {name}"] = (pd.read_csv(path, index_col=0).to_numpy(float), g)
    for name, (y, g) in sets.items():
        t0 = time.perf_counter()
        a = coverage.analyse(y, chance=g, uncertainty=coverage.UncertaintyConfig(n_draws=1000))
        t_cov = time.perf_counter() - t0
        res = a.resolution
        lat = res.lattice
        top = res.gaps.head(5)
        rec = {"shape": list(y.shape), "ddm": a.report.ddm, "max_gap": a.report.max_gap,
               "max_gap_ci": res.max_gap_ci, "max_gap_trusted": res.max_gap_trusted,
               "ability_range": [res.ability_lo, res.ability_hi], "lattice": lat.present, "n_levels": lat.n_levels,
               "sum_score_levels": lat.sum_score_levels, "ddm_floor": lat.ddm_floor,
               "max_gap_floor": lat.max_gap_floor, "b2_bound": res.b2_bound,
               "top5_status": list(top["status"]), "top5_ci": [[round(x, 4), round(z, 4)] for x, z in
                                                              zip(top.ci_lo, top.ci_hi, strict=True)],
               "warnings": res.warnings, "coverage_s": round(t_cov, 2)}
        t0 = time.perf_counter()
        loo_res = rb.leave_one_out(a.fit, y, chance=g)
        rec["loo"] = {**loo_res.summary, "seconds": round(time.perf_counter() - t0, 2)}
        t0 = time.perf_counter()
        cm = rb.compare_models(y, chance=g)
        rec["bic"] = {**cm.summary, "delta_bic": dict(zip(cm.table.model, np.round(cm.table.delta_bic, 1),
                                                          strict=True)), "seconds": round(time.perf_counter() - t0, 2)}
        ps = rb.prior_sensitivity(a.fit, y, chance=g)
        rec["priors"] = ps.table.round(4).to_dict("records")
        out[name] = rec
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--speed", action="store_true")
    p.add_argument("--loo", action="store_true")
    p.add_argument("--verify", action="store_true")
    p.add_argument("--real", action="store_true")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--reps", type=int, default=30)
    a = p.parse_args()
    res = {"load_average": os.getloadavg()}
    if a.speed:
        res["speed"] = speed(a.repeats)
    if a.loo:
        res["loo"] = loo(a.repeats)
    if a.verify:
        res["verify"] = verify(a.reps)
    if a.real:
        res["real"] = real()
    res["load_average_after"] = os.getloadavg()
    print(json.dumps(res, indent=1, default=float))


if __name__ == "__main__":
    main()
