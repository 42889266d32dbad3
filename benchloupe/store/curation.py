"""Curator decisions: flag triage, item retire/restore, settings. Every decision lands in the audit log."""

from __future__ import annotations

import json
import sqlite3

import pandas as pd

from .db import StoreError, audit, transaction

FLAG_STATES = ("open", "confirmed", "dismissed", "unsure")


def flags(conn: sqlite3.Connection, *, run_id: int | None = None, kind: str | None = None,
          state: str | None = None, benchmark_id: int | None = None) -> pd.DataFrame:
    """Flags with item key/text and model names, ordered by |score| descending then id."""
    sql = ("SELECT f.*, i.key AS item_key, i.text AS item_text, i.answer AS item_answer, ma.name AS model,"
           " mb.name AS model_b FROM flags f LEFT JOIN items i ON i.id = f.item_id"
           " LEFT JOIN models ma ON ma.id = f.model_id LEFT JOIN models mb ON mb.id = f.model_b_id WHERE 1")
    args: list = []
    for col, val in (("f.run_id", run_id), ("f.kind", kind), ("f.state", state), ("f.benchmark_id", benchmark_id)):
        if val is not None:
            sql += f" AND {col} = ?"
            args.append(val)
    df = pd.read_sql_query(sql + " ORDER BY abs(coalesce(f.score, 0)) DESC, f.id", conn, params=args)
    df["payload"] = [json.loads(p) for p in df["payload"]]
    return df


def set_flag_state(conn: sqlite3.Connection, flag_id: int, state: str, note: str | None = None) -> None:
    """Triage one flag (confirm / dismiss / unsure / reopen) and keep an optional note."""
    if state not in FLAG_STATES:
        raise StoreError(f"unknown triage state {state!r}; use one of {', '.join(FLAG_STATES)}")
    with transaction(conn):
        row = conn.execute("SELECT state, note FROM flags WHERE id = ?", (flag_id,)).fetchone()
        if row is None:
            raise StoreError(f"no flag with id {flag_id}")
        new_note = row["note"] if note is None else note
        conn.execute("UPDATE flags SET state = ?, note = ?, updated_at = strftime('%Y-%m-%dT%H:%M:%f', 'now')"
                     " WHERE id = ?", (state, new_note, flag_id))
        audit(conn, f"flag:{state}", "flag", flag_id, json.dumps({"from": row["state"], "to": state}), new_note)


def set_item_status(conn: sqlite3.Connection, item_id: int, status: str, note: str = "") -> None:
    """Retire or restore an item; retired items drop out of new fits but keep their results."""
    if status not in ("active", "retired"):
        raise StoreError(f"unknown item status {status!r}; use active or retired")
    with transaction(conn):
        row = conn.execute("SELECT status FROM items WHERE id = ?", (item_id,)).fetchone()
        if row is None:
            raise StoreError(f"no item with id {item_id}")
        conn.execute("UPDATE items SET status = ? WHERE id = ?", (status, item_id))
        audit(conn, "item:retire" if status == "retired" else "item:restore", "item", item_id,
              json.dumps({"from": row["status"], "to": status}), note)


def put_setting(conn: sqlite3.Connection, key: str, value) -> None:
    with transaction(conn):
        conn.execute("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", (key, json.dumps(value)))


def audit_log(conn: sqlite3.Connection, limit: int = 200) -> pd.DataFrame:
    return pd.read_sql_query("SELECT * FROM audit_log ORDER BY id DESC LIMIT ?", conn, params=[limit])
