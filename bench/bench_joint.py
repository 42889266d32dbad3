"""Speed figures for the DualEval engine (issue 3).  Prints JSON; best of 3 wall-clock runs unless noted.

Run with OPENBLAS_NUM_THREADS=1 (set below when unset; multi-threaded OpenBLAS thrashes on the shared 2-core
machine).  Every row carries the 1-minute load average before and after it (``load``), because the machine is shared
and the figures inflate with it, and ``before_s``: the figure of the previous optimiser (docs/DUALEVAL.md, same
machine, load average 5-6) where one was measured.

``--cli``: the user-visible operation as a whole process, best of 3: ``benchloupe fit joint chembench --arena
alpacaeval2 --no-heldout`` on a fresh database holding ChemBench (32 x 2,854 static) and AlpacaEval 2 (58 x 805
arena rewards) with the five systems both share linked by aliases (docs/REAL-RUNS.md): 85 models, 1.33 M pairs.
Reports the process wall time and the fit's own provenance (wall, passes-equivalent) from its JSON.

Usage: python bench/bench_joint.py [--skip-large] [--only-ae2] [--cli]
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


ALIASES = [("claude2", "claude-2"), ("gpt-3.5-turbo", "gpt-3.5-turbo-1106"), ("gemma-1-1-7b-it", "gemma-7b-it"),
           ("mixtral-8x7b-instruct", "Mixtral-8x7B-Instruct-v0.1_concise"), ("gpt-4", "gpt4_0613_concise")]


def cli_joint(repeats: int = 3) -> dict:
    """``benchloupe fit joint chembench --arena alpacaeval2 --no-heldout --json`` as a whole process, best of
    ``repeats`` (the imports and aliases are set up first, untimed)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"),
           "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="bench_joint_cli_") as tmp:
        db = str(Path(tmp) / "b.db")

        def cli(*argv):
            done = subprocess.run([sys.executable, "-m", "benchloupe", *argv, "--db", db], capture_output=True,
                                  text=True, env=env, cwd=ROOT)
            if done.returncode:
                raise SystemExit(f"benchloupe {' '.join(argv)}: {done.stderr.strip()[-400:]}")
            return done.stdout

        cb, ae = DATA / "chembench", DATA / "alpacaeval"
        cli("import", "wide", str(cb / "matrix_models_all_correct.csv.gz"), "--benchmark", "chembench",
            "--models-file", str(cb / "respondents.csv"))
        cli("import", "arena", str(ae / "annotations_ae2_long.csv.gz"), "--benchmark", "alpacaeval2", "--model-col",
            "generator_2", "--item-col", "instruction_id", "--reward-col", "preference", "--reward-model-col",
            "annotator", "--group-col", "dataset")
        for a, b in ALIASES:
            cli("alias", a, b)
        walls, last, before = [], None, load()
        for _ in range(repeats):
            t0 = time.perf_counter()
            last = json.loads(cli("fit", "joint", "chembench", "--arena", "alpacaeval2", "--no-heldout", "--json"))
            walls.append(round(time.perf_counter() - t0, 3))
    return {"case": "CLI: benchloupe fit joint chembench --arena alpacaeval2 --no-heldout (whole process)",
            "best_s": min(walls), "runs_s": walls, "load": [before, load()], "result": _cli_summary(last)}


def _cli_summary(out: dict) -> dict:
    """The fit's figures from the CLI's JSON (the keys present: metrics, compute provenance, ranking head)."""
    keep = {}
    for key in ("metrics", "compute", "timings", "provenance"):
        if key in out:
            keep[key] = out[key]
    for key in ("objective", "iterations", "n_models"):
        if key in out:
            keep[key] = out[key]
    if "ranking" in out:
        keep["top5"] = out["ranking"][:5]
    return keep or {"keys": sorted(out)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--only-ae2", action="store_true", help="only the AlpacaEval 2 joint fit (and --cli)")
    ap.add_argument("--cli", action="store_true", help="also time the whole `benchloupe fit joint` process")
    args = ap.parse_args()
    out = []
    if args.only_ae2:
        if (DATA / "alpacaeval").exists():
            AS, AA, _ = alpacaeval()
            d, res = timed(f"AlpacaEval 2 joint {AA.shape} (paper settings)", lambda: fit_joint(AS, AA, JointConfig()))
            d.update(n_pairs=len(res.pairs), provenance=res.provenance, objective=repr(res.objective))
            out.append(d)
        if args.cli and (DATA / "chembench").exists():
            out.append(cli_joint())
        print(json.dumps(out, indent=1, default=float))
        return
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
    if args.cli and (DATA / "chembench").exists() and (DATA / "alpacaeval").exists():
        out.append(cli_joint())
    print(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
