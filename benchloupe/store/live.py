"""What changed in the store, cheaply: stamps that live views compare to reload only what changed (issue 25).

The workbench polls ``PRAGMA data_version`` (which moves whenever another connection commits) a few times a
second; when it moves, the screen on view reads its :func:`stamp` (a few index lookups and small counts) and
reloads only when the topics it shows changed, and a queue reloads only its flags when only flags changed. A
topic's stamp:

- ``flags``: the latest flag decision (audit log, by index) and the flags' count and highest id (a run adds some);
- ``runs``: count, highest id, how many are running, the latest finish;
- ``items``: count, highest id, how many are retired, the latest item decision;
- ``models``: count, highest id, the latest alias;
- ``fill``: the latest journal row, the latest proposal decision or approval, the sessions' last update, the
  review leases (who holds which; heartbeats leave it alone);
- ``benchmarks``: count and highest id, the latest import.
"""

from __future__ import annotations

import sqlite3

TOPICS = ("flags", "runs", "items", "models", "fill", "benchmarks")

_SQL = {
    "flags": ("SELECT (SELECT max(id) FROM audit_log WHERE entity = 'flag'), count(*), max(id) FROM flags"),
    "runs": "SELECT count(*), max(id), sum(status = 'running'), max(finished_at) FROM runs",
    "items": ("SELECT count(*), max(id), sum(status = 'retired'),"
              " (SELECT max(id) FROM audit_log WHERE entity = 'item') FROM items"),
    "models": ("SELECT count(*), max(id), (SELECT count(*) FROM model_aliases),"
               " (SELECT max(id) FROM audit_log WHERE entity = 'model') FROM models"),
    "fill": ("SELECT (SELECT max(id) FROM fill_events), (SELECT max(id) FROM audit_log WHERE entity ="
             " 'fill_candidate'), (SELECT count(*) FROM fill_candidates), (SELECT max(updated_at) FROM"
             " fill_sessions), (SELECT group_concat(candidate_id || ':' || holder || ':' || since) FROM"
             " fill_reviews), (SELECT count(*) FROM fill_approvals)"),
    "benchmarks": ("SELECT count(*), max(id), (SELECT max(id) FROM imports),"
                   " (SELECT max(id) FROM audit_log WHERE entity = 'benchmark') FROM benchmarks"),
}


def stamp(conn: sqlite3.Connection, topics: tuple[str, ...] = TOPICS) -> dict[str, tuple]:
    """The stamp of each of *topics* (see the module docstring); equal stamps mean nothing they cover changed."""
    return {t: tuple(conn.execute(_SQL[t]).fetchone()) for t in topics}


def changed(old: dict[str, tuple] | None, new: dict[str, tuple]) -> set[str]:
    """The topics whose stamp differs (all of them when there was no earlier stamp)."""
    if old is None:
        return set(new)
    return {t for t, v in new.items() if old.get(t) != v}
