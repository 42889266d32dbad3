"""Items' keys and the chosen options behind their results (issue 33): reading the stored options as a matrix,
and the curator's *fix key* decision, which records an item's new answer and re-scores its results from the
stored options in the same transaction, audited (``item:fix-key``, with how many results changed) and undoable
(``item:fix-key-undo`` restores the answer it replaced and re-scores again)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np

from benchloupe.hints import Alt, say

from .actor import current
from .db import StoreError, audit, transaction


class KeyConflict(StoreError):
    """A key fix refused because the item's key changed since the curator saw it (nothing was written);
    ``changes`` as curation.Conflict's."""

    def __init__(self, message: str, changes: list[dict]) -> None:
        super().__init__(message)
        self.changes = changes


def load_options(conn: sqlite3.Connection, bid: int, model_ids: list[int], pos: np.ndarray) -> np.ndarray | None:
    """Chosen option per (model, item position) as int8 (index into the item's choices, -1 unknown), rows in
    *model_ids* order and columns at *pos*; None when no result row of the benchmark holds options."""
    rows = {r[0]: r[1] for r in conn.execute(
        "SELECT model_id, options FROM static_results WHERE benchmark_id = ? AND options IS NOT NULL", (bid,))}
    if not rows:
        return None
    pos = np.asarray(pos, np.int64)
    out = np.full((len(model_ids), len(pos)), -1, np.int8)
    for i, mid in enumerate(model_ids):
        blob = rows.get(int(mid))
        if blob is None:
            continue
        vec = np.frombuffer(blob, np.int8)
        ok = pos < len(vec)
        out[i, ok] = vec[pos[ok]]
    return out


def item_choices(conn: sqlite3.Connection, bid: int) -> dict[int, list[str]]:
    """items.id -> its choices (option labels; [] when unknown)."""
    return {int(r[0]): json.loads(r[1] or "[]") for r in conn.execute(
        "SELECT id, choices FROM items WHERE benchmark_id = ?", (bid,))}


def _rescore(conn: sqlite3.Connection, bid: int, pos: int, answer_idx: int) -> int:
    """Re-score one item position of every result row that holds its option; the number of cells changed."""
    changed = 0
    rows = conn.execute("SELECT model_id, correct, options FROM static_results WHERE benchmark_id = ?"
                        " AND options IS NOT NULL AND correct IS NOT NULL", (bid,)).fetchall()
    for mid, correct, options in rows:
        opt = np.frombuffer(options, np.int8)
        if pos >= len(opt) or opt[pos] < 0:
            continue
        vec = np.frombuffer(correct, np.int8).copy()
        new = np.int8(1 if opt[pos] == answer_idx else 0)
        if vec[pos] != new:
            vec[pos] = new
            changed += 1
            conn.execute("UPDATE static_results SET correct = ? WHERE benchmark_id = ? AND model_id = ?",
                         (vec.tobytes(), bid, mid))
    return changed


def fix_key(conn: sqlite3.Connection, item_id: int, answer: str, note: str = "", *,
            expect_answer: str | None = None, flag_id: int | None = None, undo_of: int | None = None,
            undo_flag_audit: int | None = None) -> dict:
    """Record *answer* as the item's key and re-score its results from the stored options, one transaction.

    *answer* is one of the item's choices (its label). With *expect_answer* (the key the curator saw) the write
    is refused (:class:`KeyConflict`) when the stored answer is another by now. With *flag_id* the item flag is
    confirmed in the same transaction (the decision on it). Returns ``{"item", "from", "to", "changed",
    "audit_id"}``."""
    with transaction(conn):
        row = conn.execute("SELECT id, benchmark_id, pos, key, answer, choices FROM items WHERE id = ?",
                           (item_id,)).fetchone()
        if row is None:
            raise StoreError(f"no item with id {item_id}")
        choices = json.loads(row["choices"] or "[]")
        if not choices:
            raise StoreError(say(f"item {row['key']} has no stored options to re-score (its results were "
                                 "imported as 0/1); import the chosen options (", Alt("`import wide FILE --options`",
                                 "a wide file imported with options"), ") to fix its key here"))
        answer = str(answer).strip()
        if answer not in choices:
            raise StoreError(f"{answer!r} is not one of item {row['key']}'s choices ({', '.join(choices)})")
        if expect_answer is not None and str(row["answer"]) != str(expect_answer):
            raise KeyConflict(f"item {row['key']}'s key is now {row['answer']!r}, not {expect_answer!r} as you saw "
                           "it; nothing was changed", [{"id": item_id, "state": row["answer"]}])
        if answer == row["answer"]:
            raise StoreError(f"item {row['key']}'s key is already {answer!r}; nothing to change")
        changed = _rescore(conn, int(row["benchmark_id"]), int(row["pos"]), choices.index(answer))
        conn.execute("UPDATE items SET answer = ? WHERE id = ?", (answer, item_id))
        detail = {"from": row["answer"], "to": answer, "changed": changed, "flag": flag_id}
        if undo_of is not None:
            detail["undoes"] = undo_of
        if flag_id is not None:
            f = conn.execute("SELECT state, note, version FROM flags WHERE id = ? AND item_id = ?",
                             (flag_id, item_id)).fetchone()
            if f is None:
                raise StoreError(f"flag {flag_id} is not about item {row['key']}")
            state = "open" if undo_of is not None else "confirmed"
            conn.execute("UPDATE flags SET state = ?, note = ?, version = version + 1, updated_by = ?,"
                         " updated_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') WHERE id = ?",
                         (state, note or f["note"], current(), flag_id))
            flag_detail = {"from": f["state"], "to": state, "note_from": f["note"], "version": int(f["version"]) + 1,
                           "fix_key": answer}
            if undo_flag_audit is not None:
                flag_detail["undoes"] = [undo_flag_audit]
            detail["flag_audit"] = audit(conn, "flag:undo" if undo_of is not None else "flag:confirmed", "flag",
                                         flag_id, json.dumps(flag_detail), note or f["note"])
        aid = audit(conn, "item:fix-key-undo" if undo_of is not None else "item:fix-key", "item", item_id,
                    json.dumps(detail), note)
    return {"item": row["key"], "from": row["answer"], "to": answer, "changed": changed, "audit_id": aid}


def undo_fix_key(conn: sqlite3.Connection, item_id: int) -> dict:
    """Undo the latest key fix on the item that is not undone yet: its answer back, results re-scored."""
    rows = conn.execute("SELECT id, action, detail FROM audit_log WHERE entity = 'item' AND entity_id = ?"
                        " AND action IN ('item:fix-key', 'item:fix-key-undo') ORDER BY id DESC", (item_id,)).fetchall()
    undone = {json.loads(r["detail"]).get("undoes") for r in rows if r["action"] == "item:fix-key-undo"}
    target = next((r for r in rows if r["action"] == "item:fix-key" and int(r["id"]) not in undone), None)
    if target is None:
        raise StoreError(f"item {item_id} has no key fix to undo")
    d = json.loads(target["detail"])
    return fix_key(conn, item_id, d["from"], expect_answer=d["to"], flag_id=d.get("flag"),
                   undo_of=int(target["id"]), undo_flag_audit=d.get("flag_audit"))
