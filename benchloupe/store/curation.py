"""Curator decisions: flag triage, item retire/restore, settings. Every decision lands in the audit log."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pandas as pd

from benchloupe.hints import Alt, say

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
    # one parse of all payloads as a JSON array (each stored payload is one JSON object): 210,000 json.loads calls
    # were a second of the anomaly queue's load (issue 26)
    df["payload"] = json.loads("[" + ",".join(df["payload"].tolist()) + "]") if len(df) else []
    return df


def flag_cells(conn: sqlite3.Connection, run_id: int, kind: str, fields: tuple[str, ...]) -> list[dict]:
    """``model``, ``item`` (key) and the payload ``fields`` of one run's flags of ``kind``, in :func:`flags`'
    order (|score| descending, then id): what a command prints, read by SQLite's JSON functions without a frame
    of every column and a parse of every payload (an anomalies run at 5,000 x 14,000 holds 210,000 flags)."""
    cols = ", ".join(f"json_extract(f.payload, '$.{name}')" for name in fields)
    sql = (f"SELECT ma.name, i.key, {cols} FROM flags f LEFT JOIN items i ON i.id = f.item_id"
           " LEFT JOIN models ma ON ma.id = f.model_id WHERE f.run_id = ? AND f.kind = ?"
           " ORDER BY abs(coalesce(f.score, 0)) DESC, f.id")
    return [{"model": r[0], "item": r[1], **dict(zip(fields, r[2:], strict=True))}
            for r in conn.execute(sql, (run_id, kind))]


def queue_flags(conn: sqlite3.Connection, benchmark_id: int, kind: str, *,
                include_superseded: bool = False) -> pd.DataFrame:
    """The triage queue of one flag kind on one benchmark: the flags of the latest run that produced that kind.

    Re-running an analysis adds a new set of flags; the earlier sets are *superseded* (``superseded`` True,
    left out unless *include_superseded*). A decision carries over: a current flag still ``open`` with no note
    shows the state and note of the latest decided flag on the same model and item (anomalies) or the same
    unordered pair of models (reversals) in an earlier run, with ``carried_from`` naming that flag; its own
    ``stored_state`` stays as written. Columns as :func:`flags`, plus ``superseded``, ``carried_from`` and
    ``stored_state``."""
    df = flags(conn, kind=kind, benchmark_id=benchmark_id)
    df["stored_state"] = df["state"]
    df["carried_from"] = pd.array([None] * len(df), dtype="Int64")
    if df.empty:
        df["superseded"] = pd.Series([], dtype=bool)
        return df
    # the latest finished run of an analysis that produces this kind (it may have found nothing)
    row = conn.execute(
        "SELECT max(r.id) FROM runs r WHERE r.benchmark_id = ? AND r.status = 'done' AND r.kind IN"
        " (SELECT DISTINCT r2.kind FROM flags f JOIN runs r2 ON r2.id = f.run_id WHERE f.kind = ?"
        " AND f.benchmark_id = ?)", (benchmark_id, kind, benchmark_id)).fetchone()
    latest = int(row[0]) if row and row[0] is not None else int(df["run_id"].max())
    superseded = (df["run_id"] != latest).to_numpy()
    df["superseded"] = superseded
    ids = _flag_identities(df)
    state, note = df["state"].to_numpy(object), df["note"].to_numpy(object)
    decided = np.flatnonzero(superseded & ((state != "open") | (note != "")))
    earlier: dict = {}
    flag_id = df["id"].to_numpy()
    for i in decided[np.argsort(flag_id[decided], kind="stable")]:  # the latest decision on an identity wins
        earlier[ids[i]] = (state[i], note[i], int(flag_id[i]))
    if earlier:  # carry each decision to the current flag about the same thing (row lookups only where one is)
        hits = [(i, earlier[ids[i]]) for i in np.flatnonzero(~superseded & (state == "open") & (note == ""))
                if ids[i] in earlier]
        if hits:
            rows = np.array([i for i, _ in hits])
            df.iloc[rows, df.columns.get_loc("state")] = [h[0] for _, h in hits]
            df.iloc[rows, df.columns.get_loc("note")] = [h[1] for _, h in hits]
            df.iloc[rows, df.columns.get_loc("carried_from")] = [h[2] for _, h in hits]
    if not include_superseded:
        df = df[~df["superseded"]]
    return df.reset_index(drop=True)


def _flag_identities(df: pd.DataFrame) -> list[tuple]:
    """:func:`_flag_identity` of every row, from the columns at once (210,000 anomaly flags: no row objects)."""
    def ints(col):
        v = df[col].to_numpy(float)
        return [None if x != x else int(x) for x in v.tolist()]

    out = []
    for kind, item, a, b in zip(df["kind"].tolist(), ints("item_id"), ints("model_id"), ints("model_b_id"),
                                strict=True):
        if b is not None:
            a, b = sorted((a if a is not None else -1, b))
        out.append((kind, item, a, b))
    return out


def _flag_identity(r) -> tuple:
    """What a flag is about, independent of the run: the (model, item) cell or the unordered pair."""
    a, b = (None if pd.isna(v) else int(v) for v in (r.model_id, r.model_b_id))
    item = None if pd.isna(r.item_id) else int(r.item_id)
    if b is not None:
        a, b = sorted((a if a is not None else -1, b))
    return (r.kind, item, a, b)


def set_flag_state(conn: sqlite3.Connection, flag_id: int, state: str, note: str | None = None, *,
                   undo: bool = False) -> None:
    """Triage one flag (confirm / dismiss / unsure / reopen) and keep an optional note.

    The audit row keeps the state and note it replaced (``from``, ``note_from``), so a decision can be undone;
    *undo* marks a write that restores an earlier state (action ``flag:undo``)."""
    set_flag_states(conn, [(flag_id, state, note)], undo=undo)


def set_flag_states(conn: sqlite3.Connection, changes: list[tuple[int, str, str | None]], *,
                    undo: bool = False) -> None:
    """Triage several flags in one transaction (a batch: the marked flags, or every open flag of one model or
    item): each ``(flag id, state, note or None)`` is written and audited as :func:`set_flag_state` does, all
    or none. The audit rows of one batch share ``"batch": n`` (the number of flags) in their detail."""
    for _fid, state, _note in changes:
        if state not in FLAG_STATES:
            raise StoreError(f"unknown triage state {state!r}; use one of {', '.join(FLAG_STATES)}")
    with transaction(conn):
        for flag_id, state, note in changes:
            row = conn.execute("SELECT state, note FROM flags WHERE id = ?", (flag_id,)).fetchone()
            if row is None:
                raise StoreError(f"no flag with id {flag_id}")
            new_note = row["note"] if note is None else note
            conn.execute("UPDATE flags SET state = ?, note = ?, updated_at = strftime('%Y-%m-%dT%H:%M:%f', 'now')"
                         " WHERE id = ?", (state, new_note, flag_id))
            detail = {"from": row["state"], "to": state, "note_from": row["note"]}
            if len(changes) > 1:
                detail["batch"] = len(changes)
            audit(conn, "flag:undo" if undo else f"flag:{state}", "flag", flag_id, json.dumps(detail), new_note)


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


MODEL_REFS = (("benchmark_models", "model_id"), ("static_results", "model_id"), ("arena_rewards", "model_id"),
              ("preferences", "model_a"), ("preferences", "model_b"), ("run_models", "model_id"),
              ("flags", "model_id"), ("flags", "model_b_id"), ("model_aliases", "model_id"))


def alias_model(conn: sqlite3.Connection, model: str, alias: str, note: str = "") -> dict:
    """Record that *alias* names *model* (the same system under another name in another source).

    When *alias* is already a separate model (imported from another file), its results are merged into *model*
    and the alias row is removed; refused when both hold results in the same benchmark. A run that fitted both
    as two models (a joint fit before the alias) keeps its row of *alias* in the run's ``merged_models``
    artifact, so the run's results stay complete. Audited.
    """
    return alias_models(conn, model, [alias], note)[0]


def _keep_run_rows(conn: sqlite3.Connection, model: str, mid: int, alias: str, oid: int) -> None:
    """Runs that fitted *model* and *alias* as two models keep the alias's row as a ``merged_models`` artifact
    (``run_models`` has one row per model and run, and the two become one model)."""
    cols = ("theta", "se", "lo", "hi", "rank", "rank_lo", "rank_hi", "extra")
    runs = [r[0] for r in conn.execute(
        "SELECT x.run_id FROM run_models x JOIN run_models y ON x.run_id = y.run_id"
        " WHERE x.model_id = ? AND y.model_id = ?", (mid, oid))]
    for run_id in runs:
        row = conn.execute(f"SELECT {', '.join(cols)} FROM run_models WHERE run_id = ? AND model_id = ?",
                           (run_id, oid)).fetchone()
        old = conn.execute("SELECT data FROM run_artifacts WHERE run_id = ? AND name = 'merged_models'",
                           (run_id,)).fetchone()
        kept = json.loads(old[0]) if old else []
        kept.append({"name": alias, "merged_into": model, **{c: row[c] for c in cols[:-1]},
                     "extra": json.loads(row["extra"] or "{}")})
        conn.execute("INSERT OR REPLACE INTO run_artifacts (run_id, name, format, data) VALUES (?, 'merged_models',"
                     " 'json', ?)", (run_id, json.dumps(kept)))
        conn.execute("DELETE FROM run_models WHERE run_id = ? AND model_id = ?", (run_id, oid))


def alias_models(conn: sqlite3.Connection, model: str, aliases: list[str], note: str = "") -> list[dict]:
    """:func:`alias_model` for several aliases in one transaction: all are recorded, or none."""
    with transaction(conn):
        return [_alias_one(conn, model, a, note) for a in aliases]


def _alias_one(conn: sqlite3.Connection, model: str, alias: str, note: str) -> dict:
    row = conn.execute("SELECT id FROM models WHERE name = ?", (model,)).fetchone()
    if row is None:
        raise StoreError(say(f"no model named {model!r}; ",
                                 Alt("`benchloupe show BENCHMARK` lists a benchmark's models", "screen 2 lists them")))
    mid = int(row[0])
    other = conn.execute("SELECT id FROM models WHERE name = ?", (alias,)).fetchone()
    merged = False
    if other is not None and int(other[0]) != mid:
        oid = int(other[0])
        shared = conn.execute(
            "SELECT b.name FROM benchmark_models x JOIN benchmark_models y ON x.benchmark_id = y.benchmark_id"
            " JOIN benchmarks b ON b.id = x.benchmark_id WHERE x.model_id = ? AND y.model_id = ?",
            (mid, oid)).fetchone()
        if shared is not None:
            raise StoreError(f"{model!r} and {alias!r} both have results in benchmark {shared[0]!r}; they are "
                             "different systems there, so they cannot be merged")
        _keep_run_rows(conn, model, mid, alias, oid)
        for table, col in MODEL_REFS:
            conn.execute(f"UPDATE {table} SET {col} = ? WHERE {col} = ?", (mid, oid))
        conn.execute("DELETE FROM models WHERE id = ?", (oid,))
        merged = True
    owner = conn.execute("SELECT model_id FROM model_aliases WHERE alias = ?", (alias,)).fetchone()
    if owner is not None and int(owner[0]) != mid:
        raise StoreError(f"alias {alias!r} already names another model; remove it first")
    conn.execute("INSERT OR IGNORE INTO model_aliases (alias, model_id) VALUES (?, ?)", (alias, mid))
    audit(conn, "model:alias", "model", mid, json.dumps({"alias": alias, "merged": merged}), note)
    return {"model": model, "alias": alias, "merged": merged}
