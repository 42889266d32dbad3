"""How long ``--chance estimate`` takes on a 5,000 x 100 benchmark, and whether it finds the simulated asymptote
(issue 36, point 3).

For each case: the estimate alone in this process (:func:`benchloupe.engine.irt.asymptote.
estimate_lower_asymptote`: wall and CPU seconds, its evaluations of the marginal likelihood, the estimate and its
95 % interval), then the whole command as a curator runs it, in its own process: ``benchloupe compress B
--chance estimate --recovery no`` on a workspace holding the set (imported before the clock starts), with its
wall and CPU seconds and how many progress lines about the estimate it wrote to stderr.  Cases: simulated
5,000 models x 100 items (abilities N(0, 1), b ~ N(0, 1), log a ~ N(.2, .3)) with a known lower asymptote of
.25 and of 0 (a boundary estimate, where the interval is searched for rather than read off the curvature), and
with ``--shared`` the metabench ARC set of ../shared/data (4,280 x 100, the only shared set of that shape).
Prints one JSON line per case, with the load average at its start (the machine is shared).

    .venv/bin/python bench/bench_chance.py [--shared ../shared] [--cases sim25,sim0,arc]
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

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI sets it

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.special import expit  # noqa: E402

from benchloupe.engine.irt import asymptote  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ARC = "data/metabench/arc-2PL-MAP-0.005-seed=1.responses.csv.gz"


def simulate(c: float, n_models: int = 5000, n_items: int = 100, seed: int = 36) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_models)
    b, a = rng.normal(0, 1, n_items), np.exp(rng.normal(0.2, 0.3, n_items))
    y = (rng.random((n_models, n_items)) < c + (1 - c) * expit(a * (theta[:, None] - b))).astype(np.int8)
    return pd.DataFrame(y, index=pd.Index([f"m{i}" for i in range(n_models)], name="model"),
                        columns=[f"q{q}" for q in range(n_items)])


def alone(y: np.ndarray) -> dict:
    """The estimate in this process, with its number of likelihood evaluations."""
    calls = [0]
    model_call = asymptote._SharedC.__call__

    def counted(self, z):
        calls[0] += 1
        return model_call(self, z)

    asymptote._SharedC.__call__ = counted
    try:
        t, cpu = time.perf_counter(), time.process_time()
        est = asymptote.estimate_lower_asymptote(y, np.ones_like(y))
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    finally:
        asymptote._SharedC.__call__ = model_call
    return {"c": round(est.c, 5), "ci95": [round(v, 5) for v in est.ci], "loglik": round(est.loglik, 3),
            "loglik_c0": round(est.loglik_c0, 3), "evaluations": calls[0], "estimate_wall_s": round(wall, 2),
            "estimate_cpu_s": round(cpu, 2)}


def whole_command(csv: Path, benchmark: str, tmp: Path) -> dict:
    """``benchloupe compress B --chance estimate --recovery no`` in its own process, on a fresh workspace."""
    db = tmp / f"{benchmark}.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "benchloupe"]
    subprocess.run([*cli, "import", "wide", str(csv), "--benchmark", benchmark, "--db", str(db)], check=True,
                   env=env, capture_output=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    run = subprocess.run([*cli, "compress", benchmark, "--db", str(db), "--chance", "estimate", "--recovery", "no",
                          "--json"], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode:
        raise SystemExit(run.stderr)
    m = json.loads(run.stdout)["metrics"]
    lines = [ln for ln in run.stderr.splitlines() if "shared lower asymptote" in ln]
    return {"command_wall_s": round(wall, 2),
            "command_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
            "command_c": m["chance_estimated"], "stderr_estimate_lines": len(lines),
            "first_stderr_line": lines[0] if lines else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=None, help="the shared folder: the ARC set too")
    ap.add_argument("--cases", default="sim25,sim0,arc")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_chance_") as tmp:
        tmp = Path(tmp)
        for case in args.cases.split(","):
            if case == "arc":
                if args.shared is None or not (args.shared / ARC).exists():
                    continue
                df = pd.read_csv(args.shared / ARC, index_col=0)
                df.index.name = "model"
                true = None
            else:
                true = int(case.removeprefix("sim")) / 100
                df = simulate(true)
            csv = tmp / f"{case}.csv"
            df.to_csv(csv)
            row = {"case": case, "shape": list(df.shape), "true_c": true,
                   "load_average": round(os.getloadavg()[0], 1)}
            row.update(alone(df.to_numpy(np.int8)))
            row.update(whole_command(csv, f"chance-{case}", tmp))
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
