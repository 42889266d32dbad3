"""Issue 16 speed figures: the fits, the bootstrap and start-up, ours beside a baseline checkout in the same run.

Every case runs in a fresh subprocess (so peak memory is the case's own: ``ru_maxrss`` of that process) with
``PYTHONPATH`` pointing at this checkout ("ours") or at ``--baseline-src`` (default ``/work/main`` when it exists:
the code before this change, "today's code"; its commit is recorded).  Static 2PL data are simulated inside the
subprocess with known parameters (``bench_static_2pl.simulate``: theta ~ N(0,1), b ~ N(0,1), log a ~ N(0, 0.3),
seed 0) and the fit's wall time excludes the simulation; recovery is Spearman of theta with the truth.  Each row
carries the 1-minute load average before and after (the machine is shared: figures inflate with the load), the
best of ``--repeats`` runs, the fit's provenance (backend, dtype, passes, passes-equivalent) and peak RSS.

Peers: theta-irt and the other IRT peers run from bench/bench_static_2pl.py when /work/peers-venv exists; this
script records whether it does.

``--interleave`` alternates the checkouts' runs of the joint fit and the bootstrap (ours, baseline, ours, ...).

Usage: python bench/bench_speed.py [--quick] [--repeats 3] [--baseline-src PATH] [--no-baseline] [--interleave]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
PEERS_VENV = Path("/work/peers-venv")

STATIC_CASE = """
import json, resource, sys, time
sys.path.insert(0, {bench!r})
import numpy as np
from bench_static_2pl import simulate
from benchloupe.engine.joint import JointConfig, StaticData, fit_joint
from benchloupe.engine.stats import spearman
d = simulate({m}, {n}, 0)
S = StaticData(d["y"], np.ones(d["y"].shape, bool))
t = time.perf_counter()
r = fit_joint(S, None, JointConfig(mode="static"))
wall = time.perf_counter() - t
print(json.dumps({{"fit_s": wall, "objective": r.objective, "iterations": r.iterations, "converged": bool(r.converged),
                  "spearman_theta": spearman(r.theta, d["theta"]), "spearman_b": spearman(r.b_static, d["b"]),
                  "provenance": getattr(r, "provenance", None),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""

JOINT_CASE = """
import json, resource, sys, time
sys.path.insert(0, {bench!r})
import benchloupe.engine.joint  # from PYTHONPATH (ours or the baseline) before bench_joint puts this checkout first
from bench_joint import alpacaeval
from benchloupe.engine.joint import JointConfig, fit_joint
AS, AA, _ = alpacaeval()
t = time.perf_counter()
r = fit_joint(AS, AA, JointConfig())
print(json.dumps({{"fit_s": time.perf_counter() - t, "objective": r.objective, "iterations": r.iterations,
                  "shape": [AS.shape, AA.shape], "ranking": [int(v) for v in r.ranking()], "code": benchloupe.__file__, "provenance": getattr(r, "provenance", None),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""

BOOT_CASE = """
import json, resource, sys, time
sys.path.insert(0, {bench!r})
import numpy as np
import benchloupe.engine.bootstrap  # from PYTHONPATH (ours or the baseline) before bench_joint puts this checkout first
from bench_joint import gsm8k
from benchloupe.engine.bootstrap import cluster_bootstrap
from benchloupe.engine.joint import JointConfig, fit_joint
G = gsm8k()
cfg = JointConfig(mode="static")
full = fit_joint(G, None, cfg)
t = time.perf_counter()
b = cluster_bootstrap(G, None, cfg, B={B}, seed=0, full=full)
print(json.dumps({{"fit_s": time.perf_counter() - t, "B": {B}, "shape": list(G.shape), "failed": b.failed,
                  "median_se": float(np.median(b.se)), "code": benchloupe.__file__,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def load() -> float:
    return round(os.getloadavg()[0], 2)


def git_commit(src: Path) -> str | None:
    try:
        return subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def run_case(src: Path, code: str, timeout: float) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                             timeout=timeout, cwd=src)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "timeout_s": timeout}
    if out.returncode != 0:
        return {"status": "error", "stderr": out.stderr[-800:]}
    return {"status": "ok", **json.loads(out.stdout.strip().splitlines()[-1])}


def best(src: Path, code: str, repeats: int, timeout: float) -> dict:
    before = load()
    runs = [run_case(src, code, timeout) for _ in range(repeats)]
    ok = [r for r in runs if r["status"] == "ok"]
    if not ok:
        return {**runs[-1], "load": [before, load()]}
    top = min(ok, key=lambda r: r["fit_s"])
    top["fit_s"] = round(top["fit_s"], 3)
    top["runs_s"] = [round(r["fit_s"], 3) for r in ok]
    top["load"] = [before, load()]
    return top


def interleaved(srcs: dict, code: str, repeats: int, timeout: float) -> dict:
    """Best of ``repeats`` per checkout with the checkouts' runs alternating (ours, baseline, ours, ...), so a
    shared machine's load swings hit both alike; each row carries the load before and after all the runs."""
    before = load()
    runs: dict = {who: [] for who in srcs}
    for _ in range(repeats):
        for who, src in srcs.items():
            runs[who].append(run_case(src, code, timeout))
    out = {}
    for who, rs in runs.items():
        ok = [r for r in rs if r["status"] == "ok"]
        if not ok:
            out[who] = {**rs[-1], "load": [before, load()]}
            continue
        top = min(ok, key=lambda r: r["fit_s"])
        out[who] = {**top, "fit_s": round(top["fit_s"], 3), "runs_s": [round(r["fit_s"], 3) for r in ok],
                    "interleaved": True, "load": [before, load()]}
    return out


def startup(src: Path, repeats: int, tmp: Path) -> dict:
    """Whole-process wall time of `--help`, `list` and a 4-cell `import long` (best of ``repeats``)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    csv = tmp / "small.csv"
    csv.write_text("model,item,correct\nm1,q1,1\nm1,q2,0\nm2,q1,1\nm2,q2,1\n")
    db = tmp / f"startup-{abs(hash(str(src)))}.db"
    out = {"load": load()}
    cases = {"help": ["--help"], "list": ["list", "--db", str(db)],
             "import_small": ["import", "long", str(csv), "--benchmark", "small", "--db", str(db), "--replace"]}
    subprocess.run([sys.executable, "-c", f"from benchloupe.store.db import connect; connect({str(db)!r}).close()"],
                   env=env, cwd=src, check=True, timeout=120)
    for name, argv in cases.items():
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "benchloupe", *argv], env=env, cwd=src, capture_output=True,
                           timeout=120)
            times.append(time.perf_counter() - t)
        out[name + "_s"] = round(min(times), 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small static sizes and start-up only")
    ap.add_argument("--baseline-src", type=Path, default=Path("/work/main") if Path("/work/main").exists() else None,
                    help="a checkout of the code to compare with (e.g. `git archive <commit> | tar -x -C DIR`)")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--skip", default="", help="comma-separated: static,joint,bootstrap,startup")
    ap.add_argument("--interleave", action="store_true",
                    help="joint and bootstrap: alternate ours and the baseline, best of --repeats each")
    args = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    bench = str(ROOT / "bench")
    srcs = {"ours": ROOT}
    if args.baseline_src and not args.no_baseline:
        srcs["baseline"] = args.baseline_src
    report = {"script": "bench/bench_speed.py", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "cpus": os.cpu_count(), "peers_venv": PEERS_VENV.exists(),
              "sources": {k: {"path": str(v), "commit": git_commit(v)} for k, v in srcs.items()}, "cases": []}
    skip = set(filter(None, args.skip.split(",")))
    sizes = [] if "static" in skip else [(1000, 1000), (2000, 2000)] + ([] if args.quick else [(5000, 14000)])
    for m, n in sizes:
        for who, src in srcs.items():
            reps = args.repeats if (who == "ours" or m * n <= 4_000_000) else 1  # the baseline's 70 M fit: once
            row = best(src, STATIC_CASE.format(bench=bench, m=m, n=n), reps, args.timeout)
            report["cases"].append({"case": f"static 2PL {m}x{n}", "who": who, **row})
            print(json.dumps(report["cases"][-1]), file=sys.stderr)
    # the joint fit and the bootstrap: best of --repeats for ours, the baseline once (its bootstrap takes ~2x)
    if args.interleave and not args.quick:
        for name, code, present in (
                ("joint AlpacaEval 2 (805 prompts) + its static stand-in", JOINT_CASE.format(bench=bench),
                 "joint" not in skip and (DATA / "alpacaeval").exists()),
                ("cluster bootstrap B=100 metabench GSM8K", BOOT_CASE.format(bench=bench, B=100),
                 "bootstrap" not in skip and (DATA / "metabench").exists())):
            if present:
                for who, row in interleaved(srcs, code, args.repeats, args.timeout).items():
                    report["cases"].append({"case": name, "who": who, **row})
                    print(json.dumps(report["cases"][-1]), file=sys.stderr)
        skip |= {"joint", "bootstrap"}
    if not args.quick and "joint" not in skip and (DATA / "alpacaeval").exists():
        for who, src in srcs.items():
            row = best(src, JOINT_CASE.format(bench=bench), args.repeats, args.timeout)
            report["cases"].append({"case": "joint AlpacaEval 2 (805 prompts) + its static stand-in", "who": who,
                                    **row})
            print(json.dumps(report["cases"][-1]), file=sys.stderr)
    if not args.quick and "bootstrap" not in skip and (DATA / "metabench").exists():
        for who, src in srcs.items():
            row = best(src, BOOT_CASE.format(bench=bench, B=100), args.repeats if who == "ours" else 1, args.timeout)
            report["cases"].append({"case": "cluster bootstrap B=100 metabench GSM8K", "who": who, **row})
            print(json.dumps(report["cases"][-1]), file=sys.stderr)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for who, src in srcs.items():
            if "startup" not in skip:
                report["cases"].append({"case": "start-up", "who": who, **startup(src, args.repeats, Path(tmp))})
    print(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
