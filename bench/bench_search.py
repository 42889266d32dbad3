"""Item search (issue 16 #5): ``search_items`` as a store call and ``benchloupe search`` as a whole process over a
14,000-item and a 41,871-item benchmark with simulated text (Zipf-distributed words of a 30,000-word vocabulary,
20-60 words an item, metadata with a source and a year), plus what the index costs: the import of the 41,871 items
with the index's triggers and without them, the migration that indexes an existing database, and the file size.

Queries: a rare word (10 items in each benchmark), a mid-frequency word, the most frequent word (in most items: the worst case, all
its hits are ranked by bm25 before the limit), two words, one benchmark only, and a raw prefix query. Each figure
is the best of ``--repeats`` (ms); the load average is printed beside them (the machine is shared).
Query sizes (issue 37): one frequent word repeated 500, 1,000, 2,000 and 4,000 times (plain words; 0.6 / 2.2 / 8.3 /
32.9 s before repeats counted once), and the time to refuse a 15,000-term raw OR query (over the maximum).
Usage: ``python bench/bench_search.py [--repeats 5] [--query-sizes-only]`` from the repository root
(``--query-sizes-only``: only the 14,000-item benchmark and the query sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchloupe.store.db import connect  # noqa: E402
from benchloupe.store.importers.base import ParsedImport  # noqa: E402
from benchloupe.store.schema import SCHEMA_VERSION  # noqa: E402
from benchloupe.store.search import plain_query, search_items  # noqa: E402
from benchloupe.store.writer import write_import  # noqa: E402

SIZES = {"sim-14000": 14000, "sim-41871": 41871}


def _vocabulary(n: int, rng) -> list[str]:
    syll = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(syll, size=rng.integers(1, 4))))
    return sorted(words, key=lambda w: (len(w), w))  # short words first: they are the frequent ones


def _parsed(name: str, n: int, vocab: list[str], rng) -> ParsedImport:
    ranks = np.minimum(rng.zipf(1.15, size=n * 60), len(vocab)) - 1
    lengths = rng.integers(20, 61, size=n)
    texts, at = [], 0
    for length in lengths:
        texts.append(" ".join(vocab[r] for r in ranks[at:at + length]) + "?")
        at += length
    for j in rng.choice(n, size=10, replace=False):
        texts[j] += " quasar"
    items = pd.DataFrame({"key": [f"{name}-{j:05d}" for j in range(n)], "text": texts,
                          "group": [f"topic-{j % 37}" for j in range(n)],
                          "answer": [vocab[r] for r in ranks[:n]],
                          "metadata": [{"source": f"src-{j % 11}", "year": 2000 + j % 25} for j in range(n)]})
    y = (rng.random((2, n)) < 0.5).astype(np.int8)
    return ParsedImport(name, "static", items, pd.DataFrame({"name": ["m0", "m1"]}), correct=y, source="bench")


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return round(min(times) * 1000, 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--query-sizes-only", action="store_true")
    args = ap.parse_args()
    if args.query_sizes_only:
        print(json.dumps(query_sizes(args.repeats), indent=2))
        return
    rng = np.random.default_rng(0)
    vocab = _vocabulary(30000, rng)
    tmp = Path(tempfile.mkdtemp())
    parsed = {name: _parsed(name, n, vocab, rng) for name, n in SIZES.items()}
    out: dict = {"load_before": os.getloadavg()[0]}

    db = tmp / "search.db"
    conn = connect(db)
    t = time.perf_counter()
    for p in parsed.values():
        write_import(conn, p, fmt="bench")
    out["import_both_with_index_s"] = round(time.perf_counter() - t, 2)
    conn.close()

    plain = tmp / "noindex.db"  # the same imports with the index's triggers dropped: what the index costs
    conn = connect(plain)
    for trig in ("items_fts_insert", "items_fts_update", "items_fts_delete", "items_fts_benchmark_name"):
        conn.execute(f"DROP TRIGGER {trig}")
    t = time.perf_counter()
    for p in parsed.values():
        write_import(conn, p, fmt="bench")
    out["import_both_without_index_s"] = round(time.perf_counter() - t, 2)
    conn.close()

    old = tmp / "old.db"  # a database made before the migration, with the same items: the migration's cost
    shutil.copy(plain, old)
    raw = sqlite3.connect(old, isolation_level=None)
    for stmt in ("DROP TABLE items_fts", f"PRAGMA user_version = {SCHEMA_VERSION - 1}"):
        raw.execute(stmt)
    raw.execute("VACUUM")
    raw.close()
    t = time.perf_counter()
    connect(old).close()
    out["migration_index_55871_items_s"] = round(time.perf_counter() - t, 2)

    for path in (db, plain):
        c = sqlite3.connect(path)
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        c.execute("VACUUM")
        c.close()
    out["db_mb_with_index"] = round(db.stat().st_size / 1e6, 1)
    out["db_mb_without_index"] = round(plain.stat().st_size / 1e6, 1)

    conn = connect(db)
    frequent, mid = vocab[0], vocab[200]
    queries = {
        "rare word (10 items in each benchmark)": dict(query="quasar"),
        f"mid-frequency word ({mid})": dict(query=mid),
        f"most frequent word ({frequent})": dict(query=frequent),
        "two words": dict(query=f"{frequent} {mid}"),
        "one benchmark (14,000)": dict(query=mid, benchmark="sim-14000"),
        "raw prefix": dict(query=mid[:2] + "*", raw=True),
    }
    store = {}
    for label, kw in queries.items():
        fts = kw["query"] if kw.get("raw") else plain_query(kw["query"])
        where = " AND i.benchmark_id = (SELECT id FROM benchmarks WHERE name = ?)" if "benchmark" in kw else ""
        n_match = conn.execute("SELECT count(*) FROM items_fts JOIN items i ON i.id = items_fts.rowid"
                               " WHERE items_fts MATCH ?" + where,
                               [fts] + ([kw["benchmark"]] if where else [])).fetchone()[0]
        ms = _best(lambda kw=kw: search_items(conn, limit=50, **kw), args.repeats)
        store[label] = {"ms": ms, "matching_items": n_match}
    out["store_call_limit_50"] = store
    out["query_sizes"] = query_sizes(args.repeats, conn)
    conn.close()

    process = {}
    for label, argv in {"rare word": ["quasar"], "most frequent word": [frequent],
                        "most frequent word --json": [frequent, "--json"], "--help": None}.items():
        cmd = [sys.executable, "-m", "benchloupe"] + (["search", *argv, "--db", str(db)] if argv else ["--help"])
        process[label] = _best(lambda cmd=cmd: subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT),
                               max(3, args.repeats // 2))
    out["cli_process_ms"] = process
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=2))
    shutil.rmtree(tmp, ignore_errors=True)


def query_sizes(repeats: int, conn=None) -> dict:
    """ms to search one frequent word repeated 500..4,000 times, and to refuse a 15,000-term raw OR query."""
    from benchloupe.store.db import StoreError

    rng = np.random.default_rng(0)
    vocab = _vocabulary(30000, rng)
    tmp = None
    if conn is None:
        tmp = Path(tempfile.mkdtemp())
        conn = connect(tmp / "sizes.db")
        write_import(conn, _parsed("sim-14000", SIZES["sim-14000"], vocab, rng), fmt="bench")
    word = vocab[0]
    out: dict = {"load_before": os.getloadavg()[0], "word": word}
    for n in (500, 1000, 2000, 4000):
        query = " ".join([word] * n)
        out[f"repeated_{n}_ms"] = _best(lambda q=query: search_items(conn, q, limit=50), repeats)

    def refuse():
        try:
            search_items(conn, " OR ".join(vocab[:15000]), raw=True)
        except StoreError:
            return
        raise AssertionError("a 15,000-term query was searched")

    out["raw_or_15000_refused_ms"] = _best(refuse, repeats)
    out["load_after"] = os.getloadavg()[0]
    if tmp is not None:
        conn.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


if __name__ == "__main__":
    main()
