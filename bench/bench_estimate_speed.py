"""Speed of estimation at leaderboard scale (issue 34): ``estimate`` for 1,000 partly evaluated models on a
14,000-item calibration against the time of reading their results (their import), and ``compress --validate``
against ``fit static`` on a 5,000 x 14,000 workspace.  Prints one JSON object.

The workspace is simulated (2PL, seeded): ``--models`` fully answered models on ``--items`` items, written through
the store's own writer (not timed), fitted with ``fit static`` (timed: the run ``estimate`` freezes), then
``--partial`` models that answered ``--seen`` random items each, written as a long CSV and imported (timed: the
reading the issue compares with), then ``estimate`` on them (timed).  Import and estimate are timed in this process
(jobs.import_file, jobs.estimate.run_estimate) and as whole CLI processes (interpreter start included); the
validation (``compress --validate SIZES``, a compress run) is timed against ``fit static`` of the same workspace, in
this process and as whole CLI processes (``benchloupe fit static``, ``benchloupe compress --validate``, ``benchloupe
fit static`` again, on a copy of the fully answered workspace: the ratio is the validation's time over the mean of
the two fits around it, each with the load average before it; the CLI's default ``--jobs``, every core).

Usage: ``python bench/bench_estimate_speed.py [--models 5000] [--items 14000] [--partial 1000] [--seen 300]
[--validate 10,25,50,100] [--skip-validate] [--skip-estimate] [--skip-cli]``
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _workspace(db: Path, models: int, items: int, seed: int) -> np.ndarray:
    """The fully answered models, written through the store's writer; returns the item parameters (a, b)."""
    from benchloupe.store.db import connect
    from benchloupe.store.importers.base import ParsedImport
    from benchloupe.store.writer import write_import

    rng = np.random.default_rng(seed)
    a, b = np.exp(rng.normal(0, 0.3, items)), rng.normal(0, 1, items)
    th = rng.normal(0, 1, models)
    y = np.empty((models, items), np.int8)
    for s in range(0, models, 500):  # in blocks: 70 M float64 probabilities would be 560 MB
        p = 1 / (1 + np.exp(-a * (th[s:s + 500, None] - b)))
        y[s:s + 500] = rng.random(p.shape) < p
    keys = [f"q{j:05d}" for j in range(items)]
    parsed = ParsedImport("big", "static", pd.DataFrame({"key": keys}),
                          pd.DataFrame({"name": [f"full/m{i}" for i in range(models)]}), correct=y, source="bench")
    conn = connect(db)
    try:
        write_import(conn, parsed, fmt="bench")
    finally:
        conn.close()
    return np.vstack([a, b])


def _partial_csv(path: Path, ab: np.ndarray, partial: int, seen: int, seed: int) -> int:
    rng = np.random.default_rng(seed + 1)
    a, b = ab
    n = len(a)
    th = rng.normal(0, 1, partial)
    cols = np.vstack([rng.choice(n, seen, replace=False) for _ in range(partial)])
    p = 1 / (1 + np.exp(-a[cols] * (th[:, None] - b[cols])))
    y = (rng.random(p.shape) < p).astype(int)
    pd.DataFrame({"model": np.repeat([f"part/m{i}" for i in range(partial)], seen),
                  "item": np.array([f"q{j:05d}" for j in range(n)], dtype=object)[cols.ravel()],
                  "correct": y.ravel()}).to_csv(path, index=False)
    return int(y.size)


def _validate_cli(db: Path, sizes: str) -> dict:
    """``fit static``, ``compress --validate SIZES``, ``fit static`` as whole processes on ``db``."""
    out: dict = {}
    for name, command in (("fit_static_cli_s", ("fit", "static", "big")),
                          ("validate_cli_s", ("compress", "big", "--validate", sizes)),
                          ("fit_static_again_cli_s", ("fit", "static", "big"))):
        out[name[:-2] + "_load_before"] = round(os.getloadavg()[0], 2)
        out[name] = _cli(*command, "--db", str(db))
    fit = (out["fit_static_cli_s"] + out["fit_static_again_cli_s"]) / 2
    out["validate_over_fit_static_cli"] = round(out["validate_cli_s"] / fit, 2)
    return out


def _cli(*args: str) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "benchloupe", *args], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    if r.returncode:
        raise SystemExit(f"benchloupe {' '.join(args)} failed: {r.stderr.strip()}")
    return round(time.perf_counter() - t, 3)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=5000)
    ap.add_argument("--items", type=int, default=14000)
    ap.add_argument("--partial", type=int, default=1000)
    ap.add_argument("--seen", type=int, default=300)
    ap.add_argument("--validate", default="10,25,50,100")
    ap.add_argument("--skip-validate", action="store_true")
    ap.add_argument("--skip-cli", action="store_true", help="no whole-process timings")
    ap.add_argument("--skip-estimate", action="store_true", help="no partial models, import or estimate")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from benchloupe import jobs
    from benchloupe.engine.joint import JointConfig
    from benchloupe.jobs import estimate as job
    from benchloupe.jobs.diagnostics import CompressConfig
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    out: dict = {"models": args.models, "items": args.items, "partial": args.partial, "seen": args.seen,
                 "load_average_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        db, csv = Path(tmp) / "w.db", Path(tmp) / "partial.csv"
        t = time.perf_counter()
        ab = _workspace(db, args.models, args.items, args.seed)
        out["write_workspace_s"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        jobs.ANALYSES["static"].run(db, "big", JointConfig(mode="static"), heldout=False)
        out["fit_static_s"] = round(time.perf_counter() - t, 2)
        if not args.skip_validate and not args.skip_cli:
            copy = Path(tmp) / "v.db"
            copy.write_bytes(db.read_bytes())
            out.update(_validate_cli(copy, args.validate))
            copy.unlink()
        if args.skip_estimate:
            out["load_average_end"] = os.getloadavg()[0]
            print(json.dumps(out, indent=1))
            return 0
        out["partial_cells"] = _partial_csv(csv, ab, args.partial, args.seen, args.seed)
        if not args.skip_cli:  # whole processes first, on a copy (the in-process import then writes the original)
            copy = Path(tmp) / "c.db"
            copy.write_bytes(db.read_bytes())
            out["import_cli_s"] = _cli("import", "long", str(csv), "--db", str(copy), "--benchmark", "big")
            out["estimate_cli_s"] = _cli("estimate", "big", "--db", str(copy))
            out["estimate_over_import_cli"] = round(out["estimate_cli_s"] / out["import_cli_s"], 2)
            copy.unlink()
        t = time.perf_counter()
        jobs.import_file(db, csv, "long", benchmark="big")
        out["import_s"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        rid = job.run_estimate(db, "big")
        out["estimate_s"] = round(time.perf_counter() - t, 2)
        conn = connect(db)
        try:
            run = runs.get_run(conn, rid)
        finally:
            conn.close()
        out["estimate_timings"] = run["timings"]
        out["estimated_models"] = run["metrics"]["models"]
        out["estimate_over_import"] = round(out["estimate_s"] / out["import_s"], 2)
        if not args.skip_validate:
            t = time.perf_counter()
            rid = jobs.ANALYSES["compress"].run(db, "big", CompressConfig(purpose="estimate",
                                                                         validate=args.validate))
            out["validate_s"] = round(time.perf_counter() - t, 2)
            conn = connect(db)
            try:
                out["validate_timings"] = runs.get_run(conn, rid)["timings"]
            finally:
                conn.close()
            out["validate_over_fit_static"] = round(out["validate_s"] / out["fit_static_s"], 2)
    out["load_average_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
