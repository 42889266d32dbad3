"""Helpers for the team tests (issue 25, issue 21 #3): keys sent as the terminal driver sends them, a writer
lock held from another connection, a small BenchFill session written through the store, and the audit log."""

from __future__ import annotations

import json
import sqlite3
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

KEYS = {" ": "space", "-": "minus", "/": "slash", "'": "apostrophe", ".": "full_stop", ",": "comma"}


def burst(app, keys) -> None:
    """Send *keys* to the app the way the terminal driver does (``driver.send_message``), all at once and
    without waiting for the app between them: a fast typist, or a loaded machine that lets keys pile up."""
    from textual import events

    for key in keys:
        name = KEYS.get(key, key)
        event = events.Key(name, key if len(key) == 1 else None)
        event.set_sender(app)
        app._driver.send_message(event)


@contextmanager
def writer_lock(db: Path):
    """Hold SQLite's write lock from another connection: the app's writes wait (busy timeout) until the block
    ends, as they do behind another curator's long import."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def audit_rows(db: Path, entity: str | None = None) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        sql = "SELECT * FROM audit_log" + (" WHERE entity = ?" if entity else "") + " ORDER BY id"
        rows = [dict(r) for r in conn.execute(sql, (entity,) if entity else ())]
    finally:
        conn.close()
    for r in rows:
        r["detail"] = json.loads(r["detail"] or "{}")
    return rows


def flag_rows(db: Path, kind: str | None = None) -> pd.DataFrame:
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return curation.flags(conn, kind=kind).set_index("id")
    finally:
        conn.close()


def small_session(db: Path, benchmark: str = "demo-math", n: int = 4, *, approvals: int | None = None) -> int:
    """A BenchFill session with *n* reviewable proposals (valid, calibrated), written as a runner writes them."""
    from benchloupe.store import fill, read
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        bid = read.benchmark_id(conn, benchmark)
        items = read.items(conn, benchmark)
        config = {} if approvals is None else {"approvals": approvals}
        sid = fill.create_session(conn, bid, 0.4, 0.6, 0.5, config)
        for k in range(n):
            parent = items.iloc[k]
            fill.upsert_candidate(conn, sid, f"r1.s0.c{k}", round_=1, parent_item_id=int(parent["id"]),
                                  text=f"{parent['text']} (rewritten {k})", answer=str(parent["answer"]) or "1",
                                  payload={"se": 0.2}, valid=True, difficulty_raw=0.1 * k,
                                  difficulty_norm=0.45 + 0.01 * k, distance=0.05 + 0.01 * k)
        fill.set_session_state(conn, sid, "proposed", "")
        return sid
    finally:
        conn.close()


def candidate_rows(db: Path, sid: int) -> pd.DataFrame:
    from benchloupe.store import fill
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return fill.candidates(conn, sid, reviewable_only=False).set_index("id")
    finally:
        conn.close()
