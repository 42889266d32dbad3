"""Curator decisions: flag triage, item retire/restore, settings. Every decision lands in the audit log."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchloupe.hints import Alt, say
from benchloupe.words import count

from .actor import by_at, current
from .db import StoreError, audit, transaction

FLAG_STATES = ("open", "confirmed", "dismissed", "unsure")


def flags(conn: sqlite3.Connection, *, run_id: int | None = None, kind: str | None = None,
          state: str | None = None, benchmark_id: int | None = None, parse_payload: bool = True,
          ids: list[int] | None = None) -> pd.DataFrame:
    """Flags (every run's: :func:`benchloupe.store.queue.current_flags` is what the faces list and count) with
    item key/text and model names, ordered by |score| descending then id; *ids*: only those flags. ``payload``
    is a dict, or with ``parse_payload=False`` the stored JSON text (:func:`payload_of` parses one)."""
    sql = "SELECT f.* FROM flags f WHERE 1"
    args: list = []
    if ids is not None:
        sql += " AND f.id IN (SELECT value FROM json_each(?))"
        args.append(json.dumps([int(i) for i in ids]))
    for col, val in (("f.run_id", run_id), ("f.kind", kind), ("f.state", state), ("f.benchmark_id", benchmark_id)):
        if val is not None:
            sql += f" AND {col} = ?"
            args.append(val)
    df = pd.read_sql_query(sql + " ORDER BY abs(coalesce(f.score, 0)) DESC, f.id", conn, params=args)
    # the item's key, text and answer and the models' names, looked up once per item and model named (a LEFT
    # JOIN of each flag made 210,060 copies of them: half the anomaly queue's read, issue 26)
    items = _lookup(conn, "SELECT id, key, text, answer FROM items", df["item_id"])
    names = _lookup(conn, "SELECT id, name FROM models", df["model_id"], df["model_b_id"])
    for col, (table, key, src) in {"item_key": (items, "item_id", 1), "item_text": (items, "item_id", 2),
                                   "item_answer": (items, "item_id", 3), "model": (names, "model_id", 1),
                                   "model_b": (names, "model_b_id", 1)}.items():
        df[col] = _joined(table, src, df[key])
    # one parse of all payloads as a JSON array (each stored payload is one JSON object): 210,000 json.loads calls
    # were a second of the anomaly queue's load (issue 26)
    if parse_payload:
        df["payload"] = json.loads("[" + ",".join(df["payload"].tolist()) + "]") if len(df) else []
    return df


def _lookup(conn: sqlite3.Connection, select: str, *id_columns: pd.Series) -> tuple[pd.Index, list]:
    """Rows of ``select`` (first column the id) for the ids in *id_columns*: (their ids, the rows)."""
    ids = np.unique(np.concatenate([c.to_numpy(float) for c in id_columns]) if id_columns else np.zeros(0))
    ids = ids[~np.isnan(ids)].astype(np.int64).tolist()
    rows = conn.execute(f"{select} WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),)).fetchall() \
        if ids else []
    return pd.Index([r[0] for r in rows], dtype=np.int64), rows


def _joined(table: tuple[pd.Index, list], src: int, ids: pd.Series) -> pd.Series:
    """Column *src* of the looked-up rows for each id (None where there is none), typed as a LEFT JOIN read by
    pandas is: text with NaN for a missing value, or objects when every value is missing."""
    index, rows = table
    column = np.empty(len(rows) + 1, object)  # the last entry: no row
    column[:-1] = [r[src] for r in rows]
    column[-1] = None
    at = index.get_indexer(ids.to_numpy(float)) if len(index) else np.full(len(ids), -1)
    return pd.Series(column[at], index=ids.index)  # -1 takes the last entry


def payload_of(value) -> dict:
    """A flag's payload as a dict, whether :func:`flags` parsed it or left it as its JSON text."""
    return json.loads(value) if isinstance(value, str) else value


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


def latest_flag_run(conn: sqlite3.Connection, benchmark_id: int, kind: str) -> int | None:
    """The run whose flags of *kind* make the triage queue: the latest finished run of an analysis that produces
    that kind (it may have found nothing), else the latest run that holds such flags; None when none does. The
    kinds of run are found by one index probe per run, not a scan of every flag (issue 26)."""
    row = conn.execute(
        "SELECT max(r.id) FROM runs r WHERE r.benchmark_id = ? AND r.status = 'done' AND r.kind IN"
        " (SELECT DISTINCT r2.kind FROM runs r2 WHERE EXISTS (SELECT 1 FROM flags f WHERE f.run_id = r2.id"
        " AND f.kind = ? AND f.benchmark_id = ?))", (benchmark_id, kind, benchmark_id)).fetchone()
    if row and row[0] is not None:
        return int(row[0])
    row = conn.execute("SELECT max(run_id) FROM flags WHERE kind = ? AND benchmark_id = ?",
                       (kind, benchmark_id)).fetchone()
    return int(row[0]) if row and row[0] is not None else None


def queue_flags(conn: sqlite3.Connection, benchmark_id: int, kind: str, *,
                include_superseded: bool = False, parse_payload: bool = True) -> pd.DataFrame:
    """The triage queue of one flag kind on one benchmark: the flags of the latest run that produced that kind.

    Re-running an analysis adds a new set of flags; the earlier sets are *superseded* (``superseded`` True,
    left out unless *include_superseded*). A decision carries over: a current flag still ``open`` with no note
    shows the state and note of the latest decided flag on the same model and item (anomalies) or the same
    unordered pair of models (reversals) in an earlier run, with ``carried_from`` naming that flag; its own
    ``stored_state`` stays as written. Columns as :func:`flags`, plus ``superseded``, ``carried_from`` and
    ``stored_state``.

    Without *include_superseded* only the latest run's flags are read, and of the earlier runs only the decided
    ones (those a decision can carry over from): two anomaly runs at 5,000 x 14,000 are 420,120 flags, and the
    queue shows 210,060 (issue 26). ``parse_payload`` as in :func:`flags`."""
    latest = latest_flag_run(conn, benchmark_id, kind)
    if include_superseded or latest is None:
        df = flags(conn, kind=kind, benchmark_id=benchmark_id, parse_payload=parse_payload)
        earlier_df = None
    else:
        df = flags(conn, kind=kind, benchmark_id=benchmark_id, run_id=latest, parse_payload=parse_payload)
        earlier_df = pd.read_sql_query(
            "SELECT f.id, f.kind, f.item_id, f.model_id, f.model_b_id, f.reason, f.state, f.note FROM flags f"
            " WHERE f.kind = ? AND f.benchmark_id = ? AND (f.run_id IS NULL OR f.run_id != ?)"
            " AND (f.state != 'open' OR f.note != '')", conn, params=[kind, benchmark_id, latest])
    df["stored_state"] = df["state"]
    df["carried_from"] = pd.array([None] * len(df), dtype="Int64")
    if df.empty:
        df["superseded"] = pd.Series([], dtype=bool)
        return df
    if latest is None:
        latest = int(df["run_id"].max())
    superseded = (df["run_id"] != latest).to_numpy()
    df["superseded"] = superseded
    state, note = df["state"].to_numpy(object), df["note"].to_numpy(object)
    if earlier_df is None:
        rows = np.flatnonzero(superseded & ((state != "open") | (note != "")))
        earlier_df = df.iloc[rows]
    earlier: dict = {}
    if len(earlier_df):
        e_ids = _flag_identities(earlier_df)
        e_state, e_note = earlier_df["state"].to_numpy(object), earlier_df["note"].to_numpy(object)
        flag_id = earlier_df["id"].to_numpy()
        for i in np.argsort(flag_id, kind="stable"):  # the latest decision on an identity wins
            earlier[e_ids[i]] = (e_state[i], e_note[i], int(flag_id[i]))
    if earlier:  # carry each decision to the current flag about the same thing (row lookups only where one is)
        open_rows = np.flatnonzero(~superseded & (state == "open") & (note == ""))
        ids = _flag_identities(df.iloc[open_rows])  # only the flags a decision can be carried to
        # a flag about no cell (a coverage gap) carries nothing (store/queue.py)
        hits = [(i, earlier[key]) for i, key in zip(open_rows.tolist(), ids, strict=True)
                if key in earlier and (key[1] is not None or key[2] is not None)]
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
    reasons = df["reason"].tolist() if "reason" in df else [""] * len(df)
    for kind, item, a, b, why in zip(df["kind"].tolist(), ints("item_id"), ints("model_id"), ints("model_b_id"),
                                     reasons, strict=True):
        if b is not None:
            a, b = sorted((a if a is not None else -1, b))
        out.append((kind, item, a, b, why))  # an item audit's flags: the same reason too
    return out


def _flag_identity(r) -> tuple:
    """What a flag is about, independent of the run: the (model, item) cell or the unordered pair."""
    a, b = (None if pd.isna(v) else int(v) for v in (r.model_id, r.model_b_id))
    item = None if pd.isna(r.item_id) else int(r.item_id)
    if b is not None:
        a, b = sorted((a if a is not None else -1, b))
    return (r.kind, item, a, b, getattr(r, "reason", ""))


class Conflict(StoreError):
    """A decision refused because the object changed since the curator saw it (another curator's write, or
    another process of the same curator): nothing was written. ``changes`` has one dict per changed object
    (``id``, ``state``, ``note``, ``by``, ``at``) so a face can refresh what it shows."""

    def __init__(self, message: str, changes: list[dict]) -> None:
        super().__init__(message)
        self.changes = changes


@dataclass(frozen=True)
class Saved:
    """What a decision wrote: each object's new version and the id of its audit row."""

    versions: dict[int, int]
    audit_ids: dict[int, int]


def _describe_flag(row) -> str:
    """``dismissed by bea at 14:02, note: noise`` from a flags row (state, note, updated_by, updated_at)."""
    who = by_at(row["updated_by"], row["updated_at"])
    text = str(row["state"]) + (f" {who}" if who else "")
    if row["note"]:
        note = str(row["note"])
        text += f", note: {note[:60]}{'…' if len(note) > 60 else ''}"
    return text


def set_flag_state(conn: sqlite3.Connection, flag_id: int, state: str, note: str | None = None, *,
                   undo: bool = False, expect_version: int | None = None,
                   expect_state: str | None = None) -> Saved:
    """Triage one flag (confirm / dismiss / unsure / reopen) and keep an optional note; see
    :func:`set_flag_states` for the expectations and the audit row."""
    return set_flag_states(conn, [(flag_id, state, note)], undo=undo,
                           expect=None if expect_version is None else {flag_id: expect_version},
                           expect_state=None if expect_state is None else {flag_id: expect_state})


def set_flag_states(conn: sqlite3.Connection, changes: list[tuple[int, str, str | None]], *,
                    undo: bool = False, expect: Mapping[int, int] | None = None,
                    expect_state: Mapping[int, str] | None = None, undoes: list[int] | None = None,
                    cells: Mapping[int, Cell] | None = None) -> Saved:
    """Triage several flags in one transaction (a batch: the marked flags, or every open flag of one model or
    item): each ``(flag id, state, note or None)`` is written and audited, all or none.

    Optimistic concurrency (issue 25): *expect* maps a flag id to the version the curator saw (``flags.version``
    grows by one with every write), *expect_state* to the state a script expects; when a flag no longer matches,
    :class:`Conflict` names who changed it, when and to what, and nothing of the batch is written. The check and
    the write share one IMMEDIATE transaction, so no other writer can land between them.

    The audit row keeps the state, note and version it replaced (``from``, ``note_from``, ``replaced``: by whom
    and when), so a decision can be undone and the log replayed; *undo* marks a write that restores an earlier
    state (action ``flag:undo``; *undoes*: the audit ids of the decision it takes back). The rows of one batch
    share ``"batch": n`` (the number of flags) in their detail."""
    for _fid, state, _note in changes:
        if state not in FLAG_STATES:
            raise StoreError(f"unknown triage state {state!r}; use one of {', '.join(FLAG_STATES)}")
    who = current()
    versions, audit_ids = {}, {}
    batch_id = uuid.uuid4().hex[:12] if len(changes) > 1 else None
    with transaction(conn):
        ids = [int(fid) for fid, _s, _n in changes]
        rows = {int(r["id"]): r for r in conn.execute(
            f"SELECT {_CELL_SELECT} WHERE f.id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))}
        missing = [fid for fid in ids if fid not in rows]
        if missing:
            raise StoreError(f"no flag with id {missing[0]}" + (
                f" (nor {count(len(missing) - 1, 'other')} of the batch)" if len(missing) > 1 else "")
                + "; nothing was saved")
        if cells:
            _check_cells(rows, cells)
        if not undo:  # an undo takes back a decision where it was made; a new one goes on the current flag
            _check_current(conn, rows)
        stale = [r for fid, r in rows.items()
                 if (expect and fid in expect and int(r["version"]) != int(expect[fid]))
                 or (expect_state and fid in expect_state and r["state"] != expect_state[fid])]
        if stale:
            what = "your undo" if undo else "your decision"
            since = "after your decision" if undo else "since you saw it"
            if len(rows) == 1:
                msg = (f"flag #{stale[0]['id']} changed {since}: now {_describe_flag(stale[0])}; {what} was "
                       "not saved")
            else:
                listed = "; ".join(f"#{r['id']} {_describe_flag(r)}" for r in stale[:3]) + (
                    "; …" if len(stale) > 3 else "")
                msg = (f"{len(stale)} of the {len(rows)} flags changed {since.replace('it', 'them')} ({listed}); "
                       "nothing of the batch was saved")
            raise Conflict(msg, [{"id": int(r["id"]), "state": r["state"], "note": r["note"],
                                  "version": int(r["version"]), "by": r["updated_by"], "at": r["updated_at"]}
                                 for r in stale])
        # each undo row names the one decision row it takes back (its flag's): linear in the batch, where a list
        # of the whole batch's ids on every row made a 4,000-flag undo write 98 MB (issue 37 #2)
        undone_of = _decision_rows(conn, undoes) if undo else {}
        restored = _restored_authors(conn, list(undone_of.values())) if undo else {}
        for flag_id, state, note in changes:
            row = rows[flag_id]
            new_note = row["note"] if note is None else note
            version = int(row["version"]) + 1
            if flag_id in restored:  # an undo brings back the earlier decision: its author and time come back too
                by, at = restored[flag_id]
                conn.execute("UPDATE flags SET state = ?, note = ?, version = ?, updated_by = ?, updated_at = ?"
                             " WHERE id = ?", (state, new_note, version, by or "", at, flag_id))
            else:
                conn.execute("UPDATE flags SET state = ?, note = ?, version = ?, updated_by = ?,"
                             " updated_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') WHERE id = ?",
                             (state, new_note, version, who, flag_id))
            detail = {"from": row["state"], "to": state, "note_from": row["note"], "version": version,
                      "replaced": {"version": int(row["version"]), "by": row["updated_by"], "at": row["updated_at"]},
                      "cell": list(Cell.of(row))}
            if batch_id is not None:
                detail["batch"], detail["batch_id"] = len(changes), batch_id
            if flag_id in undone_of:
                detail["undoes"] = [undone_of[flag_id]]
            audit_ids[flag_id] = audit(conn, "flag:undo" if undo else f"flag:{state}", "flag", flag_id,
                                       json.dumps(detail), new_note, actor=who)
            versions[flag_id] = version
    return Saved(versions, audit_ids)


_CELL_SELECT = ("f.id, f.state, f.note, f.version, f.updated_by, f.updated_at, f.run_id, f.kind, f.benchmark_id,"
                " f.reason,"
                " f.item_id, f.model_id, f.model_b_id, i.key AS item_key, ma.name AS model, mb.name AS model_b"
                " FROM flags f LEFT JOIN items i ON i.id = f.item_id LEFT JOIN models ma ON ma.id = f.model_id"
                " LEFT JOIN models mb ON mb.id = f.model_b_id")


@dataclass(frozen=True)
class Cell:
    """What a flag is about, as the curator saw it (issue 37 #1): its kind, its run, the item's key and the
    models' names. A decision names the cell with the flag id, and is refused when the id now names another
    cell (the database file was replaced by another workspace, or rebuilt)."""

    kind: str
    run_id: int | None
    item: str | None
    model: str | None
    model_b: str | None

    @staticmethod
    def of(row) -> Cell:
        """The cell of a flag row (store rows or a queue's frame row: kind, run_id, item_key, model, model_b)."""
        def text(v):
            return None if v is None or (isinstance(v, float) and v != v) or v is pd.NA else str(v)

        run = row["run_id"]
        return Cell(str(row["kind"]), None if run is None or pd.isna(run) else int(run), text(row["item_key"]),
                    text(row["model"]), text(row["model_b"]))

    def __iter__(self):
        return iter((self.kind, self.run_id, self.item, self.model, self.model_b))

    def describe(self) -> str:
        what = ", ".join(x for x in (self.model, self.model_b, self.item) if x)
        return f"{self.kind}{' ' + what if what else ''}, run #{self.run_id}"


class CellChanged(StoreError):
    """A decision refused because its flag id now names another cell than the one the curator saw."""


class Superseded(StoreError):
    """A decision refused because its flag belongs to an earlier run: ``current`` maps each such flag id to the
    current flag on the same cell (None when the latest run did not flag it)."""

    def __init__(self, message: str, current: dict[int, int | None]) -> None:
        super().__init__(message)
        self.current = current


def _check_cells(rows: Mapping[int, sqlite3.Row], cells: Mapping[int, Cell]) -> None:
    """:class:`CellChanged` when a flag of *rows* is not about the cell the decision names for it."""
    moved = [(fid, cells[fid], Cell.of(r)) for fid, r in rows.items() if fid in cells and Cell.of(r) != cells[fid]]
    if not moved:
        return
    fid, saw, now = moved[0]
    more = f" (and {count(len(moved) - 1, 'other flag')})" if len(moved) > 1 else ""
    raise CellChanged(f"flag #{fid} is not the flag you decided on: you saw {saw.describe()}, the database now has "
                      f"{now.describe()} under that id{more} (the file was replaced or rebuilt); nothing was saved")


def _check_current(conn: sqlite3.Connection, rows: Mapping[int, sqlite3.Row]) -> None:
    """:class:`Superseded` when a flag of *rows* is not of the latest run of its kind (issue 32 #1: a script
    triaged a flag of a superseded run, which no screen shows), naming the current flag on the same cell."""
    latest = {}
    for r in rows.values():
        key = (r["benchmark_id"], r["kind"])
        if key not in latest:
            latest[key] = None if key[0] is None else latest_flag_run(conn, int(key[0]), key[1])
    old = [r for r in rows.values() if latest[(r["benchmark_id"], r["kind"])] not in (None, r["run_id"])]
    if not old:
        return
    current = {}
    for r in old[:50]:
        a, b = r["model_id"], r["model_b_id"]
        hit = conn.execute(
            "SELECT id FROM flags WHERE run_id = ? AND kind = ? AND benchmark_id = ? AND item_id IS ?"
            " AND reason IS ? AND ((model_id IS ? AND model_b_id IS ?) OR (model_b_id IS NOT NULL AND model_id IS ?"
            " AND model_b_id IS ?)) ORDER BY id LIMIT 1",
            (latest[(r["benchmark_id"], r["kind"])], r["kind"], r["benchmark_id"], r["item_id"], r["reason"], a, b,
             b, a)
        ).fetchone() if (r["item_id"] is not None or a is not None) else None
        current[int(r["id"])] = None if hit is None else int(hit[0])
    r = old[0]
    run = latest[(r["benchmark_id"], r["kind"])]
    now = current[int(r["id"])]
    there = (f"the current flag on that cell is #{now}: decide that one" if now is not None
             else f"run #{run} did not flag that cell, so there is nothing to decide on it")
    more = (f" (and {count(len(old) - 1, 'other flag')} of the batch; nothing of it was saved)" if len(old) > 1
            else "; nothing was saved")
    raise Superseded(f"flag #{r['id']} ({Cell.of(r).describe()}) is of an earlier run, superseded by run #{run}; "
                     f"{there}{more}", current)


def _decision_rows(conn: sqlite3.Connection, audit_ids: list[int] | None) -> dict[int, int]:
    """flag id -> the audit row of *audit_ids* that decided it (what an undo of them takes back, per flag)."""
    if not audit_ids:
        return {}
    return {int(r[1]): int(r[0]) for r in conn.execute(
        "SELECT id, entity_id FROM audit_log WHERE entity = 'flag' AND id IN (SELECT value FROM json_each(?))"
        " ORDER BY id", (json.dumps([int(a) for a in audit_ids]),))}


def _restored_authors(conn: sqlite3.Connection, audit_ids: list[int] | None) -> dict[int, tuple]:
    """flag id -> (by, at) of the state the decisions *audit_ids* replaced (what their undo brings back)."""
    out = {}
    if not audit_ids:
        return out
    for row in conn.execute("SELECT entity_id, detail FROM audit_log WHERE entity = 'flag' AND id IN"
                            " (SELECT value FROM json_each(?)) ORDER BY id", (json.dumps(list(audit_ids)),)):
        rep = json.loads(row["detail"] or "{}").get("replaced") or {}
        out[int(row["entity_id"])] = (rep.get("by") or "", rep.get("at"))
    return out


def undo_latest(conn: sqlite3.Connection, flag_id: int | None = None) -> dict:
    """Undo this curator's own latest flag decision (on *flag_id* when given) that is not undone yet: the flags
    of that decision (a whole batch, however large) get back the state and note it replaced, audited as
    ``flag:undo``, one row per flag naming the decision row it takes back. Refused (:class:`Conflict`, nothing
    written) when anyone changed one of them since that decision. Returns ``{"undone": audit ids, "flags": {id:
    state restored}}``.

    The curator's decisions are read newest first until the first one not undone (before, only the latest
    5,000 audit rows were read: a 6,000-flag batch was undone in part, and its rest could not be undone, issue
    37 #2); a batch's rows are one run of consecutive audit ids (one transaction), read by id range."""
    who = current()
    cur = conn.execute(
        "SELECT id, entity_id, action, json_extract(detail, '$.undoes'), json_extract(detail, '$.batch_id'),"
        " json_extract(detail, '$.batch') FROM audit_log WHERE entity = 'flag' AND actor = ? ORDER BY id DESC",
        (who,))
    undone: set[int] = set()
    target = None
    try:
        for aid, entity_id, action, undoes, batch_id, n in cur:
            if action == "flag:undo":
                undone.update(int(u) for u in json.loads(undoes or "[]"))
            elif int(aid) not in undone and (flag_id is None or int(entity_id) == flag_id):
                target = (int(aid), batch_id, int(n or 1))
                break
    finally:
        cur.close()
    if target is None:
        raise StoreError(f"{who} has no decision to undo" + (f" on flag {flag_id}" if flag_id is not None else ""))
    aid, batch_id, n = target
    fix = conn.execute("SELECT entity_id, json_extract(detail, '$.fix_key') FROM audit_log WHERE id = ?",
                       (aid,)).fetchone()
    if fix[1] is not None:  # a key fix (issue 33): the item's answer and results come back too
        from .itemkeys import undo_fix_key

        item = conn.execute("SELECT item_id FROM flags WHERE id = ?", (int(fix[0]),)).fetchone()
        out = undo_fix_key(conn, int(item[0]))
        return {"undone": [aid], "flags": {int(fix[0]): "open"}, "fix_key": out}
    if batch_id:  # the other rows of the same batch: consecutive ids up to the target (one transaction)
        sql = ("SELECT id, entity_id, detail FROM audit_log WHERE entity = 'flag' AND actor = ? AND"
               " json_extract(detail, '$.batch_id') = ? AND action != 'flag:undo'")
        group = conn.execute(sql + " AND id BETWEEN ? AND ?", (who, batch_id, aid - n + 1, aid)).fetchall()
        if len(group) < n:  # not one run of ids (written by an older version): the whole log
            group = conn.execute(sql, (who, batch_id)).fetchall()
        group = [r for r in group if int(r["id"]) not in undone]
    else:
        group = conn.execute("SELECT id, entity_id, detail FROM audit_log WHERE id = ?", (aid,)).fetchall()
    changes, expect, expect_state = [], {}, {}
    for r in group:
        d = json.loads(r["detail"] or "{}")
        changes.append((int(r["entity_id"]), d["from"], d.get("note_from", "")))
        if "version" in d:
            expect[int(r["entity_id"])] = int(d["version"])
        else:  # written before versions were kept: at least the state it set must still be there
            expect_state[int(r["entity_id"])] = d.get("to")
    # a flag whose every later change was taken back (a batch over it, then that batch's undo) is as the decision
    # left it, at a later version: the decision before a batch can be undone after the batch is
    expect |= _taken_back_since(conn, {int(r["entity_id"]): int(r["id"]) for r in group if int(r["entity_id"]) in
                                       expect})
    set_flag_states(conn, changes, undo=True, expect=expect, expect_state=expect_state,
                    undoes=[int(r["id"]) for r in group])
    return {"undone": [int(r["id"]) for r in group], "flags": {fid: st for fid, st, _n in changes}}


def _taken_back_since(conn: sqlite3.Connection, decided: dict[int, int]) -> dict[int, int]:
    """flag id -> its version now, for the flags of *decided* (flag id -> an audit row on it) whose every later
    audit row was taken back: each later decision is undone by a later ``flag:undo`` row."""
    if not decided:
        return {}
    later: dict[int, list[tuple[int, str, str | None]]] = {}
    for aid, fid, action, undoes in conn.execute(
            "SELECT a.id, a.entity_id, a.action, json_extract(a.detail, '$.undoes') FROM json_each(?) j"
            " JOIN audit_log a ON a.entity = 'flag' AND a.entity_id = CAST(j.key AS INTEGER) AND a.id > j.value"
            " ORDER BY a.id", (json.dumps({str(k): v for k, v in decided.items()}),)):
        later.setdefault(int(fid), []).append((int(aid), action, undoes))
    moved = [fid for fid in later if _all_taken_back(later[fid])]
    if not moved:
        return {}
    return {int(r[0]): int(r[1]) for r in conn.execute(
        "SELECT id, version FROM flags WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(moved),))}


def _all_taken_back(rows: list[tuple[int, str, str | None]]) -> bool:
    undone = set()
    for _aid, action, undoes in rows:
        if action == "flag:undo":
            undone.update(int(u) for u in json.loads(undoes or "[]"))
    return all(action == "flag:undo" or aid in undone for aid, action, _u in rows)


def flag_history(conn: sqlite3.Connection, flag_ids: list[int] | None = None, *, limit: int = 20) -> pd.DataFrame:
    """The audit rows of flags (every flag when *flag_ids* is None), latest first, at most *limit* per flag:
    ``flag_id, at, actor, action, state, note``."""
    sql = ("SELECT entity_id AS flag_id, at, actor, action, json_extract(detail, '$.to') AS state, note,"
           " row_number() OVER (PARTITION BY entity_id ORDER BY id DESC) AS k, id FROM audit_log"
           " WHERE entity = 'flag'")
    args: list = []
    if flag_ids is not None:
        ids = [int(i) for i in flag_ids]
        if not ids:
            return pd.DataFrame(columns=["flag_id", "at", "actor", "action", "state", "note"])
        sql += f" AND entity_id IN ({','.join('?' * len(ids))})"
        args += ids
    df = pd.read_sql_query(f"SELECT * FROM ({sql}) WHERE k <= ? ORDER BY flag_id, id DESC", conn,
                           params=[*args, limit])
    return df.drop(columns=["k", "id"])


def set_item_status(conn: sqlite3.Connection, item_id: int, status: str, note: str = "", *,
                    expect_status: str | None = None) -> None:
    """Retire or restore an item; retired items drop out of new fits but keep their results. With
    *expect_status* (the status the curator saw) the write is refused (:class:`Conflict`) when the item's status
    is another by now, naming who changed it and when (from the audit log)."""
    if status not in ("active", "retired"):
        raise StoreError(f"unknown item status {status!r}; use active or retired")
    with transaction(conn):
        row = conn.execute("SELECT key, status FROM items WHERE id = ?", (item_id,)).fetchone()
        if row is None:
            raise StoreError(f"no item with id {item_id}")
        if expect_status is not None and row["status"] != expect_status:
            last = conn.execute("SELECT actor, at FROM audit_log WHERE entity = 'item' AND entity_id = ?"
                                " ORDER BY id DESC LIMIT 1", (item_id,)).fetchone()
            who = by_at(last["actor"], last["at"]) if last else ""
            raise Conflict(f"item {row['key']} is now {row['status']}{' ' + who if who else ''}, since you saw "
                           "it; nothing was changed", [{"id": item_id, "state": row["status"],
                                                        "by": last["actor"] if last else "",
                                                        "at": last["at"] if last else None}])
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


def replay_flags(conn: sqlite3.Connection) -> dict:
    """The audit log replayed from empty (every flag open with no note, as a run creates it): each flag's
    state, note and version after its audited writes in order. Returns ``{"states": {id: (state, note,
    version)}, "gaps": [...], "mismatches": [...]}``: *gaps* are writes missing from the log (a version that
    does not follow the previous one), *mismatches* the flags whose stored row differs from the replay."""
    states: dict[int, tuple[str, str, int]] = {}
    gaps = []
    for r in conn.execute("SELECT id, entity_id, detail, note FROM audit_log WHERE entity = 'flag' ORDER BY id"):
        d = json.loads(r["detail"] or "{}")
        fid = int(r["entity_id"])
        prev = states.get(fid, ("open", "", 0))
        version = int(d.get("version", prev[2] + 1))
        if version != prev[2] + 1:
            gaps.append({"flag": fid, "audit_id": int(r["id"]), "expected": prev[2] + 1, "found": version})
        states[fid] = (d.get("to", prev[0]), r["note"], version)
    mismatches = []
    for row in conn.execute("SELECT id, state, note, version FROM flags"):
        want = states.get(int(row["id"]), ("open", "", 0))
        if (row["state"], row["note"], int(row["version"])) != want:
            mismatches.append({"flag": int(row["id"]), "stored": (row["state"], row["note"], int(row["version"])),
                               "replayed": want})
    return {"states": states, "gaps": gaps, "mismatches": mismatches}
