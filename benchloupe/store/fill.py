"""BenchFill persistence: sessions, their journal, LLM calls, the review queue and curator decisions.

The session's journal (``fill_events``) is append-only and written as each thing happens, one short
transaction per record, so a killed process loses nothing completed; resuming replays it. Candidates are the
valid, calibrated children waiting for a human; only :func:`decide` with "accept" inserts an item.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time

import pandas as pd

from benchloupe.hints import Alt, say
from benchloupe.textsafe import has_control

from . import runners
from .actor import by_at, current, identity, short_time
from .db import StoreError, audit, transaction

DEFAULT_MAX_STORED_CHARS = 16_384  # per prompt and per reply in llm_calls
ANNOTATION_EXCERPT_CHARS = 2_048  # an annotation event keeps an excerpt: the whole reply is in llm_calls


class SessionBusy(StoreError):
    """Another live runner holds the session's lease."""


class LeaseLost(StoreError):
    """This runner's lease was taken over (it was presumed dead); it must stop without writing."""


def create_session(conn: sqlite3.Connection, benchmark_id: int, gap_lo: float, gap_hi: float, target: float,
                   config: dict, runner: dict | None = None) -> int:
    """A new session, leased to *runner* (default: this process) until its first run ends."""
    runner = runner or runners.this_runner()
    with transaction(conn):
        sid = conn.execute(
            "INSERT INTO fill_sessions (benchmark_id, gap_lo, gap_hi, target, config, runner, heartbeat, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
            (benchmark_id, gap_lo, gap_hi, target, json.dumps(config), json.dumps(runner), time.time()),
        ).lastrowid
        audit(conn, "fill:start", "fill_session", sid, json.dumps({"gap": [gap_lo, gap_hi], "target": target}))
    return int(sid)


# ------------------------------------------------------------------------------------------------ the lease
# One session has at most one runner (issue 10 #3): the runner holds a lease (fill_sessions.runner + heartbeat)
# taken in an IMMEDIATE transaction, and every journal write checks, in its own transaction, that the lease is
# still its own. A successor may take the lease only when the holder is gone (runners.alive), so a runner that
# was presumed dead and wakes up again finds LeaseLost at its next write and stops.

def acquire_lease(conn: sqlite3.Connection, session_id: int, runner: dict) -> dict:
    """Make *runner* the session's only runner (state ``running``); raise SessionBusy when a live one has it."""
    with transaction(conn):
        row = conn.execute("SELECT state, runner, heartbeat, updated_at FROM fill_sessions WHERE id = ?",
                           (session_id,)).fetchone()
        if row is None:
            raise StoreError(say(f"no BenchFill session {session_id}; ", Alt("`benchloupe fill --list` shows them", "screen 8 lists them")))
        held = runners.parse(row["runner"])
        if (row["state"] == "running" and held.get("token") != runner["token"]
                and runners.alive(held, row["heartbeat"])):
            raise SessionBusy(say(f"BenchFill session {session_id} is already being run by {runners.describe(held)}"
                                  f" (since {row['updated_at']}); wait for it to finish, or stop it and then resume it with ",
                                  Alt(f"`benchloupe fill --resume {session_id}`", "R on the BenchFill screen (8)")))
        conn.execute("UPDATE fill_sessions SET state = 'running', message = '', runner = ?, heartbeat = ?,"
                     " updated_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE id = ?",
                     (json.dumps(runner), time.time(), session_id))
    return runner


def _check_lease(conn: sqlite3.Connection, session_id: int, token: str | None) -> None:
    """Inside a write transaction: refuse the write unless *token* still holds the lease (None: no check)."""
    if token is None:
        return
    row = conn.execute("SELECT state, runner FROM fill_sessions WHERE id = ?", (session_id,)).fetchone()
    held = runners.parse(row["runner"]) if row is not None else {}
    if row is None or row["state"] != "running" or held.get("token") != token:
        who = runners.describe(held) if row is not None and row["state"] == "running" else "no one"
        raise LeaseLost(f"BenchFill session {session_id} is no longer this runner's (now held by {who}); "
                        "this runner stopped without writing")


def beat_lease(conn: sqlite3.Connection, session_id: int, token: str, now: float) -> bool:
    """Renew the lease's heartbeat; False once it is no longer ours."""
    return conn.execute("UPDATE fill_sessions SET heartbeat = ? WHERE id = ? AND state = 'running'"
                        " AND json_extract(runner, '$.token') = ?", (now, session_id, token)).rowcount > 0


mark_interrupted = runners.mark_interrupted_sessions


def set_session_state(conn: sqlite3.Connection, session_id: int, state: str, message: str = "", *,
                      token: str | None = None) -> None:
    """Set the state (ending a run releases the lease: only ``running`` is held)."""
    with transaction(conn):
        _check_lease(conn, session_id, token)
        conn.execute("UPDATE fill_sessions SET state = ?, message = ?, updated_at = strftime('%Y-%m-%dT%H:%M:%SZ',"
                     " 'now') WHERE id = ?", (state, message, session_id))


def session(conn: sqlite3.Connection, session_id: int) -> dict:
    row = conn.execute("SELECT s.*, b.name AS benchmark FROM fill_sessions s JOIN benchmarks b ON b.id = s.benchmark_id"
                       " WHERE s.id = ?", (session_id,)).fetchone()
    if row is None:
        raise StoreError(say(f"no BenchFill session {session_id}; ", Alt("`benchloupe fill --list` shows them", "screen 8 lists them")))
    d = dict(row)
    d["config"] = json.loads(d["config"])
    d["runner"] = runners.parse(d.get("runner"))
    return d


def sessions(conn: sqlite3.Connection, benchmark: str | None = None) -> pd.DataFrame:
    sql = ("SELECT s.id, b.name AS benchmark, s.gap_lo, s.gap_hi, s.target, s.state, s.message, s.created_at,"
           " s.updated_at, (SELECT count(*) FROM fill_candidates c WHERE c.session_id = s.id) AS candidates,"
           " (SELECT count(*) FROM fill_candidates c WHERE c.session_id = s.id AND c.review_state = 'pending'"
           " AND c.valid = 1 AND c.difficulty_norm IS NOT NULL) AS pending,"
           " json_extract(s.config, '$.endpoints.rewriter.base_url') AS rewriter_url"
           " FROM fill_sessions s JOIN benchmarks b ON b.id = s.benchmark_id")
    args = []
    if benchmark:
        sql += " WHERE b.name = ?"
        args.append(benchmark)
    return pd.read_sql_query(sql + " ORDER BY s.id DESC", conn, params=args)


def append_event(conn: sqlite3.Connection, session_id: int, kind: str, round_: int | None, payload: dict, *,
                 token: str | None = None) -> None:
    with transaction(conn):
        _check_lease(conn, session_id, token)
        conn.execute("INSERT INTO fill_events (session_id, round, kind, payload) VALUES (?, ?, ?, ?)",
                     (session_id, round_, kind, json.dumps(payload)))


def events(conn: sqlite3.Connection, session_id: int, kinds: tuple[str, ...] | None = None) -> list[tuple[str, dict]]:
    sql = "SELECT kind, payload FROM fill_events WHERE session_id = ?"
    args: list = [session_id]
    if kinds:
        sql += f" AND kind IN ({','.join('?' * len(kinds))})"
        args += list(kinds)
    return [(k, json.loads(p)) for k, p in conn.execute(sql + " ORDER BY id", args)]


def cap_text(text: str | None, limit: int) -> tuple[str, bool]:
    """*text* cut to *limit* characters with a visible note of what was cut (issue 10 #12)."""
    text = text or ""
    if limit <= 0 or len(text) <= limit:
        return text, False
    return f"{text[:limit]}\n[benchloupe: {len(text):,} characters received, the first {limit:,} stored]", True


def record_llm_call(conn: sqlite3.Connection, session_id: int, call: dict, *, token: str | None = None,
                    max_chars: int = DEFAULT_MAX_STORED_CHARS) -> bool:
    """One LLM call: role, base_url, model, prompt, response, latency_s, tokens, status, error (never a key).

    Prompt and response are stored up to *max_chars* characters each; returns True when something was cut.
    """
    prompt, cut_p = cap_text(call.get("prompt"), max_chars)
    response, cut_r = cap_text(call.get("response"), max_chars)
    with transaction(conn):
        _check_lease(conn, session_id, token)
        conn.execute(
            "INSERT INTO llm_calls (session_id, role, base_url, model, prompt, response, latency_s, prompt_tokens,"
            " completion_tokens, status, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (session_id, call.get("role", ""), call.get("base_url", ""), call.get("model", ""), prompt,
             response, call.get("latency_s"), call.get("prompt_tokens"),
             call.get("completion_tokens"), call.get("status", ""), call.get("error") or ""),
        )
    return cut_p or cut_r


def set_verdict(conn: sqlite3.Connection, session_id: int, child_key: str, valid: bool, reason: str, *,
                token: str | None = None) -> None:
    with transaction(conn):
        _check_lease(conn, session_id, token)
        conn.execute("UPDATE fill_candidates SET valid = ?, verdict = ? WHERE session_id = ? AND child_key = ?",
                     (int(valid), reason, session_id, child_key))


def set_estimate(conn: sqlite3.Connection, session_id: int, child_key: str, *, b: float, z: float | None,
                 distance: float | None, se: float, n_successes: int, n_trials: int, identified: bool,
                 token: str | None = None) -> None:
    """A child's online calibration; an unidentified one keeps no normalised difficulty (never reviewable)."""
    with transaction(conn):
        _check_lease(conn, session_id, token)
        conn.execute(
            "UPDATE fill_candidates SET difficulty_raw = ?, difficulty_norm = ?, distance = ?,"
            " payload = json_set(payload, '$.se', ?, '$.n_successes', ?, '$.n_trials', ?, '$.identified', json(?))"
            " WHERE session_id = ? AND child_key = ?",
            (b, z if identified else None, distance if identified else None, se, n_successes, n_trials,
             "true" if identified else "false", session_id, child_key))


def llm_calls(conn: sqlite3.Connection, session_id: int) -> pd.DataFrame:
    return pd.read_sql_query("SELECT * FROM llm_calls WHERE session_id = ? ORDER BY id", conn, params=[session_id])


def upsert_candidate(conn: sqlite3.Connection, session_id: int, child_key: str, *, round_: int,
                     parent_item_id: int | None, text: str, answer: str, payload: dict, valid: bool | None = None,
                     verdict: str = "", difficulty_raw: float | None = None, difficulty_norm: float | None = None,
                     distance: float | None = None, token: str | None = None) -> None:
    """Create or update a proposal; its review state is never touched here."""
    with transaction(conn):
        _check_lease(conn, session_id, token)
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
    """Proposals (valid and calibrated unless ``reviewable_only=False``), nearest the target first; ``b_min`` /
    ``b_max``: the session's difficulty scale (raw logit ends of the 0-1 normalised difficulty)."""
    sql = ("SELECT c.*, p.key AS parent_key, p.text AS parent_text, p.answer AS parent_answer, s.target,"
           " json_extract(s.config, '$.b_min') AS b_min, json_extract(s.config, '$.b_max') AS b_max,"
           " b.name AS benchmark, i.key AS item_key, coalesce(json_extract(s.config, '$.approvals'), 1) AS approvals,"
           " (SELECT group_concat(a.actor, ', ') FROM (SELECT actor FROM fill_approvals WHERE candidate_id = c.id"
           " ORDER BY at) a) AS approvers,"
           " r.holder AS review_holder, r.runner AS review_runner, r.since AS review_since,"
           " r.heartbeat AS review_heartbeat"
           " FROM fill_candidates c JOIN fill_sessions s ON s.id = c.session_id"
           " JOIN benchmarks b ON b.id = s.benchmark_id LEFT JOIN items p ON p.id = c.parent_item_id"
           " LEFT JOIN items i ON i.id = c.item_id LEFT JOIN fill_reviews r ON r.candidate_id = c.id WHERE 1")
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


def approver_list(value: object) -> list[str]:
    """The ``approvers`` column of :func:`candidates` as names: none for a missing value (SQL NULL reads as NaN in
    pandas, and ``str(nan)`` is "nan": a curator named ``nan`` then counted as having approved everything, issue
    37 #8). Curator names hold no comma (store/actor.py), so the list splits cleanly."""
    return [a for a in value.split(", ") if a] if isinstance(value, str) else []


def approved_by(value: object, who: str) -> bool:
    """Whether the curator *who* (by identity: NFC, case-folded) is among the approvers *value*."""
    me = identity(who)
    return any(identity(a) == me for a in approver_list(value))


class ReviewBusy(StoreError):
    """Another curator holds the review lease of the proposal (they are looking at it now)."""


def decide(conn: sqlite3.Connection, candidate_id: int, decision: str, note: str = "", *,
           edited_text: str | None = None, edited_answer: str | None = None, expect_version: int | None = None,
           lease_token: str | None = None) -> int | None:
    """Accept (insert the item, origin benchfill) or reject a proposal; both keep the note and are audited.

    Returns the new item's id on accept (None while a session that needs N approvals waits for more). An
    edit-then-accept stores the curator's text and answer (checked by :func:`edit_problem`, as the LLM's are)
    and keeps the proposal's original text in the item's metadata.

    Several curators (issue 25): refused (nothing written) when another curator holds a live review lease on
    it (:class:`ReviewBusy`; *lease_token* is this reviewer's own), when it changed since the version the
    curator saw (*expect_version*; :class:`~benchloupe.store.curation.Conflict`), or when it is decided already,
    each naming who and when. The check and the write share one IMMEDIATE transaction and the item's key is
    unique in its benchmark, so no accept can create the item twice.
    """
    with transaction(conn):
        return _decide(conn, candidate_id, decision, note, edited_text, edited_answer, expect_version, lease_token)


def decide_many(conn: sqlite3.Connection, candidate_ids: list[int], decision: str, note: str = "", *,
                expect: dict[int, int] | None = None, lease_token: str | None = None) -> list[int]:
    """:func:`decide` for several proposals in one transaction (a batch: the marked ones, the rest of a
    session): all are decided, or none (one refused refuses the batch). Returns the new items' ids (accept)."""
    with transaction(conn):
        out = [_decide(conn, cid, decision, note, None, None, (expect or {}).get(cid), lease_token)
               for cid in candidate_ids]
    return [i for i in out if i is not None]


def _who(row) -> str:
    who = by_at(row["decided_by"], row["decided_at"])
    return f" {who}" if who else ""


def _decide(conn: sqlite3.Connection, candidate_id: int, decision: str, note: str, edited_text: str | None,
            edited_answer: str | None, expect_version: int | None = None, lease_token: str | None = None
            ) -> int | None:
    from .curation import Conflict

    if decision not in ("accept", "reject"):
        raise StoreError(f"unknown decision {decision!r}; use accept or reject")
    c = conn.execute("SELECT c.*, s.benchmark_id, s.target, s.config AS session_config FROM fill_candidates c"
                     " JOIN fill_sessions s ON s.id = c.session_id WHERE c.id = ?", (candidate_id,)).fetchone()
    if c is None:
        raise StoreError(f"no BenchFill candidate {candidate_id}")
    busy = review_holder(conn, candidate_id, lease_token)
    if busy is not None:
        raise ReviewBusy(f"{busy['holder']} is reviewing proposal #{candidate_id} (since "
                         f"{short_time(busy['since_at'])}); it stays theirs while they look at it: pick another "
                         "or wait")
    if expect_version is not None and int(c["version"]) != int(expect_version):
        raise Conflict(f"proposal #{candidate_id} changed since you saw it: now {c['review_state']}{_who(c)}; "
                       "your decision was not saved",
                       [{"id": candidate_id, "state": c["review_state"], "note": c["note"],
                         "by": c["decided_by"], "at": c["decided_at"]}])
    if c["review_state"] in ("accepted", "rejected"):
        raise Conflict(f"proposal #{candidate_id} was already {c['review_state']}{_who(c)}; undo that decision "
                       "first", [{"id": candidate_id, "state": c["review_state"], "note": c["note"],
                                  "by": c["decided_by"], "at": c["decided_at"]}])
    who = current()
    needed = _approvals_needed(c["session_config"])
    approvers: list[str] = []
    if decision == "accept" and needed > 1:
        if edited_text is not None or edited_answer is not None:
            raise StoreError(f"proposal #{candidate_id}: its session needs {needed} approvals, so it is accepted as "
                             "proposed; reject it instead of editing it")
        approvers = [r[0] for r in conn.execute("SELECT actor FROM fill_approvals WHERE candidate_id = ?"
                                                " ORDER BY at", (candidate_id,))]
        if identity(who) in {identity(a) for a in approvers}:  # one curator, however the name was typed
            raise StoreError(f"{who} already approved proposal #{candidate_id}; it needs {needed - len(approvers)} "
                             "more approval(s) from other curators")
        conn.execute("INSERT INTO fill_approvals (candidate_id, actor, note) VALUES (?, ?, ?)",
                     (candidate_id, who, note))
        approvers.append(who)
        if len(approvers) < needed:
            conn.execute("UPDATE fill_candidates SET review_state = 'waiting', version = version + 1,"
                         " decided_by = ?, decided_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') WHERE id = ?",
                         (who, candidate_id))
            conn.execute("DELETE FROM fill_reviews WHERE candidate_id = ?", (candidate_id,))
            audit(conn, "fill:approve", "fill_candidate", candidate_id,
                  json.dumps({"approvers": approvers, "needed": needed, "from": c["review_state"],
                              "version": int(c["version"]) + 1}), note, actor=who)
            return None
    item_id = None
    if decision == "accept":
        text = edited_text if edited_text is not None else c["text"]
        answer = edited_answer if edited_answer is not None else c["answer"]
        problem = edit_problem(text, answer)
        if problem:
            raise StoreError(f"proposal {candidate_id} not accepted: {problem}")
        bid = c["benchmark_id"]
        pos = conn.execute("SELECT coalesce(max(pos) + 1, 0) FROM items WHERE benchmark_id = ?", (bid,)).fetchone()[0]
        parent = conn.execute("SELECT grp, kind, chance FROM items WHERE id = ?", (c["parent_item_id"],)).fetchone()
        meta = {"benchfill_session": c["session_id"], "candidate": candidate_id, "target": c["target"],
                "difficulty_raw": c["difficulty_raw"], "difficulty_norm": c["difficulty_norm"],
                "accepted_by": approvers or [who]}
        if edited_text is not None or edited_answer is not None:
            meta["proposed_text"], meta["proposed_answer"] = c["text"], c["answer"]
        key = f"benchfill-{c['session_id']}-{candidate_id}"
        item_id = conn.execute(
            "INSERT INTO items (benchmark_id, pos, key, text, answer, grp, kind, chance, origin, parent_id, metadata)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'benchfill', ?, ?)",
            (bid, pos, key, text, answer, parent["grp"] if parent else "", parent["kind"] if parent else "static",
             parent["chance"] if parent else None, c["parent_item_id"], json.dumps(meta)),
        ).lastrowid
    version = int(c["version"]) + 1
    conn.execute("UPDATE fill_candidates SET review_state = ?, note = ?, item_id = ?, version = ?, decided_by = ?,"
                 " decided_at = strftime('%Y-%m-%dT%H:%M:%f', 'now') WHERE id = ?",
                 ("accepted" if decision == "accept" else "rejected", note, item_id, version, who, candidate_id))
    conn.execute("DELETE FROM fill_reviews WHERE candidate_id = ?", (candidate_id,))
    detail = {"item_id": item_id, "edited": edited_text is not None or edited_answer is not None,
              "from": c["review_state"], "version": version}
    if approvers:
        detail["approvers"] = approvers
    audit(conn, f"fill:{decision}", "fill_candidate", candidate_id, json.dumps(detail), note, actor=who)
    return item_id


def _approvals_needed(config: str | None) -> int:
    try:
        n = json.loads(config or "{}").get("approvals", 1)
        return max(1, int(n))
    except (TypeError, ValueError):
        return 1


def edit_problem(text: str, answer: str) -> str | None:
    """Why a proposal's text and reference answer (as the LLM wrote them or as the curator edited them) cannot
    become an item, or None: the rules that make the engine reject a rewrite (engine.benchfill.precheck_child):
    no empty text or answer, no control characters (terminal escapes, NUL, backspace; newline and tab allowed)."""
    if not str(text).strip():
        return "the text is empty; write the question or reject the proposal"
    if not str(answer).strip():
        return "the reference answer is empty; give the answer or reject the proposal"
    for what, value in (("text", text), ("reference answer", answer)):
        if has_control(str(value)):
            return (f"the {what} contains control characters (terminal escapes, NUL, backspace); remove them "
                    "(newline and tab are fine)")
    return None


def undo_decision(conn: sqlite3.Connection, candidate_id: int, note: str = "", *,
                  expect_version: int | None = None) -> dict:
    """Take back the accept, reject or approval of a proposal: it is pending again (or waiting, when other
    curators' approvals remain; note and decision time cleared), audited as ``fill:undo`` with the decision it
    replaced. Undoing an accept deletes exactly the item the accept inserted (its rows in coverage runs go with
    it; the caller recomputes coverage) in the same transaction, and is refused, changing nothing, when later
    work depends on that item: results, preferences or flags on it, an item after it in the benchmark (results
    are stored by position), an item or a BenchFill session built from it, or a run other than coverage that used
    it. *expect_version*: the version this curator's decision left; refused when someone changed the proposal
    since. Returns ``{"from", "item_id"}``."""
    return undo_decisions(conn, [candidate_id], note,
                          expect=None if expect_version is None else {candidate_id: expect_version})[0]


def undo_decisions(conn: sqlite3.Connection, candidate_ids: list[int], note: str = "", *,
                   expect: dict[int, int] | None = None) -> list[dict]:
    """:func:`undo_decision` for a batch in one transaction (latest first, so the items a batch of accepts
    added come off in reverse): all are undone, or none."""
    with transaction(conn):
        return [_undo(conn, cid, note, (expect or {}).get(cid)) for cid in reversed(candidate_ids)][::-1]


def _undo(conn: sqlite3.Connection, candidate_id: int, note: str, expect_version: int | None = None) -> dict:
    from .curation import Conflict

    c = conn.execute("SELECT c.*, s.benchmark_id FROM fill_candidates c JOIN fill_sessions s"
                     " ON s.id = c.session_id WHERE c.id = ?", (candidate_id,)).fetchone()
    if c is None:
        raise StoreError(f"no BenchFill candidate {candidate_id}")
    if expect_version is not None and int(c["version"]) != int(expect_version):
        raise Conflict(f"proposal #{candidate_id} changed after your decision: now {c['review_state']}{_who(c)}; "
                       "nothing was undone", [{"id": candidate_id, "state": c["review_state"], "note": c["note"],
                                               "by": c["decided_by"], "at": c["decided_at"]}])
    who = current()
    mine = conn.execute("SELECT 1 FROM fill_approvals WHERE candidate_id = ? AND actor = ?",
                        (candidate_id, who)).fetchone() is not None
    if c["review_state"] not in ("accepted", "rejected") and not (c["review_state"] == "waiting" and mine):
        raise StoreError(f"proposal {candidate_id} is {c['review_state']}: there is no decision to undo")
    item_id = c["item_id"] if c["review_state"] == "accepted" else None
    if item_id is not None:
        why = _item_dependents(conn, int(item_id), int(c["benchmark_id"]), candidate_id)
        if why:
            raise StoreError(f"cannot undo the accept of proposal {candidate_id}: item #{item_id} is already "
                             f"used ({why}); retire the item on 2 Items instead")
        conn.execute("DELETE FROM items WHERE id = ?", (item_id,))
    if c["review_state"] in ("accepted", "waiting") and mine:  # this curator's approval goes with the undo
        conn.execute("DELETE FROM fill_approvals WHERE candidate_id = ? AND actor = ?", (candidate_id, who))
    left = conn.execute("SELECT count(*) FROM fill_approvals WHERE candidate_id = ?", (candidate_id,)).fetchone()[0]
    version = int(c["version"]) + 1
    conn.execute("UPDATE fill_candidates SET review_state = ?, note = '', item_id = NULL, version = ?,"
                 " decided_by = ?, decided_at = NULL WHERE id = ?",
                 ("waiting" if left else "pending", version, who, candidate_id))
    audit(conn, "fill:undo", "fill_candidate", candidate_id,
          json.dumps({"from": c["review_state"], "note_from": c["note"], "item_id": item_id, "version": version}),
          note, actor=who)
    return {"from": c["review_state"], "item_id": item_id, "version": version}


# ------------------------------------------------------------------------------------ review leases (issue 25)
# A proposal a curator is looking at is theirs for a short lease: fill_reviews holds the holder's name, their
# runner (pid, host, token: store/runners.py) and a heartbeat the face renews every REVIEW_BEAT_S. Another curator
# sees "bea is reviewing" and cannot decide it; a lease whose heartbeat is older than REVIEW_LEASE_S, or whose
# process is gone (same host), has expired and may be taken. A decision releases the lease in its transaction.

REVIEW_LEASE_S = 15.0
REVIEW_BEAT_S = 4.0


def review_alive(runner: str | dict | None, heartbeat: float | None, now: float | None = None) -> bool:
    """Whether a review lease still holds: a recent heartbeat, and (same host) its process still there."""
    now = time.time() if now is None else now
    if heartbeat is None or runners.heartbeat_age(heartbeat, now) > REVIEW_LEASE_S:
        return False
    r = runners.parse(runner)
    if r.get("host") == socket.gethostname() and isinstance(r.get("pid"), int):
        return runners.alive(r, heartbeat, now)
    return True


def review_holder(conn: sqlite3.Connection, candidate_id: int, token: str | None = None,
                  now: float | None = None) -> dict | None:
    """The live review lease on *candidate_id* held by someone other than *token*, or None."""
    row = conn.execute("SELECT holder, runner, since, heartbeat FROM fill_reviews WHERE candidate_id = ?",
                       (candidate_id,)).fetchone()
    if row is None or (token is not None and runners.parse(row["runner"]).get("token") == token):
        return None
    if not review_alive(row["runner"], row["heartbeat"], now):
        return None
    import datetime as dt

    since = dt.datetime.fromtimestamp(float(row["since"]), dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return {"holder": row["holder"], "since": float(row["since"]), "since_at": since}


def claim_review(conn: sqlite3.Connection, candidate_id: int, runner: dict, *, now: float | None = None,
                 release_others: bool = True) -> dict | None:
    """Hold *candidate_id* for review by this curator (*runner*: pid, host, token). Returns None when it is
    ours now, or the other holder (``{"holder", "since"}``) when their lease is alive. With *release_others*
    this reviewer's other leases end (one proposal looked at at a time)."""
    now = time.time() if now is None else now
    with transaction(conn):
        busy = review_holder(conn, candidate_id, runner["token"], now)
        if busy is not None:
            return busy
        if release_others:
            conn.execute("DELETE FROM fill_reviews WHERE json_extract(runner, '$.token') = ? AND candidate_id != ?",
                         (runner["token"], candidate_id))
        held = conn.execute("SELECT runner FROM fill_reviews WHERE candidate_id = ?", (candidate_id,)).fetchone()
        if held is not None and runners.parse(held["runner"]).get("token") == runner["token"]:
            conn.execute("UPDATE fill_reviews SET heartbeat = ? WHERE candidate_id = ?", (now, candidate_id))
        else:
            conn.execute("INSERT OR REPLACE INTO fill_reviews (candidate_id, holder, runner, since, heartbeat)"
                         " VALUES (?, ?, ?, ?, ?)", (candidate_id, current(), json.dumps(runner), now, now))
    return None


def renew_reviews(conn: sqlite3.Connection, token: str, now: float | None = None) -> int:
    """Renew the heartbeat of this reviewer's leases; how many it holds."""
    now = time.time() if now is None else now
    return conn.execute("UPDATE fill_reviews SET heartbeat = ? WHERE json_extract(runner, '$.token') = ?",
                        (now, token)).rowcount


def release_reviews(conn: sqlite3.Connection, token: str) -> None:
    """End this reviewer's leases (leaving the queue, quitting)."""
    conn.execute("DELETE FROM fill_reviews WHERE json_extract(runner, '$.token') = ?", (token,))


def _item_dependents(conn: sqlite3.Connection, item_id: int, benchmark_id: int, candidate_id: int) -> str:
    """What, if anything, was built on an accepted BenchFill item since its accept (empty: nothing)."""
    pos = conn.execute("SELECT pos FROM items WHERE id = ?", (item_id,)).fetchone()
    if pos is None:
        return ""
    checks = (
        ("a later item in the benchmark", "SELECT count(*) FROM items WHERE benchmark_id = ? AND pos > ?",
         (benchmark_id, pos[0])),
        ("static results cover it", "SELECT count(*) FROM static_results WHERE benchmark_id = ? AND n > ?",
         (benchmark_id, pos[0])),
        ("arena rewards", "SELECT count(*) FROM arena_rewards WHERE item_id = ?", (item_id,)),
        ("preferences", "SELECT count(*) FROM preferences WHERE item_id = ?", (item_id,)),
        ("flags", "SELECT count(*) FROM flags WHERE item_id = ?", (item_id,)),
        ("an item derived from it", "SELECT count(*) FROM items WHERE parent_id = ?", (item_id,)),
        ("a BenchFill proposal rewritten from it", "SELECT count(*) FROM fill_candidates WHERE parent_item_id = ?"
         " AND id != ?", (item_id, candidate_id)),
        ("a BenchFill session over it", "SELECT count(*) FROM fill_sessions s, json_each(s.config, '$.item_ids') j"
         " WHERE s.benchmark_id = ? AND j.value = ?", (benchmark_id, item_id)),
        ("a run other than coverage", "SELECT count(*) FROM run_items x JOIN runs r ON r.id = x.run_id"
         " WHERE x.item_id = ? AND r.kind != 'coverage'", (item_id,)),
    )
    return ", ".join(what for what, sql, args in checks if conn.execute(sql, args).fetchone()[0])
