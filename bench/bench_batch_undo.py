"""Batch decisions and their undo (issue 37 #2): for batches of 1,000 to 50,000 flags, the CPU time of the batch
(``set_flag_states``) and of its undo (``undo_latest``: the whole batch, one transaction), the bytes of their
audit rows (detail and note) and the database file's growth after each (checkpointed). Before, each undo row held
every audit id of the batch: 4,000 flags wrote 98 MB of undo rows, and batches above 5,000 were undone in part.
Usage: ``python bench/bench_batch_undo.py [--sizes 1000,6000,50000]`` from the repository root; prints JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measure(n: int, folder: Path) -> dict:
    from benchloupe.store import curation
    from benchloupe.store.db import connect
    from tests.unit.test_batch_undo import _audit_bytes, _workspace

    db = folder / f"undo-{n}.db"
    ids = _workspace(db, n)
    conn = connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size0 = db.stat().st_size
        t = time.process_time()
        curation.set_flag_states(conn, [(f, "dismissed", None) for f in ids])
        batch_s = time.process_time() - t
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size1 = db.stat().st_size
        t = time.process_time()
        out = curation.undo_latest(conn)
        undo_s = time.process_time() - t
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size2 = db.stat().st_size
        assert len(out["undone"]) == n
        return {"flags": n, "batch_cpu_s": round(batch_s, 3), "undo_cpu_s": round(undo_s, 3),
                "batch_audit_bytes": _audit_bytes(conn, "flag:dismissed")[1],
                "undo_audit_bytes": _audit_bytes(conn, "flag:undo")[1],
                "file_growth_batch_bytes": size1 - size0, "file_growth_undo_bytes": size2 - size1}
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,6000,50000")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(int(n), Path(tmp)) for n in args.sizes.split(",")]
    print(json.dumps({"batch_undo": rows}, indent=1))


if __name__ == "__main__":
    main()
