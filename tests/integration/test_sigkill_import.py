"""A process killed with SIGKILL in the middle of a large import leaves a sound database without any of it."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pandas as pd

from benchloupe.store import read
from benchloupe.store.db import connect
from benchloupe.store.importers.base import ParsedImport
from benchloupe.store.writer import write_import


def _write_wide(path, n_models, n_items, seed=0):
    rng = np.random.default_rng(seed)
    with open(path, "wb") as fh:
        fh.write(("model," + ",".join(f"i{j}" for j in range(n_items)) + "\n").encode())
        for m in range(n_models):
            line = np.empty(2 * n_items, np.uint8)
            line[0::2] = rng.integers(0, 2, n_items).astype(np.uint8) + ord("0")
            line[1::2] = ord(",")
            line[-1] = ord("\n")
            fh.write(f"m{m},".encode() + line.tobytes())


def test_sigkill_mid_import_leaves_db_intact(tmp_path):
    db = tmp_path / "w.db"
    conn = connect(db)
    small = ParsedImport("kept", "static", pd.DataFrame({"key": ["a", "b"]}), pd.DataFrame({"name": ["x", "y"]}),
                         correct=np.array([[1, 0], [0, 1]], np.int8))
    write_import(conn, small, fmt="test")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    csv = tmp_path / "big.csv"
    _write_wide(csv, 4000, 8000)
    wal = db.with_name(db.name + "-wal")
    base = wal.stat().st_size if wal.exists() else 0
    proc = subprocess.Popen([sys.executable, "-m", "benchloupe", "import", "wide", str(csv), "--benchmark", "big",
                             "--db", str(db)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    killed_at = None
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if wal.exists() and wal.stat().st_size > base + 4_000_000:  # the import's transaction is being written
            killed_at = wal.stat().st_size
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.002)
    proc.wait()
    assert killed_at is not None, f"import finished before it could be killed (rc {proc.returncode})"
    assert proc.returncode == -signal.SIGKILL
    raw = sqlite3.connect(db)
    assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    raw.close()
    conn = connect(db)
    names = {r[0] for r in conn.execute("SELECT name FROM benchmarks")}
    assert names == {"kept"}
    assert conn.execute("SELECT count(*) FROM items").fetchone()[0] == 2
    assert conn.execute("SELECT count(*) FROM models").fetchone()[0] == 2
    np.testing.assert_array_equal(read.load_static(conn, "kept").correct, [[1, 0], [0, 1]])
