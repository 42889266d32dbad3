"""A triage queue read a page at a time (issue 26): the flags a queue screen steps through, in the queue's order
(|score| descending, then id), as a window of rows around a position or a flag, with the counts it shows (how
many flags, how many triaged, how many the filter takes, where the window starts) from one COUNT pass.

The rules are :func:`benchloupe.store.curation.queue_flags`' (tests/unit/test_queue_pages.py checks the two
agree row for row): the flags of the latest run that produced the kind (every run's with ``superseded``), an
earlier run's decision carried to a current flag still open with no note about the same model and item (the
same unordered pair of models), ``carried_from`` naming the flag it came from and ``stored_state`` what the flag
itself holds. An *overlay* (flag id -> (state, note)) is what the screen shows for its own decisions still being
written, so counts and filters agree with the card.

Before, the anomaly queue's first visit read all 210,060 flags of a 5,000 x 14,000 workspace into pandas (2.2 s);
a window is :data:`PAGE` rows, and each read is a scan of the queue's index entries and rows by SQLite with a
small top-N sort (tens of milliseconds), never a frame of every flag.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .curation import latest_flag_run

PAGE = 100  # rows in a window: the card on screen and a margin to step through without a read
LEAD = 10  # rows kept before the flag a window is read around (k after a page turn needs no read)

# a window row's columns, as curation.queue_flags gives them
ROW_COLUMNS = ("id", "run_id", "kind", "benchmark_id", "item_id", "model_id", "model_b_id", "score", "payload",
               "state", "note", "updated_at", "version", "updated_by", "reason", "item_key", "item_text",
               "item_answer",
               "model", "model_b", "stored_state", "carried_from", "superseded")

_TRUTHY = """CASE WHEN json_valid({p}) THEN CASE json_type({p}, '$.{k}')
    WHEN 'true' THEN 1 WHEN 'integer' THEN json_extract({p}, '$.{k}') != 0 WHEN 'real' THEN json_extract({p}, '$.{k}') != 0
    WHEN 'text' THEN json_extract({p}, '$.{k}') != '' WHEN 'array' THEN json_array_length({p}, '$.{k}') > 0
    WHEN 'object' THEN json_extract({p}, '$.{k}') != '{{}}' ELSE 0 END ELSE bl_truthy({p}, '{k}') END"""


def payload_truthy(key: str, column: str = "q.payload") -> str:
    """SQL: is payload entry *key* true as Python's ``bool(payload.get(key))`` is (a reversal's ``reversed``):
    SQLite's JSON functions, and for a payload they cannot read (``NaN`` is Python's JSON, not JSON) the
    function ``bl_truthy`` that :func:`prepare` registers."""
    if not key.isidentifier():
        raise ValueError(f"payload key {key!r} is not a plain name")
    return _TRUTHY.format(p=column, k=key)


def _truthy(payload, key):
    try:
        value = json.loads(payload).get(key)
    except (TypeError, ValueError, AttributeError):
        return 0
    return int(bool(value))


def prepare(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Register the functions the queue's SQL uses on *conn* (once per connection)."""
    conn.create_function("bl_truthy", 2, _truthy, deterministic=True)
    return conn


@dataclass(frozen=True)
class Filter:
    """Which flags of the queue a screen steps through: ``where`` is SQL on the queue's columns (alias ``q``:
    the flags' own columns with ``state``/``note`` as shown, ``stored_state``, ``carried_from``, ``superseded``,
    ``k`` = |score|) with named ``params``; ``keep``: a flag kept in the view whatever the filter (the card a
    reload found decided out of it stays until the curator moves on)."""

    where: str = ""
    params: Mapping[str, object] = field(default_factory=dict)
    keep: int | None = None

    def sql(self) -> str:
        cond = f"({self.where})" if self.where else "1"
        return f"({cond} OR q.id = :keep)" if self.keep is not None else cond

    def args(self) -> dict:
        return {**self.params, **({"keep": int(self.keep)} if self.keep is not None else {})}


@dataclass
class Window:
    """A run of consecutive rows of the filtered view: ``rows`` (columns :data:`ROW_COLUMNS`, in the view's
    order) from view position ``start``; ``view`` rows in the view, ``total`` in the whole queue, ``triaged``
    not open; ``anchor``: the position of the flag or key the window was read around (None when it was not)."""

    rows: pd.DataFrame
    start: int
    view: int
    total: int
    triaged: int
    anchor: int | None = None


class FlagQueue:
    """One benchmark's queue of one flag kind (every run's flags with *include_superseded*)."""

    def __init__(self, conn: sqlite3.Connection, benchmark_id: int, kind: str, *, include_superseded: bool = False,
                 parse_payload: bool = True) -> None:
        self.benchmark_id, self.kind = int(benchmark_id), kind
        self.include_superseded, self.parse_payload = include_superseded, parse_payload
        self.latest = latest_flag_run(conn, self.benchmark_id, kind)
        # an earlier run's decision to carry over: looked for once; none (the usual case) leaves its join out
        self.carries = self.latest is not None and conn.execute(
            "SELECT 1 FROM flags WHERE kind = ? AND benchmark_id = ? AND run_id IS NOT ? AND (state != 'open'"
            " OR note != '') LIMIT 1", (kind, self.benchmark_id, self.latest)).fetchone() is not None
        self.rows_read = 0  # flag rows this queue has read (tests: a first visit reads a page, not the queue)

    # ------------------------------------------------------------------ SQL
    def _cte(self, overlay: Mapping[int, tuple[str, str]] | None) -> tuple[str, dict]:
        args = {"k": self.kind, "b": self.benchmark_id, "latest": self.latest}
        own = "" if self.include_superseded or self.latest is None else " AND f.run_id = :latest"
        ident = ("CASE WHEN {t}.model_b_id IS NULL THEN {t}.model_id ELSE min(coalesce({t}.model_id, -1), "
                 "{t}.model_b_id) END AS a, CASE WHEN {t}.model_b_id IS NULL THEN NULL ELSE "
                 "max(coalesce({t}.model_id, -1), {t}.model_b_id) END AS bb")
        parts = [f"""base AS (SELECT f.id, f.run_id, f.kind, f.benchmark_id, f.item_id, f.model_id, f.model_b_id,
            f.score, f.payload, f.state AS stored_state, f.note AS stored_note, f.updated_at, f.version, f.updated_by,
            f.reason,
            abs(coalesce(f.score, 0.0)) AS k, (:latest IS NOT NULL AND f.run_id IS NOT :latest) AS superseded,
            {ident.format(t='f')} FROM flags f WHERE f.kind = :k AND f.benchmark_id = :b{own})"""]
        if self.carries:
            # the latest decision on an identity wins: SQLite takes a bare column from the row of max(id)
            # the same cell: item, models (an unordered pair) and, for an item audit's flags, the same reason
            parts.append(f"""earlier AS (SELECT e.item_id, e.reason, e.state, e.note, max(e.id) AS last,
                {ident.format(t='e')}
                FROM flags e WHERE e.kind = :k AND e.benchmark_id = :b AND e.run_id IS NOT :latest
                AND (e.state != 'open' OR e.note != '') GROUP BY e.item_id, a, bb, e.reason)""")
            # a flag about no cell (a coverage gap: an interval of one run's difficulties) carries nothing
            parts.append("""carried AS (SELECT b.*, CASE WHEN NOT b.superseded AND b.stored_state = 'open'
                AND b.stored_note = '' AND (b.item_id IS NOT NULL OR b.a IS NOT NULL) THEN e.last END
                AS carried_from, e.state AS e_state, e.note AS e_note
                FROM base b LEFT JOIN earlier e ON e.item_id IS b.item_id AND e.a IS b.a AND e.bb IS b.bb
                AND e.reason IS b.reason)""")
        else:
            parts.append("carried AS (SELECT b.*, NULL AS carried_from, NULL AS e_state, NULL AS e_note FROM base b)")
        shown_state = "CASE WHEN c.carried_from IS NOT NULL THEN c.e_state ELSE c.stored_state END"
        shown_note = "CASE WHEN c.carried_from IS NOT NULL THEN c.e_note ELSE c.stored_note END"
        if overlay:
            args["overlay"] = json.dumps({str(int(i)): [s, n] for i, (s, n) in overlay.items()})
            parts.append("ov AS MATERIALIZED (SELECT CAST(key AS INTEGER) AS id, json_extract(value, '$[0]') AS state,"
                         " json_extract(value, '$[1]') AS note FROM json_each(:overlay))")
            parts.append(f"""q AS (SELECT c.*, coalesce(o.state, {shown_state}) AS state,
                coalesce(o.note, {shown_note}) AS note FROM carried c LEFT JOIN ov o ON o.id = c.id)""")
        else:
            parts.append(f"q AS (SELECT c.*, {shown_state} AS state, {shown_note} AS note FROM carried c)")
        return "WITH " + ",\n".join(parts), args

    _COLUMNS = """q.id, q.run_id, q.kind, q.benchmark_id, q.item_id, q.model_id, q.model_b_id, q.score, q.payload,
        q.state, q.note, q.updated_at, q.version, q.updated_by, q.reason, i.key, i.text, i.answer, ma.name, mb.name,
        q.stored_state, q.carried_from, q.superseded, q.k"""

    def _page_sql(self, cte: str, where: str, *, backwards: bool = False, offset: bool = False) -> str:
        """Rows of q meeting *where* in the queue's order (*backwards*: reversed), ``:n`` of them from ``:start``
        (*offset*): sorted by id and key first, the names and item text joined to the rows kept only."""
        order = "q.k ASC, q.id DESC" if backwards else "q.k DESC, q.id"
        return (f"{cte} SELECT {self._COLUMNS} FROM (SELECT * FROM q WHERE {where} ORDER BY {order} LIMIT :n"
                f"{' OFFSET :start' if offset else ''}) q LEFT JOIN items i ON i.id = q.item_id"
                " LEFT JOIN models ma ON ma.id = q.model_id LEFT JOIN models mb ON mb.id = q.model_b_id"
                f" ORDER BY {order}")

    def _rows(self, conn: sqlite3.Connection, sql: str, args: dict) -> list[tuple]:
        rows = [tuple(r) for r in conn.execute(sql, args)]
        self.rows_read += len(rows)
        return rows

    def frame(self, rows: list[tuple]) -> pd.DataFrame:
        """Rows of :meth:`_page_sql` as the queue's frame (payloads parsed unless the queue keeps them as text)."""
        df = pd.DataFrame([r[:-1] for r in rows], columns=list(ROW_COLUMNS))
        if len(df):
            df["superseded"] = df["superseded"].astype(bool)
            df["carried_from"] = pd.array(df["carried_from"].tolist(), dtype="Int64")
            if self.parse_payload:
                df["payload"] = json.loads("[" + ",".join(df["payload"].tolist()) + "]")
        else:
            df["superseded"] = pd.Series([], dtype=bool)
        return df

    # ------------------------------------------------------------------ reads
    def key_of(self, conn: sqlite3.Connection, flag_id: int) -> tuple[float, int] | None:
        """The sort key (|score|, id) of flag *flag_id* (None when there is no such flag)."""
        row = conn.execute("SELECT abs(coalesce(score, 0.0)) FROM flags WHERE id = ?", (int(flag_id),)).fetchone()
        return None if row is None else (float(row[0]), int(flag_id))

    def window(self, conn: sqlite3.Connection, filt: Filter, *, overlay: Mapping[int, tuple[str, str]] | None = None,
               anchor: tuple[float, int] | None = None, after: bool = False, at: int = 0, lead: int = LEAD,
               page: int = PAGE) -> Window:
        """The window of the view around *anchor* (a sort key: the rows from it, or after it with *after*, and
        up to *lead* rows before it), else around view position *at*; one read transaction."""
        cte, args = self._cte(overlay)
        args |= filt.args()
        cond = filt.sql()
        own = not conn.in_transaction  # one snapshot for the counts and the rows
        if own:
            conn.execute("BEGIN")
        try:
            if anchor is not None:
                args |= {"ak": float(anchor[0]), "aid": int(anchor[1])}
                before = f"(q.k > :ak OR (q.k = :ak AND q.id {'<=' if after else '<'} :aid))"
                total, triaged, view, n_before = conn.execute(
                    f"{cte} SELECT count(*), total(q.state != 'open'), total({cond}), total({cond} AND {before})"
                    " FROM q", args).fetchone()
                # *lead* rows before the anchor, more when the view ends within the page (a full window: a
                # queue shorter than a page is loaded whole)
                n_back = max(0, min(int(n_before), max(lead, page - (int(view) - int(n_before)))))
                back = self._rows(conn, self._page_sql(cte, f"{cond} AND {before}", backwards=True),
                                  {**args, "n": n_back})[::-1] if n_back else []
                ahead = self._rows(conn, self._page_sql(cte, f"{cond} AND NOT {before}"),
                                   {**args, "n": max(1, page - len(back))})
                rows, start, pos = back + ahead, int(n_before) - len(back), int(n_before)
            else:
                total, triaged, view = conn.execute(
                    f"{cte} SELECT count(*), total(q.state != 'open'), total({cond}) FROM q", args).fetchone()
                view = int(view)
                pos = max(0, min(int(at), view - 1))
                start = max(0, min(pos - lead, view - page))
                rows = self._rows(conn, self._page_sql(cte, cond, offset=True), {**args, "n": page, "start": start})
        finally:
            if own:
                conn.execute("COMMIT")
        return Window(self.frame(rows), start, int(view), int(total), int(triaged), pos)

    def find(self, conn: sqlite3.Connection, filt: Filter, *, overlay: Mapping[int, tuple[str, str]] | None = None,
             where: str = "", params: Mapping[str, object] | None = None, after: tuple[float, int] | None = None,
             before: tuple[float, int] | None = None) -> int | None:
        """The id of the first flag of the view (in the queue's order) that also meets *where*, after the key
        *after* and/or before the key *before* when given; None when none does."""
        cte, args = self._cte(overlay)
        args |= filt.args() | dict(params or {})
        cond = [filt.sql()] + ([f"({where})"] if where else [])
        if after is not None:
            cond.append("(q.k < :xk OR (q.k = :xk AND q.id > :xid))")
            args |= {"xk": float(after[0]), "xid": int(after[1])}
        if before is not None:
            cond.append("(q.k > :yk OR (q.k = :yk AND q.id < :yid))")
            args |= {"yk": float(before[0]), "yid": int(before[1])}
        row = conn.execute(f"{cte} SELECT q.id FROM q WHERE {' AND '.join(cond)} ORDER BY q.k DESC, q.id LIMIT 1",
                           args).fetchone()
        return None if row is None else int(row[0])

    def ids(self, conn: sqlite3.Connection, where: str, params: Mapping[str, object] | None = None, *,
            overlay: Mapping[int, tuple[str, str]] | None = None) -> list[int]:
        """The ids of the queue's flags (whatever the view's filter) that meet *where*, in the queue's order."""
        cte, args = self._cte(overlay)
        return [int(r[0]) for r in conn.execute(
            f"{cte} SELECT q.id FROM q WHERE {where} ORDER BY q.k DESC, q.id", args | dict(params or {}))]

    def by_id(self, conn: sqlite3.Connection, ids: Iterable[int], *,
              overlay: Mapping[int, tuple[str, str]] | None = None) -> pd.DataFrame:
        """The queue's rows of the flags *ids* (those still in the queue), in the queue's order."""
        ids = [int(i) for i in ids]
        if not ids:
            return self.frame([])
        cte, args = self._cte(overlay)
        return self.frame(self._rows(conn, self._page_sql(cte, "q.id IN (SELECT value FROM json_each(:ids))"),
                                     args | {"ids": json.dumps(ids), "n": len(ids)}))

    def in_view(self, conn: sqlite3.Connection, filt: Filter, ids: Iterable[int], *,
                overlay: Mapping[int, tuple[str, str]] | None = None) -> set[int]:
        """Which of *ids* the view takes."""
        ids = [int(i) for i in ids]
        if not ids:
            return set()
        cte, args = self._cte(overlay)
        return {int(r[0]) for r in conn.execute(
            f"{cte} SELECT q.id FROM q WHERE {filt.sql()} AND q.id IN (SELECT value FROM json_each(:ids))",
            args | filt.args() | {"ids": json.dumps(ids)})}

    def counts(self, conn: sqlite3.Connection, column: str) -> dict[int, int]:
        """How many flags of the queue each *column* value (``model_id``, ``item_id``) has."""
        if column not in ("model_id", "item_id", "model_b_id"):
            raise ValueError(f"not a flag column to count by: {column!r}")
        cte, args = self._cte(None)
        return {int(v): int(n) for v, n in conn.execute(
            f"{cte} SELECT q.{column}, count(*) FROM q WHERE q.{column} IS NOT NULL GROUP BY q.{column}", args)}

    def run_ids(self, conn: sqlite3.Connection) -> list[int]:
        """The runs the queue's flags come from."""
        cte, args = self._cte(None)
        return [int(r[0]) for r in conn.execute(
            f"{cte} SELECT DISTINCT q.run_id FROM q WHERE q.run_id IS NOT NULL ORDER BY q.run_id", args)]

    _EXPORT = {"id": "q.id", "kind": "q.kind", "state": "q.state", "note": "q.note", "updated_by": "q.updated_by",
               "updated_at": "q.updated_at", "reason": "q.reason", "item_key": "i.key", "model": "ma.name",
               "model_b": "mb.name",
               "score": "q.score", "run_id": "q.run_id", "item_id": "q.item_id", "model_id": "q.model_id",
               "model_b_id": "q.model_b_id", "version": "q.version", "stored_state": "q.stored_state",
               "carried_from": "q.carried_from", "superseded": "q.superseded", "payload": "q.payload"}

    def export(self, conn: sqlite3.Connection, filt: Filter, columns: Iterable[str], *,
               overlay: Mapping[int, tuple[str, str]] | None = None) -> pd.DataFrame:
        """Every row of the view (the export of a queue: what it steps through), *columns* only (those of
        :data:`_EXPORT`), values as stored."""
        cols = [c for c in columns if c in self._EXPORT]
        cte, args = self._cte(overlay)
        sql = (f"{cte} SELECT {', '.join(self._EXPORT[c] for c in cols)} FROM q LEFT JOIN items i ON i.id = q.item_id"
               " LEFT JOIN models ma ON ma.id = q.model_id LEFT JOIN models mb ON mb.id = q.model_b_id"
               f" WHERE {filt.sql()} ORDER BY q.k DESC, q.id")
        rows = self._rows(conn, sql, args | filt.args())
        return pd.DataFrame(rows, columns=cols)


# ---------------------------------------------------------------------------------------- the current flags
def current_flags(conn: sqlite3.Connection, *, benchmark_id: int | None = None, kind: str | None = None,
                  state: str | None = None, run_id: int | None = None, all_runs: bool = False,
                  parse_payload: bool = True) -> pd.DataFrame:
    """The current flags (issue 32 #1), the one definition every face counts and lists: per benchmark and flag
    kind, the flags of the latest finished run that produces the kind (:func:`~benchloupe.store.curation.
    latest_flag_run`), each showing the decision carried over from an earlier run on the same cell when it has
    none of its own: exactly the workbench queue's rows (:class:`FlagQueue`). *all_runs* adds the earlier
    runs' flags (history, ``superseded`` True); *run_id* keeps one run's flags (an earlier one's too). *state*
    filters on the state shown. Columns :data:`ROW_COLUMNS`, in the queue's order within each benchmark and
    kind, the kinds and benchmarks one after another."""
    prepare(conn)
    sql = "SELECT DISTINCT benchmark_id, kind FROM flags WHERE benchmark_id IS NOT NULL"
    args: list = []
    for col, val in (("benchmark_id", benchmark_id), ("kind", kind), ("run_id", run_id)):
        if val is not None:
            sql += f" AND {col} = ?"
            args.append(val)
    parts = []
    for bid, k in sorted(conn.execute(sql, args).fetchall(), key=lambda r: (r[0], r[1])):
        q = FlagQueue(conn, int(bid), k, include_superseded=all_runs or run_id is not None,
                      parse_payload=parse_payload)
        where, params = [], {}
        if state is not None:
            where.append("q.state = :state")
            params["state"] = state
        if run_id is not None:
            where.append("q.run_id = :run")
            params["run"] = int(run_id)
        cte, qargs = q._cte(None)
        rows = q._rows(conn, q._page_sql(cte, " AND ".join(where) or "1"), qargs | params | {"n": -1})
        parts.append(q.frame(rows))
    parts = [p for p in parts if len(p)]
    if not parts:
        df = pd.DataFrame(columns=list(ROW_COLUMNS))
        df["superseded"] = pd.Series([], dtype=bool)
        return df
    if len(parts) == 1:
        return parts[0]
    df = pd.concat(parts, ignore_index=True)  # the queue's order over every benchmark and kind
    order = np.lexsort((df["id"].to_numpy(np.int64), -df["score"].astype(float).fillna(0.0).abs().to_numpy()))
    return df.iloc[order].reset_index(drop=True)


def open_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """How many current flags (:func:`current_flags`) of each kind are open, over every benchmark: what a
    summary says is left to triage (the workbench's queues count the same flags)."""
    prepare(conn)
    out: dict[str, int] = {}
    for bid, k in conn.execute("SELECT DISTINCT benchmark_id, kind FROM flags WHERE benchmark_id IS NOT NULL"
                               " ORDER BY kind").fetchall():
        q = FlagQueue(conn, int(bid), k)
        cte, args = q._cte(None)
        n = int(conn.execute(f"{cte} SELECT count(*) FROM q WHERE q.state = 'open'", args).fetchone()[0])
        if n:
            out[k] = out.get(k, 0) + n
    return out
