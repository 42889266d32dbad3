"""BenchFill persistence: sessions, their journal, LLM calls, the review queue and curator decisions.

The session's journal (``fill_events``) is append-only and written as each thing happens, one short
transaction per record, so a killed process loses nothing completed; resuming replays it. Candidates are the
valid, calibrated children waiting for a human; only :func:`decide` with "accept" inserts an item.
"""

from __future__ import annotations

import json
import sqlite3

import pandas as pd

from .db import StoreError, audit, transaction


def create_session(conn: sqlite3.Connection, benchmark_id: int, gap_lo: float, gap_hi: float, target: float,
                   config: dict) -> int:
    with transaction(conn):
        sid = conn.execute(
            "INSERT INTO fill_sessions (benchmark_id, gap_lo, gap_hi, target, config, updated_at)"
            " VALUES (?, ?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
            (benchmark_id, gap_lo, gap_hi, target, json.dumps(config)),
        ).lastrowid
        audit(conn, "fill:start", "fill_session", sid, json.dumps({"gap": [gap_lo, gap_hi], "target": target}))
    return int(sid)


def set_session_state(conn: sqlite3.Connection, session_id: int, state: str, message: str = "") -> None:
    with transaction(conn):
        conn.execute("UPDATE fill_sessions SET state = ?, message = ?, updated_at = strftime('%Y-%m-%dT%H:%M:%SZ',"
                     " 'now') WHERE id = ?", (state, message, session_id))


def session(conn: sqlite3.Connection, session_id: int) -> dict:
    row = conn.execute("SELECT s.*, b.name AS benchmark FROM fill_sessions s JOIN benchmarks b ON b.id = s.benchmark_id"
                       " WHERE s.id = ?", (session_id,)).fetchone()
    if row is None:
        raise StoreError(f"no BenchFill session {session_id}; `benchloupe fill --list` shows them")
    d = dict(row)
    d["config"] = json.loads(d["config"])
    return d


def sessions(conn: sqlite3.Connection, benchmark: str | None = None) -> pd.DataFrame:
    sql = ("SELECT s.id, b.name AS benchmark, s.gap_lo, s.gap_hi, s.target, s.state, s.message, s.created_at,"
           " s.updated_at, (SELECT count(*) FROM fill_candidates c WHERE c.session_id = s.id) AS candidates,"
           " (SELECT count(*) FROM fill_candidates c WHERE c.session_id = s.id AND c.review_state = 'pending')"
           " AS pending FROM fill_sessions s JOIN benchmarks b ON b.id = s.benchmark_id")
    args = []
    if benchmark:
        sql += " WHERE b.name = ?"
        args.append(benchmark)
    return pd.read_sql_query(sql + " ORDER BY s.id DESC", conn, params=args)


def append_event(conn: sqlite3.Connection, session_id: int, kind: str, round_: int | None, payload: dict) -> None:
    with transaction(conn):
        conn.execute("INSERT INTO fill_events (session_id, round, kind, payload) VALUES (?, ?, ?, ?)",
                     (session_id, round_, kind, json.dumps(payload)))


def events(conn: sqlite3.Connection, session_id: int, kinds: tuple[str, ...] | None = None) -> list[tuple[str, dict]]:
    sql = "SELECT kind, payload FROM fill_events WHERE session_id = ?"
    args: list = [session_id]
    if kinds:
        sql += f" AND kind IN ({','.join('?' * len(kinds))})"
        args += list(kinds)
    return [(k, json.loads(p)) for k, p in conn.execute(sql + " ORDER BY id", args)]


def record_llm_call(conn: sqlite3.Connection, session_id: int, call: dict) -> None:
    """One LLM call: role, base_url, model, prompt, response, latency_s, tokens, status, error (never a key)."""
    with transaction(conn):
        conn.execute(
            "INSERT INTO llm_calls (session_id, role, base_url, model, prompt, response, latency_s, prompt_tokens,"
            " completion_tokens, status, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (session_id, call.get("role", ""), call.get("base_url", ""), call.get("model", ""), call.get("prompt", ""),
             call.get("response") or "", call.get("latency_s"), call.get("prompt_tokens"),
             call.get("completion_tokens"), call.get("status", ""), call.get("error") or ""),
        )


def llm_calls(conn: sqlite3.Connection, session_id: int) -> pd.DataFrame:
    return pd.read_sql_query("SELECT * FROM llm_calls WHERE session_id = ? ORDER BY id", conn, params=[session_id])


def upsert_candidate(conn: sqlite3.Connection, session_id: int, child_key: str, *, round_: int,
                     parent_item_id: int | None, text: str, answer: str, payload: dict, valid: bool | None = None,
                     verdict: str = "", difficulty_raw: float | None = None, difficulty_norm: float | None = None,
                     distance: float | None = None) -> None:
    """Create or update a proposal; its review state is never touched here."""
    with transaction(conn):
        conn.execute(
            "INSERT INTO fill_candidates (session_id, child_key, round, parent_item_id, text, answer, payload, valid,"
            " verdict, difficulty_raw, difficulty_norm, distance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (session_id, child_key) DO UPDATE SET valid = coalesce(excluded.valid, valid),"
            " verdict = CASE WHEN excluded.verdict != '' THEN excluded.verdict ELSE verdict END,"
            " difficulty_raw = coalesce(excluded.difficulty_raw, difficulty_raw),"
            " difficulty_norm = coalesce(excluded.difficulty_norm, difficulty_norm),"
            " distance = coalesce(excluded.distance, distance), payload = excluded.payload",
            (session_id, child_key, round_, parent_item_id, text, answer, json.dumps(payload),
             None if valid is None else int(valid), verdict, difficulty_raw, difficulty_norm, distance),
        )


def candidates(conn: sqlite3.Connection, session_id: int | None = None, state: str | None = None,
               reviewable_only: bool = True) -> pd.DataFrame:
    """Proposals (valid and calibrated unless ``reviewable_only=False``), nearest the target first."""
    sql = ("SELECT c.*, p.key AS parent_key, p.text AS parent_text, p.answer AS parent_answer, s.target,"
           " b.name AS benchmark FROM fill_candidates c JOIN fill_sessions s ON s.id = c.session_id"
           " JOIN benchmarks b ON b.id = s.benchmark_id LEFT JOIN items p ON p.id = c.parent_item_id WHERE 1")
    args: list = []
    if session_id is not None:
        sql += " AND c.session_id = ?"
        args.append(session_id)
    if state is not None:
        sql += " AND c.review_state = ?"
        args.append(state)
    if reviewable_only:
        sql += " AND c.valid = 1 AND c.difficulty_norm IS NOT NULL"
    df = pd.read_sql_query(sql + " ORDER BY c.distance IS NULL, c.distance, c.id", conn, params=args)
    df["payload"] = [json.loads(p) for p in df["payload"]]
    return df


def decide(conn: sqlite3.Connection, candidate_id: int, decision: str, note: str = "", *,
           edited_text: str | None = None, edited_answer: str | None = None) -> int | None:
    """Accept (insert the item, origin benchfill) or reject a proposal; both keep the note and are audited.

    Returns the new item's id on accept. An edit-then-accept stores the curator's text and keeps the
    proposal's original text in the item's metadata.
    """
    if decision not in ("accept", "reject"):
        raise StoreError(f"unknown decision {decision!r}; use accept or reject")
    with transaction(conn):
        c = conn.execute("SELECT c.*, s.benchmark_id, s.target FROM fill_candidates c JOIN fill_sessions s"
                         " ON s.id = c.session_id WHERE c.id = ?", (candidate_id,)).fetchone()
        if c is None:
            raise StoreError(f"no BenchFill candidate {candidate_id}")
        if c["review_state"] in ("accepted", "rejected"):
            raise StoreError(f"candidate {candidate_id} was already {c['review_state']}; decisions are final")
        item_id = None
        if decision == "accept":
            text = edited_text if edited_text is not None else c["text"]
            answer = edited_answer if edited_answer is not None else c["answer"]
            if not text.strip():
                raise StoreError("the accepted text is empty; edit it or reject the proposal")
            bid = c["benchmark_id"]
            pos = conn.execute("SELECT coalesce(max(pos) + 1, 0) FROM items WHERE benchmark_id = ?", (bid,)).fetchone()[0]
            parent = conn.execute("SELECT grp, kind, chance FROM items WHERE id = ?", (c["parent_item_id"],)).fetchone()
            meta = {"benchfill_session": c["session_id"], "candidate": candidate_id, "target": c["target"],
                    "difficulty_raw": c["difficulty_raw"], "difficulty_norm": c["difficulty_norm"]}
            if edited_text is not None or edited_answer is not None:
                meta["proposed_text"], meta["proposed_answer"] = c["text"], c["answer"]
            key = f"benchfill-{c['session_id']}-{candidate_id}"
            item_id = conn.execute(
                "INSERT INTO items (benchmark_id, pos, key, text, answer, grp, kind, chance, origin, parent_id, metadata)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'benchfill', ?, ?)",
                (bid, pos, key, text, answer, parent["grp"] if parent else "", parent["kind"] if parent else "static",
                 parent["chance"] if parent else None, c["parent_item_id"], json.dumps(meta)),
            ).lastrowid
        conn.execute("UPDATE fill_candidates SET review_state = ?, note = ?, item_id = ?,"
                     " decided_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE id = ?",
                     ("accepted" if decision == "accept" else "rejected", note, item_id, candidate_id))
        audit(conn, f"fill:{decision}", "fill_candidate", candidate_id,
              json.dumps({"item_id": item_id, "edited": edited_text is not None}), note)
    return item_id
