"""Finding items by words across every benchmark (issue 16 #5): the CLI's ``search`` and the TUI's ``/``.

The index is the FTS5 table ``items_fts`` (one row per item, ``rowid = items.id``) that the schema's triggers keep
in step with ``items`` and benchmark names, so nothing here writes. Hits are ranked by BM25 (FTS5's ``bm25()``,
lower is better) with a match in the key or group weighted above one in the text.

A query is plain words by default: each whitespace-separated token becomes a quoted FTS5 string, so quotes,
``AND``/``OR``/``NOT``/``NEAR``, ``*``, ``-``, ``:`` and parentheses from a user are words, never syntax, and every
token must match (in any column). ``raw=True`` passes FTS5's own query syntax through; a malformed raw query is a
:class:`~benchloupe.store.db.StoreError` with one line. Control characters (NUL included) separate words in both
modes: the index never holds them as word characters.

Bounded (issue 37): a query holds at most :data:`MAX_WORDS` words (runs of letters and digits, FTS5's tokens;
repeated plain words count once, as an AND of the same word twice is the word once) and :data:`MAX_QUERY_CHARS`
characters, else one line says so. The FTS5 cost grew with the square of the terms (1,000 repeats of one word: 3 s,
4,000: 33 s); deduplicated and bounded, a query's cost is its tokenising, linear in its length
(bench/bench_search.py, ``--query-sizes``). A long query stays interruptible: a progress handler lets Ctrl-C and
SIGTERM through SQLite's C code (:func:`benchloupe.interrupt.raised_inside_sqlite`).
"""

from __future__ import annotations

import os
import re
import sqlite3

from benchloupe.hints import Alt, Opt, say

from .db import StoreError

# bm25 weights per column, in the table's order: benchmark, key, text, answer, grp, metadata
_WEIGHTS = (0.5, 4.0, 1.0, 1.0, 2.0, 0.5)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# lone surrogates (what Python makes of non-UTF-8 bytes on a command line) cannot be sent to SQLite
_SURROGATE = re.compile(r"[\ud800-\udfff]")
MAX_LIMIT = 10_000
MAX_QUERY_CHARS = 100_000
_WORD = re.compile(r"\w+")
_OPERATORS = {"AND", "OR", "NOT", "NEAR"}
PROGRESS_STEPS = 100  # SQLite VM steps between two chances for a signal handler to run (a row of a long
# query may cost milliseconds: the steps, not the time, are counted)


def max_words() -> int:
    """At most this many words in a query: 64, or ``$BENCHLOUPE_SEARCH_MAX_WORDS`` (tests raise it to make a
    search long enough to interrupt)."""
    try:
        return max(1, int(os.environ.get("BENCHLOUPE_SEARCH_MAX_WORDS", "64")))
    except ValueError:
        return 64
DEFAULT_MARKS = ("[", "]")
# OperationalErrors of the database itself, not of a raw query's syntax (those go up to the CLI's explanations)
_DATABASE_TROUBLE = ("locked", "busy", "disk", "readonly", "no such table", "not a database", "interrupted")


def plain_query(text: str) -> str:
    """*text* as an FTS5 query of plain words: every token quoted (``"`` doubled), all of them required; a token
    repeated (case aside) is kept once."""
    seen: set[str] = set()
    kept = [t for t in _CONTROL.sub(" ", text).split() if not (t.casefold() in seen or seen.add(t.casefold()))]
    return " ".join('"' + t.replace('"', '""') + '"' for t in kept)


def _check_size(query: str, fts: str, raw: bool) -> None:
    """One line when a query is over the stated maximum (issue 37)."""
    limit = max_words()
    words = [w for w in _WORD.findall(fts) if not (raw and w in _OPERATORS)]
    if len(query) > MAX_QUERY_CHARS or len(words) > limit:
        what = f"{len(query):,} characters" if len(query) > MAX_QUERY_CHARS else f"{len(words):,} words" + (
            "" if raw else " (repeated words counted once)")
        raise StoreError(f"search: the query has {what}; at most {limit} words and {MAX_QUERY_CHARS:,} characters "
                         "are searched: search for fewer words")


def _tick() -> int:
    """SQLite's progress handler: Python code, so a pending Ctrl-C or SIGTERM handler runs here (0 = go on)."""
    return 0


def search_items(conn: sqlite3.Connection, query: str, benchmark: str | None = None, limit: int = 50,
                 raw: bool = False, marks: tuple[str, str] = DEFAULT_MARKS) -> list[dict]:
    """Items matching *query*, best first: a list of dicts with ``item_id``, ``benchmark``, ``key``, ``group``,
    ``status``, ``origin``, ``score`` (BM25, lower is better) and ``snippet`` (the best-matching column's words
    around the hits, each hit between *marks*; the TUI passes its own marks to highlight them).

    *benchmark* restricts the search to one benchmark by name (unknown names are an error, not an empty list).
    Raises :class:`StoreError` with one line for a bad limit, an unknown benchmark or a malformed raw query.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise StoreError(say("search: ", Opt("limit"), f" must be a whole number from 1 to {MAX_LIMIT} (got {limit!r})"))
    if not isinstance(query, str):
        raise StoreError(f"search: the query must be text (got {type(query).__name__})")
    query = _SURROGATE.sub("\ufffd", query)
    bid = None
    if benchmark is not None:
        benchmark = _SURROGATE.sub("\ufffd", str(benchmark))
        row = conn.execute("SELECT id FROM benchmarks WHERE name = ?", (benchmark,)).fetchone()
        if row is None:
            raise StoreError(say(f"search: no benchmark named {benchmark!r}; ",
                                 Alt("`benchloupe list` shows the names", "screen 1 lists them")))
        bid = row[0]
    if len(query) > MAX_QUERY_CHARS:  # before any work on it
        _check_size(query, "", raw)
    fts = _CONTROL.sub(" ", query).strip() if raw else plain_query(query)
    if not fts:
        return []
    _check_size(query, fts, raw)
    open_mark, close_mark = marks
    sql = ("SELECT i.id AS item_id, b.name AS benchmark, i.key AS key, i.grp AS grp, i.status AS status,"
           f" i.origin AS origin, bm25(items_fts, {', '.join(map(str, _WEIGHTS))}) AS score,"
           " snippet(items_fts, -1, ?, ?, '…', 12) AS snippet"
           " FROM items_fts JOIN items i ON i.id = items_fts.rowid JOIN benchmarks b ON b.id = i.benchmark_id"
           " WHERE items_fts MATCH ?" + (" AND i.benchmark_id = ?" if bid is not None else "")
           + " ORDER BY score, i.id LIMIT ?")
    params = [open_mark, close_mark, fts] + ([bid] if bid is not None else []) + [limit]
    conn.set_progress_handler(_tick, PROGRESS_STEPS)
    try:
        rows = conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        msg = str(exc)
        if "interrupted" in msg:
            from benchloupe.interrupt import raised_inside_sqlite

            signalled = raised_inside_sqlite()
            if signalled is not None:
                raise signalled from None
        if "no such table: items_fts" in msg:
            raise StoreError("search: this database has no search index; open it with this benchloupe to "
                             "upgrade it") from None
        if raw and not any(word in msg for word in _DATABASE_TROUBLE):
            raise StoreError(say(f"search: not a valid FTS5 query ({msg}); drop ", Opt("raw"),
                                 " to search for plain words")) from None
        raise
    finally:
        conn.set_progress_handler(None, 0)
    return [{"item_id": r[0], "benchmark": r[1], "key": r[2], "group": r[3], "status": r[4], "origin": r[5],
             "score": r[6], "snippet": r[7]} for r in rows]
