"""Benchmark summaries as plain rows (no pandas): ``benchloupe list`` starts in a fraction of a second because it
imports neither pandas nor numpy (issue 16, start-up)."""

from __future__ import annotations

import sqlite3
from array import array

SUMMARY_SQL = """
SELECT b.id, b.name, b.kind,
  (SELECT count(*) FROM items i WHERE i.benchmark_id = b.id) AS items,
  (SELECT count(*) FROM items i WHERE i.benchmark_id = b.id AND i.status = 'active') AS active_items,
  (SELECT count(*) FROM benchmark_models bm WHERE bm.benchmark_id = b.id) AS models,
  (SELECT count(*) FROM static_results s WHERE s.benchmark_id = b.id) AS static_rows,
  (SELECT count(*) FROM arena_rewards r JOIN items i ON i.id = r.item_id WHERE i.benchmark_id = b.id)
    AS rewards,
  (SELECT count(*) FROM preferences p JOIN items i ON i.id = p.item_id WHERE i.benchmark_id = b.id)
    AS preferences,
  (SELECT kind || ' #' || id || ' ' || status FROM runs r WHERE r.benchmark_id = b.id
     OR r.id IN (SELECT run_id FROM run_inputs WHERE benchmark_id = b.id) ORDER BY id DESC LIMIT 1) AS last_run
FROM benchmarks b ORDER BY b.name
"""


def benchmark_summary_rows(conn: sqlite3.Connection) -> tuple[list[str], list[tuple]]:
    """Column names and one row per benchmark: counts and the last run."""
    cur = conn.execute(SUMMARY_SQL)
    return [d[0] for d in cur.description], cur.fetchall()


def static_cell_counts(conn: sqlite3.Connection) -> tuple[dict[int, int], set[int]]:
    """Observed static cells per benchmark id, counted on the packed per-model vectors without numpy (an int8
    ``correct`` vector marks a missing cell -1; a binomial row has int32 ``trials``, 0 = missing), and the ids of
    benchmarks that also hold non-static items, whose cells the caller counts through ``read.static_cell_count``
    (their vectors are laid out over every item position)."""
    mixed = {r[0] for r in conn.execute("SELECT DISTINCT benchmark_id FROM items WHERE kind != 'static'")}
    out: dict[int, int] = {}
    for bid, n, correct, trials in conn.execute("SELECT benchmark_id, n, correct, trials FROM static_results"):
        if bid in mixed:
            continue
        if correct is not None:
            seen = n - bytes(correct[:n]).count(b"\xff")
        else:
            t = array("i")
            t.frombytes(bytes(trials[:4 * n]))
            seen = n - t.count(0)
        out[bid] = out.get(bid, 0) + seen
    return out, mixed


def summary_rows(conn: sqlite3.Connection) -> tuple[list[str], list[tuple]]:
    """:func:`benchmark_summary_rows` with ``results`` (the observed static cells, ``read.static_cell_count``) in
    place of ``static_rows``, without pandas or numpy: ``benchloupe list`` and the Benchmarks screen."""
    cols, rows = benchmark_summary_rows(conn)
    counts, mixed = static_cell_counts(conn)
    at = cols.index("static_rows")
    out = []
    for r in rows:
        if r[0] in mixed:
            n = _mixed_cell_count(conn, r[0])
        else:
            n = counts.get(r[0], 0)
        out.append(r[:at] + (n,) + r[at + 1:])
    return cols[:at] + ["results"] + cols[at + 1:], out


def _mixed_cell_count(conn: sqlite3.Connection, bid: int) -> int:
    """Observed static cells of a benchmark that also holds other items: ``read.static_cell_count`` (the mask
    of ``load_static``'s matrix, retired items included) counted at the static items' positions of each of its
    models' packed rows, without numpy."""
    pos = [r[0] for r in conn.execute("SELECT pos FROM items WHERE benchmark_id = ? AND kind = 'static'", (bid,))]
    models = {r[0] for r in conn.execute("SELECT model_id FROM benchmark_models WHERE benchmark_id = ?", (bid,))}
    seen = 0
    for mid, n, correct, trials in conn.execute(
            "SELECT model_id, n, correct, trials FROM static_results WHERE benchmark_id = ?", (bid,)):
        if mid not in models:
            continue
        at = [p for p in pos if p < n]
        if correct is not None:
            cells = bytes(correct[:n])
            seen += sum(1 for p in at if cells[p] < 0x80)  # an int8 >= 0 (-1 is a missing cell)
        else:
            t = array("i")
            t.frombytes(bytes(trials[:4 * n]))
            seen += sum(1 for p in at if t[p] > 0)
    return seen


RECENT_RUNS_SQL = """SELECT r.id, r.kind, r.status, r.created_at, r.error FROM runs r LEFT JOIN benchmarks b ON
b.id = r.benchmark_id WHERE b.name = ? OR r.id IN (SELECT ri.run_id FROM run_inputs ri JOIN benchmarks bi ON
bi.id = ri.benchmark_id WHERE bi.name = ?) ORDER BY r.id DESC LIMIT ?"""


def recent_runs(conn: sqlite3.Connection, benchmark: str, limit: int = 4) -> list[dict]:
    """The latest *limit* runs on *benchmark* or using it as an input (``runs.list_runs``' rows and order):
    id, kind, status, created_at, error."""
    cur = conn.execute(RECENT_RUNS_SQL, (benchmark, benchmark, limit))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]
