"""Database growth of a BenchFill session whose annotators send huge replies (issue 10 #12), with the
journal's per-text cap (default 65,536 characters) and without it (``max_stored_chars=0``). One round, 4
annotators x 2 trials, every annotator reply padded to ``--reply-chars``, against the local OpenAI-compatible
server (tests/fake_llm.py). Prints JSON.

    .venv/bin/python bench/bench_journal_cap.py [--reply-chars 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchloupe.engine.benchfill import BenchFillConfig  # noqa: E402
from benchloupe.jobs import fill  # noqa: E402
from benchloupe.store.db import connect  # noqa: E402
from benchloupe.store.fill import DEFAULT_MAX_STORED_CHARS  # noqa: E402
from tests.fake_llm import KEY, FakeLLM  # noqa: E402
from tests.fill_world import BENCH, store_world  # noqa: E402


def one(reply_chars: int, cap: int, folder: Path) -> dict:
    fake = FakeLLM().start()
    try:
        db = folder / f"cap{cap}.db"
        store_world(fake, db)
        os.environ["BENCH_KEY"] = KEY
        common = {"base_url": fake.base_url, "api_key_env": "BENCH_KEY", "timeout": 30.0}
        fill.set_endpoint(db, "rewriter", model="rewriter", **common)
        fill.set_endpoint(db, "judge", model="judge", **common)
        for j in range(4):
            fill.set_endpoint(db, "annotator", name=f"annot-{j}", model=f"annot-{j}", trials=2, **common)
            fake.always[f"annot-{j}"] = "huge"
        fake.huge_chars = reply_chars
        conn = connect(db)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        before = db.stat().st_size
        t0 = time.perf_counter()
        try:
            fill.start_fill(db, BENCH, fill.FillOptions(max_stored_chars=cap), config=BenchFillConfig(max_rounds=1))
        except fill.FillStopped:
            pass
        seconds = time.perf_counter() - t0
        conn = connect(db)
        calls = conn.execute("SELECT count(*), coalesce(sum(length(response)), 0) FROM llm_calls").fetchone()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        return {"max_stored_chars": cap, "llm_calls": calls[0], "stored_response_chars": calls[1],
                "db_growth_mb": round((db.stat().st_size - before) / 2**20, 2), "seconds": round(seconds, 2)}
    finally:
        fake.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reply-chars", type=int, default=200_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [one(args.reply_chars, cap, Path(tmp)) for cap in (DEFAULT_MAX_STORED_CHARS, 0)]
    print(json.dumps({"bench": "journal_cap", "reply_chars": args.reply_chars, "runs": rows,
                      "load_average": os.getloadavg()[0]}, indent=2))


if __name__ == "__main__":
    main()
