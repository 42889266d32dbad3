"""Broken items, measured (issue 33): power and false-discovery rate of `audit items` over simulated benchmarks
with planted mis-keyed, dead, saturated and duplicate items; the classic data sets; and peers re-implemented
from their descriptions (never their code): metabench's pre-screen (|point-biserial| < .05, too easy, low
variance) and an itemwise-style backwards test (point-biserial < 0 by permutation, BH), both on 0/1 data.

Simulation (each benchmark its own seed from SeedSequence(seed).spawn): M models with theta ~ N(0, 1), N items
with a ~ U(0.8, 2), b ~ N(0, 1), 4 options, chance .25: a model answers right with 0.25 + 0.75 sigmoid(a(theta -
b)), else picks one of the 3 distractors at random. Planted: 3 mis-keyed items (a good item, a = 2, b ~ U(-1, 0),
whose key is moved to one of its distractors), 2 dead (nobody right), 2 saturated (everybody right), 2 near-
duplicate texts (an item's text with one word changed). Texts are random 40-word passages.

    nice python bench/bench_items.py --benchmarks 200          # JSON on stdout, a table on stderr
    nice python bench/bench_items.py --speed 1000 2000         # audit items vs fit static, whole processes
    nice python bench/bench_items.py --speed 5000 14000 --workdir /tmp/x   # the issue's size, workspace kept
    nice python bench/bench_items.py --misfit --benchmarks 20 --models 2000   # misfit rules: power, FDR
    nice python bench/bench_items.py --leaderboard             # real ARC and TruthfulQA: flags by reason
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # small matrices: threads only contend
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402 - after the thread settings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchloupe.engine.itemhealth import ItemAuditConfig, ItemAuditInputs, run_item_audit  # noqa: E402
from benchloupe.engine.itemhealth import association as assoc  # noqa: E402

WORDS = ("alpha beta gamma delta river stone cloud light metal glass water fire earth wind number prime square "
         "circle atom cell gene wave field force mass energy speed time space mind logic proof rule law").split()
TESTED = ("miskeyed", "ambiguous", "backwards", "misfit")


def simulate(rng: np.random.Generator, m: int, n: int):
    theta = rng.normal(size=m)
    a, b = rng.uniform(0.8, 2.0, n), rng.normal(0, 1, n)
    mis, dead, sat, dup = [0, 1, 2], [3, 4], [5, 6], [n - 2, n - 1]  # copies come after their sources
    a[mis], b[mis] = 2.0, rng.uniform(-1, 0, 3)
    p = 0.25 + 0.75 / (1 + np.exp(-a * (theta[:, None] - b)))
    right = rng.random((m, n)) < p
    key = rng.integers(0, 4, n)
    options = np.where(right, key, (key + rng.integers(1, 4, (m, n))) % 4)
    for j in dead:
        options[:, j] = (key[j] + 1 + rng.integers(0, 3, m)) % 4
    for j in sat:
        options[:, j] = key[j]
    true_key = key.copy()
    key[mis] = (key[mis] + 1) % 4
    y = (options == key).astype(float)
    texts = [" ".join(rng.choice(WORDS, 40)) for _ in range(n)]
    for j, src in zip(dup, (20, 21), strict=True):
        words = texts[src].split()
        words[rng.integers(0, 40)] = "changed"
        texts[j] = " ".join(words)
    truth = {"miskeyed": mis, "dead": dead, "solved": sat, "duplicate": dup}
    return y, options, key, true_key, texts, truth


def metabench_prescreen(y: np.ndarray) -> np.ndarray:
    """metabench (Kipnis et al. 2024) pre-screen as described: drop items with |point-biserial| < .05 (with the
    rest score), items answered right by > 95 % (too easy), and items of low variance (sd < .01)."""
    rest = assoc.rest_means(y)
    r = assoc.point_biserial(y, rest)
    p = np.nanmean(y, 0)
    return (np.nan_to_num(np.abs(r), nan=0) < .05) | (p > .95) | (np.nanstd(y, 0) < .01)


def itemwise_backwards(y: np.ndarray, rng, alpha: float = .05, n_perm: int = 199) -> np.ndarray:
    """An itemwise-style test: point-biserial with the rest score below 0 by permutation, BH at *alpha*."""
    rest = assoc.rest_means(y)
    p, _ = assoc.permutation_pvalues(y, rest, alternative="less", n_perm=n_perm, rng=rng)
    return np.nan_to_num(assoc.bh_qvalues(p), nan=2) <= alpha


def study(n_bench: int, m: int, n: int, n_perm: int, seed: int) -> dict:
    found = {k: 0 for k in ("miskeyed", "miskeyed_key", "dead", "solved", "duplicate", "backwards_binary",
                            "metabench_miskeyed", "itemwise_miskeyed")}
    fdp_opt, fdp_bin, fdp_fit, fdp_itemwise, fdp_metabench, fp_dup = [], [], [], [], [], 0
    planted = {"miskeyed": 0, "dead": 0, "solved": 0, "duplicate": 0}
    for child in np.random.SeedSequence(seed).spawn(n_bench):
        rng = np.random.default_rng(child)
        y, options, key, true_key, texts, truth = simulate(rng, m, n)
        cfg = ItemAuditConfig(n_perm=n_perm, seed=int(rng.integers(1 << 30)))
        res = run_item_audit(ItemAuditInputs(y, np.full(n, .25), options, key, np.full(n, 4), texts=texts), cfg)
        reasons = {f["item"]: set(f["reasons"]) for f in res.flags}
        for k in planted:
            planted[k] += len(truth[k])
        bad = set().union(*truth.values())
        key_flags = {j for j, r in reasons.items() if r & {"miskeyed", "ambiguous", "backwards"}}
        found["miskeyed"] += len(key_flags & set(truth["miskeyed"]))
        found["miskeyed_key"] += sum(1 for j in truth["miskeyed"] if res.table["suggested"][j] == true_key[j])
        for k in ("dead", "solved", "duplicate"):
            found[k] += sum(1 for j in truth[k] if k in reasons.get(j, ()))
        fp_dup += sum(1 for j, r in reasons.items() if "duplicate" in r and j not in truth["duplicate"])
        fdp_opt.append(len(key_flags - set(truth["miskeyed"])) / max(len(key_flags), 1))
        fit_flags = {j for j, r in reasons.items() if "misfit" in r}
        fdp_fit.append(len(fit_flags - bad) / max(len(fit_flags), 1))
        # the same benchmark as 0/1 only: the backwards test alone
        res_b = run_item_audit(ItemAuditInputs(y, np.full(n, .25)), ItemAuditConfig(n_perm=n_perm, sx2=False,
                                                                                      seed=cfg.seed))
        back = {f["item"] for f in res_b.flags if "backwards" in f["reasons"]}
        found["backwards_binary"] += len(back & set(truth["miskeyed"]))
        fdp_bin.append(len(back - set(truth["miskeyed"])) / max(len(back), 1))
        iw = set(np.flatnonzero(itemwise_backwards(y, rng, n_perm=n_perm)))
        found["itemwise_miskeyed"] += len(iw & set(truth["miskeyed"]))
        fdp_itemwise.append(len(iw - set(truth["miskeyed"])) / max(len(iw), 1))
        mb = set(np.flatnonzero(metabench_prescreen(y)))
        found["metabench_miskeyed"] += len(mb & set(truth["miskeyed"]))
        fdp_metabench.append(len(mb - bad) / max(len(mb), 1))

    def se(v):
        return float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan")

    return {
        "benchmarks": n_bench, "models": m, "items": n, "n_perm": n_perm, "seed": seed, "planted": planted,
        "power": {"miskeyed_with_options": found["miskeyed"] / planted["miskeyed"],
                  "suggested_true_key": found["miskeyed_key"] / planted["miskeyed"],
                  "backwards_01_only": found["backwards_binary"] / planted["miskeyed"],
                  "dead": found["dead"] / planted["dead"], "solved": found["solved"] / planted["solved"],
                  "duplicate": found["duplicate"] / planted["duplicate"],
                  "itemwise_style_backwards": found["itemwise_miskeyed"] / planted["miskeyed"],
                  "metabench_prescreen_miskeyed": found["metabench_miskeyed"] / planted["miskeyed"]},
        "fdr": {"key_tests_with_options": [float(np.mean(fdp_opt)), se(fdp_opt)],
                "backwards_01_only": [float(np.mean(fdp_bin)), se(fdp_bin)],
                "misfit": [float(np.mean(fdp_fit)), se(fdp_fit)],
                "itemwise_style_backwards": [float(np.mean(fdp_itemwise)), se(fdp_itemwise)],
                "metabench_prescreen_clean_items": [float(np.mean(fdp_metabench)), se(fdp_metabench)]},
        "false_duplicates": fp_dup,
    }


def classic(n_perm: int) -> dict:
    import pandas as pd

    base = ROOT / ".." / "shared" / "data" / "classic_irt"
    out = {}
    if not base.exists():
        return {"skipped": f"{base} absent"}
    for name in ("LSAT6", "LSAT7"):
        y = pd.read_csv(base / f"{name}_expanded.csv").to_numpy(float)
        res = run_item_audit(ItemAuditInputs(y, np.full(5, np.nan)), ItemAuditConfig(n_perm=n_perm))
        out[name] = {"flags": len(res.flags), "min_q_backwards": float(np.nanmin(res.table["q_backwards"])),
                     "min_q_misfit": float(np.nanmin(res.table["sx2_q"]))}
    key = np.array([1, 4, 5, 2, 3, 1, 2, 1, 3, 1, 2, 4, 2, 1, 5, 3, 4, 4, 1, 4, 3, 3, 4, 1, 3, 5, 1, 3, 1, 5, 4, 5])
    raw = pd.read_csv(base / "SAT12_raw.csv").iloc[:, 1:].to_numpy()
    y = np.where(raw == 8, np.nan, (raw == key).astype(float))
    res = run_item_audit(ItemAuditInputs(y, np.zeros(32), np.where(raw == 8, -1, raw - 1), key - 1, np.full(32, 5)),
                         ItemAuditConfig(n_perm=n_perm))
    t = res.table
    out["SAT12"] = {"flagged": [f"Item.{f['item'] + 1}: {','.join(f['reasons'])}" for f in res.flags],
                    "item32": {"q_miskey": float(t["q_miskey"][31]), "suggested_key": int(t["suggested"][31]) + 1,
                               "top_share": float(t["top_share"][31]), "key_share": float(t["key_share"][31]),
                               "r_rest": float(t["r_rest"][31]),
                               "slope": [float(t["slope"][31]), float(t["slope_lo"][31]), float(t["slope_hi"][31])]}}
    return out


MISFIT_RULES = {"BH q <= .05": 0.0, "+ RMSEA > .03": 0.03, "+ RMSEA > .05": 0.05, "+ RMSEA > .08": 0.08,
                "+ RMSEA > .10": 0.10}


def misfit_simulate(rng: np.random.Generator, m: int, n: int, latent: str):
    """0/1 responses with chance .25 and 6 planted misfitting items of the shapes seen on leaderboards: 3 with a
    give-away (lower asymptote .6 where the key says .25) and 3 non-monotone (strong models talk themselves out of
    the answer: the success curve peaks at b and falls to .3 above it). Abilities normal, or bimodal (60 % around
    -0.8, 40 % around 1.2, sd .5: base models and their fine-tunes)."""
    if latent == "normal":
        theta = rng.normal(size=m)
    else:
        theta = np.where(rng.random(m) < .6, rng.normal(-.8, .5, m), rng.normal(1.2, .5, m))
    a, b = rng.uniform(0.8, 2.0, n), rng.normal(size=n)
    s = 1 / (1 + np.exp(-a * (theta[:, None] - b)))
    p = 0.25 + 0.75 * s
    planted = np.zeros(n, bool)
    planted[:6] = True
    p[:, :3] = 0.6 + 0.4 * s[:, :3]
    bump = np.exp(-np.maximum(theta[:, None] - b[3:6], 0) ** 2 / 0.5)
    p[:, 3:6] = 0.3 + (p[:, 3:6] - 0.3) * bump
    return (rng.random((m, n)) < p).astype(float), planted


def misfit_study(n_bench: int, m: int, n: int, seed: int) -> dict:
    """Power and false-discovery rate of each candidate misfit rule (S-X2 with BH q, and an RMSEA floor), on
    normal and on bimodal abilities."""
    from benchloupe.engine.itemhealth import irt
    from benchloupe.engine.itemhealth.audit import guessing_levels

    out = {}
    for latent in ("normal", "bimodal"):
        hits = {r: 0 for r in MISFIT_RULES}
        fdp: dict = {r: [] for r in MISFIT_RULES}
        planted_total = 0
        for child in np.random.SeedSequence([seed, len(latent)]).spawn(n_bench):
            y, planted = misfit_simulate(np.random.default_rng(child), m, n, latent)
            chance = np.full(n, 0.25)
            c_fit = guessing_levels(y, chance, assoc.rest_means(assoc.formula_scores(y, chance)), y.mean(0))
            fit = irt.fit_2pl(y, c_fit)
            sx = irt.s_x2(y, fit)
            rmsea = np.sqrt(np.maximum(0.0, (sx.stat - sx.df) / (sx.df * max(sx.n_models - 1, 1))))
            q = assoc.bh_qvalues(sx.p)
            planted_total += int(planted.sum())
            for rule, floor in MISFIT_RULES.items():
                flag = (np.nan_to_num(q, nan=2) <= 0.05) & (np.nan_to_num(rmsea) > floor)
                hits[rule] += int((flag & planted).sum())
                fdp[rule].append(float((flag & ~planted).sum() / max(flag.sum(), 1)))
        out[latent] = {r: {"power": round(hits[r] / planted_total, 3), "fdr": round(float(np.mean(fdp[r])), 3),
                           "fdr_se": round(float(np.std(fdp[r]) / np.sqrt(len(fdp[r]))), 3)} for r in MISFIT_RULES}
    return {"benchmarks": n_bench, "models": m, "items": n, "by_latent": out}


def leaderboard(seed: int) -> dict:
    """The audit on real Open LLM Leaderboard data (../shared/data/metabench: ARC 4,280 x 100 with chance .25,
    TruthfulQA 4,280 x 136 without): misfit flags by RMSEA floor, and every reason's count at the defaults."""
    import pandas as pd

    folder = ROOT.parent / "shared" / "data" / "metabench"
    out = {}
    for name, stem, chance in (("ARC", "arc-2PL-MAP-0.005-seed=1", 0.25),
                               ("TruthfulQA", "truthfulqa-2PL-EAPsum-0.01-seed=1", float("nan"))):
        y = pd.read_csv(folder / f"{stem}.responses.csv.gz", index_col=0).to_numpy(float)
        res = run_item_audit(ItemAuditInputs(y=y, chance=np.full(y.shape[1], chance)), ItemAuditConfig(seed=seed))
        q, rmsea = np.nan_to_num(res.table["sx2_q"], nan=2), np.nan_to_num(res.table["sx2_rmsea"])
        out[name] = {"models": int(y.shape[0]), "items": int(y.shape[1]), "reasons": res.metrics["reasons"],
                     "misfit_by_floor": {str(f): int(((q <= 0.05) & (rmsea > f)).sum()) for f in MISFIT_RULES.values()}}
    return out


def _timed(argv: list, env: dict) -> dict:
    """One whole process: wall seconds, CPU seconds and peak resident memory (its own rusage)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "benchloupe", *argv], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv[:2]} failed: {err[-2000:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "max_rss_mb": round(usage.ru_maxrss / 1024)}


def speed(m: int, n: int, seed: int, workdir: str | None = None) -> dict:
    """`fit static` and `audit items` as whole processes, one after the other in this run, on one simulated
    workspace of m models x n items (imported from a wide CSV; kept in *workdir* when given, and reused there)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")} | {"PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(workdir or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        db = folder / f"items_{m}x{n}.db"
        out = {"models": m, "items": n, "load_average": round(os.getloadavg()[0], 1), "processes": {}}
        if not db.exists():
            rng = np.random.default_rng(seed)
            theta, b = rng.normal(size=m), rng.normal(size=n)
            csv = folder / "wide.csv"
            with open(csv, "w") as fh:
                fh.write("model," + ",".join(f"q{j}" for j in range(n)) + "\n")
                for i in range(m):
                    row = (rng.random(n) < 1 / (1 + np.exp(-(theta[i] - b)))).astype(np.int8)
                    fh.write(f"m{i}," + ",".join(map(str, row.tolist())) + "\n")
            out["processes"]["import"] = _timed(["import", "wide", str(csv), "--benchmark", "sim", "--db", str(db)],
                                                env)
            csv.unlink()
        for name, argv in (("fit_static", ["fit", "static", "sim"]), ("audit_items", ["audit", "items", "sim"])):
            out["processes"][name] = _timed([*argv, "--db", str(db)], env)
        out["load_average_after"] = round(os.getloadavg()[0], 1)
    p = out["processes"]
    out["ratio"] = round(p["audit_items"]["wall_s"] / p["fit_static"]["wall_s"], 2)
    out["cpu_ratio"] = round(p["audit_items"]["cpu_s"] / p["fit_static"]["cpu_s"], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--benchmarks", type=int, default=200)
    ap.add_argument("--models", type=int, default=300)
    ap.add_argument("--items", type=int, default=60)
    ap.add_argument("--perm", type=int, default=199)
    ap.add_argument("--seed", type=int, default=20261207)
    ap.add_argument("--speed", nargs=2, type=int, metavar=("MODELS", "ITEMS"))
    ap.add_argument("--misfit", action="store_true", help="the misfit rules' power and FDR (S-X2 only)")
    ap.add_argument("--leaderboard", action="store_true", help="the audit on real ARC and TruthfulQA (metabench)")
    ap.add_argument("--workdir", help="--speed: keep the workspace here and reuse it (the import is then not timed)")
    args = ap.parse_args()
    if args.speed:
        out = speed(*args.speed, args.seed, args.workdir)
    elif args.misfit:
        out = misfit_study(args.benchmarks, args.models, args.items, args.seed)
    elif args.leaderboard:
        out = leaderboard(0)
    else:
        t0 = time.perf_counter()
        out = {"simulation": study(args.benchmarks, args.models, args.items, args.perm, args.seed),
               "classic": classic(999)}
        out["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
