"""Run every benchmark script in turn and keep each JSON under bench/out/ (figures for docs/BENCHMARKS.md).

Usage: python bench/run_all.py [--quick]   (--quick skips the 5,000 x 14,000 cases and the peers)
Each script is run with OPENBLAS_NUM_THREADS=1, as the CLI does.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"

FULL = [
    ("store", ["bench/bench_store.py"]),
    ("import", ["bench/bench_import.py"]),
    ("joint", ["bench/bench_joint.py"]),
    ("static_2pl", ["bench/bench_static_2pl.py"]),
    ("neartie", ["bench/bench_neartie.py"]),
    ("coverage", ["bench/bench_coverage.py"]),
    ("benchfill", ["bench/bench_benchfill.py"]),
    ("tui", ["bench/bench_tui.py"]),
    ("team", ["bench/bench_team.py"]),
]
QUICK = [
    ("store", ["bench/bench_store.py", "--skip-big"]),
    ("joint", ["bench/bench_joint.py", "--skip-large"]),
    ("coverage", ["bench/bench_coverage.py"]),
    ("benchfill", ["bench/bench_benchfill.py", "--repeat", "1"]),
    ("tui", ["bench/bench_tui.py"]),
    ("team", ["bench/bench_team.py", "--keys", "30", "--visible", "5"]),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    failed = 0
    for name, cmd in QUICK if args.quick else FULL:
        t = time.perf_counter()
        with open(OUT / f"{name}.json", "w") as out, open(OUT / f"{name}.err", "w") as err:
            rc = subprocess.run([sys.executable, *cmd], cwd=ROOT, env=env, stdout=out, stderr=err).returncode
        print(f"{name:12s} rc={rc} {time.perf_counter() - t:7.1f} s -> bench/out/{name}.json", flush=True)
        failed += rc != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
