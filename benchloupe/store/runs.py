"""Runs and their outputs: provenance row, per-model and per-item parameters, artifacts, flags.

A run row is created as ``running`` before computing (so the UI can list it) and its outputs are written in
one transaction by :func:`save_outputs`; a failure or cancellation leaves only the run row with its status
and error, never half the outputs.

Statuses: running -> done | failed | cancelled (SIGINT, SIGTERM, the UI's cancel) | interrupted (the runner
died without a word: SIGKILL, a crash, a power cut). The row records its runner (:mod:`.runners`); whoever
opens the database next turns a ``running`` row whose runner is gone into ``interrupted``
(:func:`mark_interrupted`), and such a run can be started again with its config or removed.
"""

from __future__ import annotations

import io
import json
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from benchloupe.columns import Columns
from benchloupe.hints import Alt, say

from . import runners
from .db import StoreError, transaction
from .read import none_for_missing

if TYPE_CHECKING:
    import pandas as pd

MODEL_COLS = ("theta", "se", "lo", "hi", "rank", "rank_lo", "rank_hi")
ITEM_COLS = ("difficulty", "sharpness", "fisher", "dif_range")


def _json(obj) -> str:
    return json.dumps(obj, default=_default, sort_keys=True)


def _default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if not np.isfinite(o) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.bool_):
        return bool(o)
    return str(o)


def create_run(conn: sqlite3.Connection, kind: str, benchmark_id: int | None, *, config: dict, seed: int | None,
               code_version: str, input_fingerprint: str, inputs: list[tuple[int, str]] = (), label: str = "",
               runner: dict | None = None) -> int:
    """A new ``running`` row owned by *runner* (default: this process)."""
    runner = runner or runners.this_runner()
    with transaction(conn):
        rid = conn.execute(
            "INSERT INTO runs (kind, benchmark_id, label, config, seed, code_version, input_fingerprint, runner,"
            " heartbeat) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (kind, benchmark_id, label, _json(config), seed, code_version, input_fingerprint, _json(runner),
             time.time()),
        ).lastrowid
        conn.executemany("INSERT OR IGNORE INTO run_inputs (run_id, benchmark_id, role) VALUES (?, ?, ?)",
                         [(rid, b, role) for b, role in inputs])
    return int(rid)


@dataclass
class RunOutputs:
    """What a job hands to :func:`save_outputs`.

    models/items: frames (pandas DataFrames or :class:`~benchloupe.columns.Columns`) with a ``model_id``/``item_id``
    column plus any of MODEL_COLS/ITEM_COLS; other columns go to the row's ``extra`` JSON. artifacts: name ->
    frame (stored as JSON ``split`` records and read back as a DataFrame), dict (JSON), str (text) or dict of
    arrays (npz). flags: frame with kind, item_id, model_id, model_b_id, score, payload (dict).
    """

    metrics: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    models: pd.DataFrame | Columns | None = None
    items: pd.DataFrame | Columns | None = None
    artifacts: dict = field(default_factory=dict)
    flags: pd.DataFrame | Columns | None = None


def _records(table) -> list[dict]:
    return table.records() if isinstance(table, Columns) else table.to_dict("records")


def _rows(df, key: str, cols: tuple[str, ...]):
    extra_cols = [c for c in df.columns if c != key and c not in cols]
    present = [c for c in cols if c in df.columns]
    recs = _records(df)
    for r in recs:
        vals = []
        for c in cols:
            v = r.get(c) if c in present else None
            if v is not None and isinstance(v, float) and not np.isfinite(v):
                v = None
            vals.append(v.item() if isinstance(v, np.generic) else v)
        extra = {c: r[c] for c in extra_cols}
        yield (int(r[key]), *vals, _json(extra))


def save_outputs(conn: sqlite3.Connection, run_id: int, out: RunOutputs) -> None:
    """Write a finished run's outputs and mark it done, all in one transaction.

    The rows a run writes refer to its run, its benchmark, models and items: instead of SQLite's check of every
    row's references (four parent look-ups per flag: 0.6 s of the 210,060 anomaly flags at 5,000 x 14,000, issue
    26), the transaction runs with ``foreign_keys`` off and :func:`_check_references` looks up each distinct
    referenced id once before it commits; a missing one (a model, item or run deleted by another process since the
    run started) fails the write as the per-row check did (``sqlite3.IntegrityError``, nothing written)."""
    model_rows = list(_rows(out.models, "model_id", MODEL_COLS)) if out.models is not None and len(out.models) else []
    item_rows = list(_rows(out.items, "item_id", ITEM_COLS)) if out.items is not None and len(out.items) else []
    with _references_checked_once(conn), transaction(conn):
        if model_rows:
            conn.executemany(
                f"INSERT OR REPLACE INTO run_models (run_id, model_id, {', '.join(MODEL_COLS)}, extra)"
                f" VALUES (?, ?, {', '.join('?' * len(MODEL_COLS))}, ?)",
                ((run_id, *row) for row in model_rows),
            )
        if item_rows:
            conn.executemany(
                f"INSERT OR REPLACE INTO run_items (run_id, item_id, {', '.join(ITEM_COLS)}, extra)"
                f" VALUES (?, ?, {', '.join('?' * len(ITEM_COLS))}, ?)",
                ((run_id, *row) for row in item_rows),
            )
        for name, value in out.artifacts.items():
            fmt, data = _encode(value)
            conn.execute("INSERT OR REPLACE INTO run_artifacts (run_id, name, format, data) VALUES (?, ?, ?, ?)",
                         (run_id, name, fmt, data))
        has_flags = out.flags is not None and len(out.flags) > 0
        row = conn.execute("SELECT benchmark_id FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None and (model_rows or item_rows or out.artifacts or has_flags):
            raise sqlite3.IntegrityError(f"FOREIGN KEY constraint failed: run #{run_id} no longer exists")
        flag = [[] for _ in FLAG_COLUMNS]
        if has_flags:
            flag = _flag_columns(out.flags, run_id, row[0])
            _insert_flags(conn, flag)
        _check_references(conn, models=[r[0] for r in model_rows] + flag[4] + flag[5],
                          items=[r[0] for r in item_rows] + flag[3], benchmarks=flag[2])
        conn.execute(
            "UPDATE runs SET status = 'done', metrics = ?, timings = ?,"
            " finished_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE id = ?",
            (_json(out.metrics), _json(out.timings), run_id),
        )
    FINISHED_HERE.append((_main_file(conn), run_id))


FINISHED_HERE: list[tuple[str, int]] = []  # (database file, run id) of every run this process marked done


def _main_file(conn: sqlite3.Connection) -> str:
    row = next((r for r in conn.execute("PRAGMA database_list") if r[1] == "main"), None)
    return row[2] if row is not None else ""


def fail_finished_here(error: str) -> None:
    """A command that stored a run ``done`` and then failed (its report could not be made, a later step
    refused) marks that run failed with its one-line error: a run whose command failed is never ``done``
    (issue 37 #12: `compress` on an all-right benchmark exited 1 on a TypeError and left its run ``done``).
    Best effort: the file may be gone or locked; the command's own error is what the user sees."""
    from benchloupe.store.db import connect

    while FINISHED_HERE:
        path, run_id = FINISHED_HERE.pop()
        if not path:
            continue
        try:
            conn = connect(path)
            try:
                with transaction(conn):
                    conn.execute("UPDATE runs SET status = 'failed', error = ? WHERE id = ? AND status = 'done'",
                                 (error[:500], run_id))
            finally:
                conn.close()
        except (sqlite3.Error, StoreError, OSError):
            pass


class _references_checked_once:
    """``PRAGMA foreign_keys`` off for one transaction of :func:`save_outputs` (the pragma cannot change inside
    one), and back to what it was afterwards, whatever happens."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self):
        self.was = self.conn.execute("PRAGMA foreign_keys").fetchone()[0]
        self.conn.execute("PRAGMA foreign_keys = OFF")
        return self

    def __exit__(self, kind, value, tb) -> None:
        try:
            self.conn.execute(f"PRAGMA foreign_keys = {'ON' if self.was else 'OFF'}")
        except sqlite3.Error:
            if kind is None:  # a failure of its own; else the one under way is what the caller needs to see
                raise


def _check_references(conn: sqlite3.Connection, *, models: list, items: list, benchmarks: list) -> None:
    """Every non-NULL id a run's rows refer to exists (what ``foreign_keys`` checks row by row), each distinct
    id looked up once inside the writing transaction; ``sqlite3.IntegrityError`` otherwise."""
    for table, ids in (("models", models), ("items", items), ("benchmarks", benchmarks)):
        wanted = {i for i in ids if i is not None}
        if not wanted:
            continue
        found = conn.execute(f"SELECT count(*) FROM {table} WHERE id IN (SELECT value FROM json_each(?))",
                             (json.dumps(sorted(wanted)),)).fetchone()[0]
        if found != len(wanted):
            raise sqlite3.IntegrityError(f"FOREIGN KEY constraint failed: {len(wanted) - found} of the run's "
                                         f"{table} no longer exist")


PAYLOAD_JSON = "payload_json"  # a flags column of payloads already written as JSON text (json_objects)


def _flag_columns(flags, run_id: int, bid) -> list[list]:
    """The flags table's columns (:data:`FLAG_COLUMNS`) of a frame (DataFrame or Columns), built a column at a time:
    the values ``_int``/``_float``/``_json`` gave of each record (210,000 anomaly flags: no dict per row).  A ``payload_json``
    column is stored as it is (:func:`json_objects` writes it as ``_json`` of the payload would); else ``payload``
    dicts go through ``_json`` (``{}`` where absent)."""
    n = len(flags)
    names = set(flags.columns)

    def col(name: str) -> list:  # Python values, as the records of the row-wise writer held them
        return flags[name].tolist()

    def ids(name: str):
        if name not in names:
            return [None] * n
        a = np.asarray(flags[name])
        if a.dtype.kind in "iu":  # no missing id: the ints as they are (210,060 flags: no call per value)
            return a.tolist()
        return [_int(v) for v in a.tolist()]

    def scores() -> list:
        a = np.asarray(flags["score"])
        if a.dtype.kind != "f":
            return [_float(v) for v in a.tolist()]
        values = a.astype(float).tolist()  # _float of each: the float, None where not finite
        for k in np.flatnonzero(~np.isfinite(a)).tolist():
            values[k] = None
        return values

    if PAYLOAD_JSON in names:
        payload = col(PAYLOAD_JSON)
    elif "payload" in names:
        payload = [_json(v) for v in col("payload")]
    else:
        payload = [_json({})] * n
    kind = col("kind")
    bench = col("benchmark_id") if "benchmark_id" in names else [bid] * n
    score = scores() if "score" in names else [None] * n
    reason = [str(v) for v in col("reason")] if "reason" in names else [""] * n  # item flags (issue 33)
    return [[run_id] * n, kind, bench, ids("item_id"), ids("model_id"), ids("model_b_id"), score, payload, reason]


FLAG_COLUMNS = ("run_id", "kind", "benchmark_id", "item_id", "model_id", "model_b_id", "score", "payload", "reason")
ROWS_PER_INSERT = 50  # rows of one multi-row INSERT of the flags (450 parameters; SQLite allows 32,766)


def _insert_flags(conn: sqlite3.Connection, columns: list[list]) -> None:
    """The flags' rows (:func:`_flag_columns`) inserted :data:`ROWS_PER_INSERT` to a statement, in order (so their
    ids ascend as one row per statement gave them): half the time of one statement per row (issue 26: 210,060
    anomaly flags, 1.16 -> 0.60 s at load 1.6), the remainder one row at a time."""
    n = len(columns[0])
    head = f"INSERT INTO flags ({', '.join(FLAG_COLUMNS)}) VALUES "
    one = "(" + ", ".join("?" * len(FLAG_COLUMNS)) + ")"
    k = ROWS_PER_INSERT
    full = n // k * k
    if full:
        grid = np.empty((full, len(FLAG_COLUMNS)), dtype=object)
        for j, col in enumerate(columns):
            grid[:, j] = np.array(col[:full], dtype=object)  # the Python values themselves, not numpy's
        conn.executemany(head + ", ".join([one] * k), grid.reshape(full // k, k * len(FLAG_COLUMNS)).tolist())
    if full < n:
        conn.executemany(head + one, list(zip(*(col[full:] for col in columns), strict=True)))


def _json_float(v: float) -> str:
    """A float as ``json.dumps`` writes it (its ``float.__repr__``; NaN and the infinities as JavaScript names)."""
    if v - v == 0:  # finite
        return float.__repr__(v)
    return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")


def json_objects(columns: dict) -> list[str]:
    """Per row, the text ``_json({name: columns[name][k], ...})`` gives (keys sorted, floats as ``json`` writes
    them, NaN and infinities included), built a column at a time: a float column (numpy floating array) is written
    by ``repr`` per value, a column of strings by one ``json.dumps`` per distinct value; any other column falls back
    to ``_json`` per value.  For the payloads of hundreds of thousands of flags (issue 26: 210,000 anomaly flags
    took ~3 s through ``json.dumps`` of a dict each); a float array's values are taken as Python floats (its
    ``tolist()``, as the payload dicts held them).  tests/unit/test_store.py checks the text equals ``_json``'s."""
    keys = sorted(columns)
    if not keys:
        raise ValueError("json_objects needs at least one column")
    parts = []
    for k in keys:
        v = columns[k]
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            v = v.astype(float)
            # each distinct value (by its bits: 0.0 and -0.0 are written apart) written once: a model's theta, an
            # item's b and a, a 0/1 observation repeat across flags
            bits, inverse = np.unique(v.view(np.int64), return_inverse=True)
            if 2 * len(bits) <= len(v):
                enc = [_json_float(x) for x in bits.view(np.float64).tolist()]
                text = list(map(enc.__getitem__, inverse.ravel().tolist()))
            else:
                text = list(map(float.__repr__, v.tolist()))  # _json_float of a finite float, without a call each
                for j in np.flatnonzero(~np.isfinite(v)).tolist():
                    text[j] = _json_float(float(v[j]))
        else:
            vals = v.tolist() if isinstance(v, np.ndarray) else list(v)
            if set(map(type, vals)) == {str}:
                enc = {x: json.dumps(x) for x in set(vals)}
                text = list(map(enc.__getitem__, vals))
            else:
                text = [_json(x) for x in vals]
        parts.append(text)
    heads = [json.dumps(k) + ": " for k in keys]
    fmt = "{" + ", ".join(h.replace("%", "%%") + "%s" for h in heads) + "}"
    return [fmt % row for row in zip(*parts, strict=True)]


def set_timings(conn: sqlite3.Connection, run_id: int, timings: dict) -> None:
    """Replace a finished run's timings (a job that times its own store write records it afterwards)."""
    with transaction(conn):
        conn.execute("UPDATE runs SET timings = ? WHERE id = ?", (_json(timings), run_id))


def _int(v):
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    return int(v)


def _float(v):
    if v is None:
        return None
    v = float(v)
    return v if np.isfinite(v) else None


def _encode(value) -> tuple[str, bytes | str]:
    if isinstance(value, Columns):
        return "json", json.dumps(value.to_split(), default=_default)
    pd = sys.modules.get("pandas")  # a DataFrame exists only when pandas is loaded: never import it for this
    if pd is not None and isinstance(value, pd.DataFrame):
        return "json", value.to_json(orient="split", index=False, double_precision=15)
    if isinstance(value, str):
        return "text", value
    if isinstance(value, dict) and value and all(isinstance(v, np.ndarray) for v in value.values()):
        buf = io.BytesIO()
        np.savez_compressed(buf, **value)
        return "npz", buf.getvalue()
    return "json", _json(value)


def load_artifact(conn: sqlite3.Connection, run_id: int, name: str):
    """An artifact as it was saved: DataFrame, dict, str or dict of arrays; None when absent."""
    row = conn.execute("SELECT format, data FROM run_artifacts WHERE run_id = ? AND name = ?", (run_id, name)).fetchone()
    if row is None:
        return None
    fmt, data = row
    if fmt == "text":
        return data
    if fmt == "npz":
        with np.load(io.BytesIO(data)) as z:
            return {k: z[k] for k in z.files}
    obj = json.loads(data)
    if isinstance(obj, dict) and set(obj) == {"columns", "data"}:
        import pandas as pd

        return pd.DataFrame(obj["data"], columns=obj["columns"])
    return obj


def load_table(conn: sqlite3.Connection, run_id: int, name: str) -> Columns | None:
    """A table artifact as :class:`~benchloupe.columns.Columns` (no pandas); None when absent or not a table."""
    row = conn.execute("SELECT format, data FROM run_artifacts WHERE run_id = ? AND name = ?", (run_id, name)).fetchone()
    if row is None or row[0] != "json":
        return None
    obj = json.loads(row[1])
    if not (isinstance(obj, dict) and set(obj) == {"columns", "data"}):
        return None
    return Columns.from_rows(obj["data"], obj["columns"])


def artifact_names(conn: sqlite3.Connection, run_id: int) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM run_artifacts WHERE run_id = ? ORDER BY name", (run_id,))]


def fail_run(conn: sqlite3.Connection, run_id: int, status: str, error: str) -> None:
    """End a running run as failed, cancelled or interrupted, with a one-line reason."""
    with transaction(conn):
        conn.execute(
            "UPDATE runs SET status = ?, error = ?, finished_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"
            " WHERE id = ? AND status = 'running'", (status, error, run_id),
        )


def beat(conn: sqlite3.Connection, run_id: int, now: float) -> bool:
    """Renew a running run's heartbeat; False once the run is no longer running."""
    return conn.execute("UPDATE runs SET heartbeat = ? WHERE id = ? AND status = 'running'",
                        (now, run_id)).rowcount > 0


mark_interrupted = runners.mark_interrupted_runs


def remove_run(conn: sqlite3.Connection, run_id: int) -> None:
    """Delete a run that is not running (with its outputs and flags)."""
    row = conn.execute("SELECT status, runner, heartbeat FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise StoreError(say(f"no run {run_id}; ", Alt("`benchloupe list` shows the runs", "screen 4 lists them")))
    if row[0] == "running" and runners.alive(row[1], row[2]):
        raise StoreError(f"run {run_id} is running ({runners.describe(row[1])}); cancel it before removing it")
    if row[0] == "done":
        raise StoreError(f"run {run_id} finished; only an interrupted, cancelled or failed run is removed here")
    with transaction(conn):
        conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))


def status_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Runs per status, without writing: a ``running`` row whose runner is gone counts as ``interrupted``
    (``db check`` opens the file without migrating or marking anything)."""
    counts: dict[str, int] = {}
    for status, runner, heartbeat in conn.execute("SELECT status, runner, heartbeat FROM runs"):
        if status == "running" and not runners.alive(runner, heartbeat):
            status = "interrupted"
        counts[status] = counts.get(status, 0) + 1
    return dict(sorted(counts.items()))


def list_runs(conn: sqlite3.Connection, benchmark: str | None = None, kind: str | None = None) -> pd.DataFrame:
    import pandas as pd

    sql = ("SELECT r.id, r.kind, b.name AS benchmark, r.status, r.seed, r.created_at, r.finished_at, r.metrics,"
           " r.timings, r.config, r.error, r.label FROM runs r LEFT JOIN benchmarks b ON b.id = r.benchmark_id WHERE 1")
    args: list = []
    if benchmark:  # runs on the benchmark, and runs that used it as an input (an arena set of a joint fit)
        sql += (" AND (b.name = ? OR r.id IN (SELECT ri.run_id FROM run_inputs ri JOIN benchmarks bi"
                " ON bi.id = ri.benchmark_id WHERE bi.name = ?))")
        args += [benchmark, benchmark]
    if kind:
        sql += " AND r.kind = ?"
        args.append(kind)
    return pd.read_sql_query(sql + " ORDER BY r.id DESC", conn, params=args)


def get_run(conn: sqlite3.Connection, run_id: int) -> dict | None:
    row = conn.execute("SELECT r.*, b.name AS benchmark FROM runs r LEFT JOIN benchmarks b ON b.id = r.benchmark_id"
                       " WHERE r.id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    d = dict(row)
    for k in ("config", "metrics", "timings"):
        d[k] = json.loads(d[k])
    return d


def latest_run(conn: sqlite3.Connection, benchmark_id: int, kinds: tuple[str, ...], status: str = "done") -> int | None:
    q = ",".join("?" * len(kinds))
    row = conn.execute(
        f"SELECT id FROM runs WHERE benchmark_id = ? AND kind IN ({q}) AND status = ? ORDER BY id DESC LIMIT 1",
        (benchmark_id, *kinds, status)).fetchone()
    return None if row is None else int(row[0])


def run_models(conn: sqlite3.Connection, run_id: int) -> pd.DataFrame:
    import pandas as pd

    df = pd.read_sql_query(
        "SELECT rm.*, m.name, m.family, m.owner FROM run_models rm JOIN models m ON m.id = rm.model_id"
        " WHERE rm.run_id = ? ORDER BY rm.rank, rm.theta DESC", conn, params=[run_id])
    return none_for_missing(_expand_extra(df), ("family", "owner"))


def run_items(conn: sqlite3.Connection, run_id: int) -> pd.DataFrame:
    import pandas as pd

    df = pd.read_sql_query(
        "SELECT ri.*, i.key, i.grp AS \"group\" FROM run_items ri JOIN items i ON i.id = ri.item_id"
        " WHERE ri.run_id = ? ORDER BY i.pos", conn, params=[run_id])
    return _expand_extra(df)


def static_item_parameters(conn: sqlite3.Connection, run_id: int) -> dict[int, tuple[float, float]]:
    """item id -> (difficulty, sharpness) of a fit's static items with both parameters: :func:`run_items`'s rows
    whose ``source`` is static or unset, without the frame and the parse of every row's extra (``estimate``'s
    frozen calibration; 14,000 rows)."""
    return {int(i): (d, a) for i, d, a in conn.execute(
        "SELECT item_id, difficulty, sharpness FROM run_items WHERE run_id = ? AND difficulty IS NOT NULL"
        " AND sharpness IS NOT NULL AND coalesce(json_extract(extra, '$.source'), 'static') = 'static'", (run_id,))}


def model_abilities(conn: sqlite3.Connection, run_id: int) -> tuple[np.ndarray, list[str]]:
    """(theta, name) of a fit's models in :func:`run_models`' order (rank, then theta descending), without the
    frame and the parse of every row's extra."""
    rows = conn.execute("SELECT rm.theta, m.name FROM run_models rm JOIN models m ON m.id = rm.model_id"
                        " WHERE rm.run_id = ? ORDER BY rm.rank, rm.theta DESC", (run_id,)).fetchall()
    return np.array([np.nan if t is None else t for t, _ in rows], float), [n for _, n in rows]


def _expand_extra(df: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    if df.empty:
        return df.drop(columns=["extra"], errors="ignore")
    extra = pd.DataFrame([json.loads(x) for x in df["extra"]], index=df.index)
    extra = extra[[c for c in extra.columns if c not in df.columns]]
    return pd.concat([df.drop(columns=["extra"]), extra], axis=1)
