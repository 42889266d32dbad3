"""Schema for the item audit (issue 33): flags of kind 'item' with a reason, item choices, stored options."""

from __future__ import annotations

import sqlite3

import pytest

from benchloupe.store import schema
from benchloupe.store.db import _split, connect


def test_a_database_of_the_previous_schema_migrates_and_takes_item_flags(tmp_path):
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    for target, script in enumerate(schema.MIGRATIONS[:4]):
        for st in _split(script):
            raw.execute(st)
        raw.execute(f"PRAGMA user_version = {target + 1}")
    raw.execute("INSERT INTO benchmarks (name) VALUES ('b')")
    raw.execute("INSERT INTO items (benchmark_id, pos, key) VALUES (1, 0, 'q1')")
    raw.execute("INSERT INTO flags (kind, benchmark_id, note) VALUES ('anomaly', 1, 'kept')")
    with pytest.raises(sqlite3.IntegrityError):
        raw.execute("INSERT INTO flags (kind, benchmark_id) VALUES ('item', 1)")
    raw.close()
    conn = connect(path)
    try:
        conn.execute("INSERT INTO flags (kind, benchmark_id, item_id, reason) VALUES ('item', 1, 1, 'miskeyed')")
        rows = [tuple(r) for r in conn.execute("SELECT kind, note, reason FROM flags ORDER BY id")]
        assert rows == [("anomaly", "kept", ""), ("item", "", "miskeyed")]
        assert conn.execute("SELECT choices FROM items").fetchone()[0] == "[]"
        cols = [r[1] for r in conn.execute("PRAGMA table_info(static_results)")]
        assert "options" in cols
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("INSERT INTO flags (kind, benchmark_id) VALUES ('bogus', 1)")
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
