"""What the damaged-database check costs (issue 24, defect 3): ``store.db.connect`` runs ``PRAGMA quick_check``
once per file and process before anything reads or writes it. Measured on a database of the DIF paper's largest
shape, 5,000 models x 14,042 items, written by the real writer (one int8 vector per model), against the same open
without the check and against ``PRAGMA integrity_check``. Prints JSON with the load average.

Usage: ``python bench/bench_db_open.py [--models 5000 --items 14042]`` from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def build(path: Path, n_models: int, n_items: int) -> None:
    from benchloupe.store.db import connect
    from benchloupe.store.importers.base import ParsedImport
    from benchloupe.store.writer import write_import

    rng = np.random.default_rng(0)
    y = (rng.random((n_models, n_items)) < 0.6).astype(np.int8)
    y[rng.random(y.shape) < 0.02] = -1
    conn = connect(path)
    write_import(conn, ParsedImport("big", "static", pd.DataFrame({"key": [f"i{j:05d}" for j in range(n_items)],
                                                                   "text": [f"question {j} " * 8 for j in range(n_items)]}),
                                    pd.DataFrame({"name": [f"model-{i:05d}" for i in range(n_models)]}), correct=y),
                 fmt="bench")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def best(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=5000)
    ap.add_argument("--items", type=int, default=14042)
    args = ap.parse_args()
    from benchloupe.store import db as store_db

    tmp = Path(tempfile.mkdtemp(prefix="bench-db-open-"))
    path = tmp / "big.db"
    t = time.perf_counter()
    build(path, args.models, args.items)
    built = time.perf_counter() - t

    def first_open():  # a fresh process's first open: the check runs
        store_db._SOUND.clear()
        store_db.connect(path).close()

    def cached_open():  # later opens in the same process (a job's heartbeat, the workbench's workers)
        store_db.connect(path).close()

    def pragma(name: str):
        def run():
            conn = sqlite3.connect(path)
            conn.execute(f"PRAGMA {name}").fetchall()
            conn.close()
        return run

    out = {"models": args.models, "items": args.items, "db_mb": round(path.stat().st_size / 1e6, 1),
           "build_s": round(built, 2), "load_avg_1m": round(os.getloadavg()[0], 2),
           "connect_first_s": round(best(first_open), 4), "connect_cached_s": round(best(cached_open), 4),
           "quick_check_s": round(best(pragma("quick_check")), 4),
           "integrity_check_s": round(best(pragma("integrity_check"), 3), 4)}
    out["check_share_of_first_open"] = round(1 - out["connect_cached_s"] / out["connect_first_s"], 2)
    print(json.dumps(out, indent=1))
    for p in tmp.iterdir():
        p.unlink()
    tmp.rmdir()


if __name__ == "__main__":
    main()
