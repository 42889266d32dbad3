"""Issue 36: replicates on 1 process, 2 processes and a Dask LocalCluster; same output, wall time, scaling inputs.

    PYTHONPATH=. .venv/bin/python bench/bench_replicates.py [--models 5000] [--items 14000] [--B 200]
                                                            [--cases bootstrap,audit] [--modes jobs1,jobs2,cluster]

Builds a simulated workspace (bench_neartie's generator: 5 families, owners in the names, 8 latent dimensions,
family DIF on 30 % of the items) as a wide CSV, imports it into a fresh database, then runs as whole CLI
processes ``bootstrap sim --B B`` and ``audit neartie sim --protocol full`` under ``--jobs 1``, ``--jobs 2`` and
``--cluster`` (a LocalCluster of 2 worker processes x 1 thread started here).  Per run: wall seconds, the job's
own timings, the load average before and after (the machine is shared), and whether the stored numbers equal
the ``--jobs 1`` run's bit for bit (bootstrap: every replicate's thetas; audit: the stored metrics, which hold
Table 1, the protocol's headline numbers and the split-stability summary).

The scaling-model inputs (docs/PARALLEL.md) come from the same runs: per-replicate seconds (the replicate phase
at ``--jobs 1`` over the replicate count), the bytes each worker receives (the pickled shared arrays), and the
per-batch overhead of each backend measured with an empty replicate.  Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_neartie import simulate  # noqa: E402
from bench_scale import write_wide  # noqa: E402


def load() -> float:
    return round(os.getloadavg()[0], 2)


def _children_cpu() -> float:
    """User + system seconds of the finished child processes (the CLI and the --jobs workers it reaped; not the
    LocalCluster's workers, which outlive the run)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cli(db: Path, *argv: str, timeout: float = 4 * 3600) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("BENCHLOUPE_JOBS", None)
    env.pop("BENCHLOUPE_CLUSTER", None)
    before, t, cpu = load(), time.perf_counter(), _children_cpu()
    p = subprocess.run([sys.executable, "-m", "benchloupe", *argv, "--db", str(db), "--json"], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=timeout)
    wall, cpu = time.perf_counter() - t, _children_cpu() - cpu
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({p.returncode}): {p.stderr[-2000:]}")
    out = json.loads(p.stdout)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load_before": before, "load_after": load(), "run_id": out["run_id"],
            "timings": out.get("timings"), "json": out}


def stored(db: Path, run_id: int, what: str):
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        if what == "thetas":
            return runs.load_artifact(conn, run_id, "replicates")["thetas"]
        run = runs.get_run(conn, run_id)
        return {k: v for k, v in run["metrics"].items() if k not in ("device", "workers")}
    finally:
        conn.close()


def same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def build(folder: Path, n_models: int, n_items: int) -> Path:
    db = folder / "bench.db"
    if db.exists():
        return db
    y, ids, fams, owners, groups = simulate(n_models, n_items)
    write_wide(folder / "wide.csv", ids, y)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "benchloupe", "import", "wide", str(folder / "wide.csv"), "-b", "sim",
                    "--db", str(db)], check=True, env=env, cwd=ROOT, capture_output=True)
    return db


def _empty(shared, task):
    return task


def overhead(workers, n: int = 64) -> float:
    """Seconds per batch of an empty replicate on ``workers`` (a warm pool: the second of two calls)."""
    from benchloupe.engine import replicates

    with replicates.use(workers):
        replicates.run(_empty, range(n), np.zeros(8))
        t = time.perf_counter()
        replicates.run(_empty, range(n), np.zeros(8))
        batches = min(n, max(replicates.MIN_BATCHES, replicates.BATCHES_PER_WORKER * max(1, workers.jobs if workers.local else 2)))
        return (time.perf_counter() - t) / batches


def shared_bytes(db: Path) -> int:
    """Bytes of what every bootstrap worker receives: the static matrices (pickled as joblib sends them)."""
    from benchloupe.jobs.data import load_joint
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        inputs = load_joint(conn, "sim")
    finally:
        conn.close()
    return len(pickle.dumps(inputs.static, protocol=pickle.HIGHEST_PROTOCOL))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=5000)
    ap.add_argument("--items", type=int, default=14000)
    ap.add_argument("--B", type=int, default=200)
    ap.add_argument("--cases", default="bootstrap,audit")
    ap.add_argument("--modes", default="jobs1,jobs2,cluster")
    ap.add_argument("--folder", help="where the workspace is built (default: a temporary folder)")
    args = ap.parse_args()
    folder = Path(args.folder or tempfile.mkdtemp(prefix="bench_replicates_"))
    folder.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    db = build(folder, args.models, args.items)
    report: dict = {"shape": [args.models, args.items], "B": args.B, "cpus": len(os.sched_getaffinity(0)),
                    "build_s": round(time.perf_counter() - t, 1), "load_start": load(), "cases": {}}
    modes = args.modes.split(",")
    cluster = None
    if "cluster" in modes:
        from distributed import LocalCluster

        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                               host="127.0.0.1")
    try:
        flags = {"jobs1": ["--jobs", "1"], "jobs2": ["--jobs", "2"],
                 "cluster": ["--cluster", cluster.scheduler_address] if cluster else []}
        commands = {"bootstrap": (["bootstrap", "sim", "--B", str(args.B)], "thetas", "replicates_s"),
                    "audit": (["audit", "neartie", "sim", "--protocol", "full"], "metrics", None)}
        for case in args.cases.split(","):
            argv, what, phase = commands[case]
            rows, first = {}, None
            for mode in modes:
                r = cli(db, *argv, *flags[mode])
                value = stored(db, r.pop("run_id"), what)
                r.pop("json")
                first = value if first is None else first
                r["identical_to_first"] = same(first, value)
                rows[mode] = r
            if "jobs1" in rows and "jobs2" in rows:
                rows["speedup_jobs2"] = round(rows["jobs1"]["wall_s"] / rows["jobs2"]["wall_s"], 2)
            if "cluster" in rows and "jobs2" in rows:
                rows["cluster_over_jobs2"] = round(rows["cluster"]["wall_s"] / rows["jobs2"]["wall_s"], 2)
            if phase and "jobs1" in rows:
                rows["per_replicate_s"] = round(rows["jobs1"]["timings"][phase] / args.B, 4)
            report["cases"][case] = rows
        from benchloupe.engine.replicates import Workers
        from benchloupe.jobs.workers import using, workers

        report["batch_overhead_s"] = {"jobs2": round(overhead(Workers(jobs=2)), 4)}
        if cluster:
            w = workers(cluster=cluster.scheduler_address)
            with using(w):
                report["batch_overhead_s"]["cluster"] = round(overhead(w), 4)
        report["bootstrap_shared_bytes"] = shared_bytes(db)
    finally:
        if cluster:
            cluster.close()
    report["load_end"] = load()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
