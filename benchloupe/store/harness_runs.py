"""Which harness runs the stored results of a benchmark come from (lm-eval re-runs, issues 23 and 37).

Every import of lm-eval samples records, in its ``imports`` row (``counts`` JSON, key ``runs``), the runs whose
cells it stored: for each run the file's sha256 and ``run_id`` (timestamp and sha256: lm-eval's samples carry no
date, so two runs that answered alike write the same bytes, while a copy keeps both), path, timestamp, task, model, recorded identity, the settings
compared for re-runs and a short digest per item of its document and target (``docs``). With that, a later
``--reruns trials`` import knows what the stored successes/trials already count: it adds only runs not counted
yet (a file already imported, or a copy of it, is not counted twice), refuses runs whose documents or settings
differ from the counted ones, and never silently replaces them (2/2 must not become 1/1).

The runs a cell currently counts, per (model, task, identity): walking the benchmark's imports in order, an
import that replaced the benchmark (``--replace``) forgets every run, an import that stored a group's runs
without adding to them (the default ``--reruns newest``, or the first trials import) starts that group afresh,
and an import that added trials (``accumulate``) extends it.
"""

from __future__ import annotations

import json
import sqlite3

Group = tuple[str, str, str]  # (model, task, identity)


def current_runs(conn: sqlite3.Connection, benchmark: str) -> dict[Group, list[dict]]:
    """The runs whose results the stored cells of ``benchmark`` count, per (model, task, identity)."""
    rows = conn.execute(
        "SELECT i.counts, i.replaced FROM imports i JOIN benchmarks b ON b.id = i.benchmark_id "
        "WHERE b.name = ? ORDER BY i.id", (benchmark,)).fetchall()
    out: dict[Group, list[dict]] = {}
    for counts, replaced in rows:
        if replaced:
            out.clear()
        try:
            info = json.loads(counts or "{}")
        except ValueError:
            continue
        runs = info.get("runs") if isinstance(info, dict) else None
        if not isinstance(runs, list):
            continue
        fresh: set[Group] = set()
        for run in runs:
            if not isinstance(run, dict):
                continue
            key = (str(run.get("model")), str(run.get("task")), str(run.get("identity")))
            if not run.get("accumulate") and key not in fresh:
                out[key] = []
                fresh.add(key)
            out.setdefault(key, []).append(run)
    return out
