"""What an accept costs now that coverage keeps its C.6 intervals (issue 21 item 7), printed as JSON.

A BenchFill accept recomputes coverage. It used to run without uncertainty draws (``uncertainty="none"``), so the
Coverage screen showed "max gap 95% interval nan-nan" and no gap interval; it now reruns the latest coverage
run's own settings (Laplace draws with the accepted items in every draw). This times, in one process:

- on the demo's demo-math (a real BenchFill session on the simulated endpoints): ``accept_s``, the whole
  ``jobs.fill.decide_candidate(..., "accept")`` as the app and ``review`` run it (the item written, then coverage
  recomputed with draws); ``recompute_draws_s``, ``jobs.fill.recompute_coverage`` alone; ``recompute_none_s``,
  the recompute the accept ran before (``CoverageConfig(uncertainty="none")``);
- on the shared ChemBench matrix (2,854 items, when ../shared/data is present) with one accepted item in it: the
  two recomputes.

Usage: ``python bench/bench_accept_coverage.py [--repeat 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"


def _workspace(tmp: Path) -> tuple[Path, str]:
    from benchloupe.jobs import build_demo

    db = tmp / "bench.db"
    build_demo(db)  # demo-math and its simulated endpoints
    if not (DATA / "chembench").exists():
        return db, "demo-math"
    for args in (["wide", "chembench/matrix_models_all_correct.csv.gz", "--benchmark", "chembench",
                  "--models-file", "chembench/respondents.csv"],
                 ["items", "chembench/questions.csv.gz", "--benchmark", "chembench", "--text-col", "input",
                  "--answer-col", "target", "--group-col", "topic_dir"]):
        subprocess.run([sys.executable, "-m", "benchloupe", "import", *args, "--db", str(db)], cwd=DATA, check=True,
                       capture_output=True)
    return db, "chembench"


def _added_item(db: Path, bench: str) -> None:
    """An item with no results and an online-calibrated difficulty, as an accept writes it (store/fill.py)."""
    from benchloupe.store.db import connect

    conn = connect(db)
    bid = conn.execute("SELECT id FROM benchmarks WHERE name = ?", (bench,)).fetchone()[0]
    pos = conn.execute("SELECT coalesce(max(pos) + 1, 0) FROM items WHERE benchmark_id = ?", (bid,)).fetchone()[0]
    conn.execute("INSERT INTO items (benchmark_id, pos, key, text, answer, grp, kind, origin, metadata) VALUES"
                 " (?, ?, ?, 'q', 'a', '', 'static', 'benchfill', ?)",
                 (bid, pos, f"bench-added-{pos}", json.dumps({"difficulty_raw": 0.5})))
    conn.commit()
    conn.close()


def _times(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(round(time.perf_counter() - t, 3))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from benchloupe.engine.benchfill import BenchFillConfig
    from benchloupe.jobs import ANALYSES
    from benchloupe.jobs.coverage import CoverageConfig, run_coverage
    from benchloupe.jobs.fill import FillOptions, decide_candidate, recompute_coverage
    from benchloupe.prompts import simulated
    from benchloupe.store import fill as fillstore
    from benchloupe.store.db import connect
    from benchloupe.tui.jobs_ui import run_fill

    rows = []
    with tempfile.TemporaryDirectory() as d:
        db, big = _workspace(Path(d))
        # the whole accept, on the demo (a real session on the simulated endpoints)
        ANALYSES["coverage"].run(db, "demo-math", CoverageConfig())
        with simulated.serving():
            sid = run_fill(lambda *a: None, threading.Event(), str(db), "demo-math", FillOptions(),
                           BenchFillConfig())["session"]
        conn = connect(db)
        cands = iter(fillstore.candidates(conn, sid)["id"].astype(int).tolist())
        conn.close()
        rows.append({"benchmark": "demo-math", "items": 240,
                     "accept_s": _times(lambda: decide_candidate(db, next(cands), "accept", "bench"), args.repeat),
                     "recompute_draws_s": _times(lambda: recompute_coverage(db, "demo-math"), args.repeat),
                     "recompute_none_s": _times(lambda: run_coverage(db, "demo-math", CoverageConfig(uncertainty="none")),
                                                args.repeat)})
        if big != "demo-math":  # the recompute on a full-size benchmark, one accepted item in it
            ANALYSES["coverage"].run(db, big, CoverageConfig())
            _added_item(db, big)
            conn = connect(db)
            n = conn.execute("SELECT count(*) FROM items i JOIN benchmarks b ON b.id = i.benchmark_id"
                             " WHERE b.name = ?", (big,)).fetchone()[0]
            conn.close()
            rows.append({"benchmark": big, "items": n,
                         "recompute_draws_s": _times(lambda: recompute_coverage(db, big), args.repeat),
                         "recompute_none_s": _times(lambda: run_coverage(db, big, CoverageConfig(uncertainty="none")),
                                                    args.repeat)})
    print(json.dumps({"rows": rows, "loadavg": [round(x, 2) for x in os.getloadavg()]}))


if __name__ == "__main__":
    main()
