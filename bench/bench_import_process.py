"""``benchloupe import`` of a small file as a whole process (issue 12, speed of imports): wall and CPU time
of ``python -m benchloupe import long small.csv`` into a fresh database, best of ``--repeats``, plus the
modules that import must not load (scipy.stats, openai, torch). Target: under 0.5 s. Prints JSON with the
load average (the machine is shared; CPU time is the steadier figure).
Usage: ``python bench/bench_import_process.py [--repeats 5]`` from the repository root.
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

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--root", default=str(ROOT), help="checkout to measure (e.g. another worktree, for a before/after)")
    args = ap.parse_args()
    root = Path(args.root)
    tmp = Path(tempfile.mkdtemp())
    src = tmp / "small.csv"
    src.write_text("model,item,correct\n" + "".join(f"m{m},i{i},{(m + i) % 2}\n" for m in range(5) for i in range(20)))
    walls, cpus = [], []
    for r in range(args.repeats):
        db = tmp / f"w{r}.db"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "benchloupe", "import", "long", str(src), "-b", "small", "--db", str(db)],
                       check=True, capture_output=True, cwd=root)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    probe = "\n".join([
        "import sys, runpy",
        f"sys.argv = ['benchloupe', 'import', 'long', {str(src)!r}, '-b', 'small', '--db', {str(tmp / 'probe.db')!r}]",
        "try:",
        "    runpy.run_module('benchloupe', run_name='__main__')",
        "except SystemExit:",
        "    pass",
        "print(sorted(m for m in ('scipy.stats', 'openai', 'torch', 'textual') if m in sys.modules))",
    ])
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=root).stdout.strip()
    print(json.dumps({"repeats": args.repeats, "load_avg_1m": round(os.getloadavg()[0], 2),
                      "wall_s_best": round(min(walls), 3), "wall_s_median": round(sorted(walls)[len(walls) // 2], 3),
                      "cpu_s_best": round(min(cpus), 3), "heavy_modules_loaded": loaded.splitlines()[-1]}, indent=1))


if __name__ == "__main__":
    main()
