"""Read models for screens and reports: one frame per table a curator looks at.

Parameters come from the latest finished run of the relevant kind: difficulty and sharpness from the latest
calibration (joint, static or arena fit), Fisher information from the latest calibration or compression run,
DIF range from the latest near-tie audit; anomaly counts are the undismissed current anomaly flags (store/queue.py, the one definition of the current flags).
"""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pandas as pd

from . import read

CALIBRATION_KINDS = ("joint", "static", "arena")


def latest_run_id(conn: sqlite3.Connection, benchmark: str, kinds: tuple[str, ...]) -> int | None:
    bid = read.benchmark_id(conn, benchmark)
    q = ",".join("?" * len(kinds))
    row = conn.execute(
        f"SELECT r.id FROM runs r WHERE r.status = 'done' AND r.kind IN ({q}) AND (r.benchmark_id = ? OR r.id IN"
        f" (SELECT run_id FROM run_inputs WHERE benchmark_id = ?)) ORDER BY r.id DESC LIMIT 1",
        (*kinds, bid, bid)).fetchone()
    return None if row is None else int(row[0])


def item_table(conn: sqlite3.Connection, benchmark: str, *, with_text: bool = False,
               counts: bool = True) -> pd.DataFrame:
    """Items with pass rate, latest difficulty/sharpness/Fisher/DIF range and anomaly counts (and ``text``
    when *with_text*; no ``anomalies`` column without *counts*). The pass rate of a static item is the share
    right of its observed cells (``read.static_item_counts``); other items have none."""
    its = read.items(conn, benchmark, with_text=with_text)
    bid = read.benchmark_id(conn, benchmark)
    seen, right = read.static_item_counts(conn, bid)
    rate = np.full(len(its), np.nan)
    static = (its["kind"] == "static").to_numpy()
    pos = its["pos"].to_numpy(np.int64)[static]
    if len(pos) and len(seen):
        n = seen[pos]
        with np.errstate(invalid="ignore"):
            r = right[pos] / np.maximum(n, 1)
        r[n == 0] = np.nan
        rate[static] = r
    out = its[["id", "key", "group", "kind", "origin", "status", *(["text"] if with_text else [])]].copy()
    out["pass_rate"] = rate
    for col, kinds, src in (("difficulty", CALIBRATION_KINDS, "difficulty"), ("sharpness", CALIBRATION_KINDS, "sharpness"),
                            ("fisher", ("compress", *CALIBRATION_KINDS), "fisher"),
                            ("dif_range", ("neartie",), "dif_range")):
        rid = latest_run_id(conn, benchmark, kinds)
        vals = {}
        if rid is not None:
            vals = dict(conn.execute(f"SELECT item_id, {src} FROM run_items WHERE run_id = ?", (rid,)).fetchall())
        out[col] = [vals.get(i) for i in out["id"]]
        out[col] = out[col].astype(float)
    if counts:
        per_item = undismissed_counts(conn, bid, "anomaly")
        out["anomalies"] = [int(per_item.get(i, 0)) for i in out["id"]]
    return out


def model_flag_summary(conn: sqlite3.Connection, benchmark_id: int, kind: str = "anomaly",
                       top: int = 6) -> dict[int, dict]:
    """Per model, its current flags of ``kind`` (store/queue.py: the queue's rows, the one definition every face
    counts): how many, and the ``top`` first in the queue's order (|score| descending, then id) with item key,
    payload and the state the queue shows. What the Models screen's detail line needs, without a frame of every
    flag (issue 26); the window sorts only ids and scores, the payloads are read for the rows kept."""
    from .queue import FlagQueue, prepare

    q = FlagQueue(prepare(conn), benchmark_id, kind, parse_payload=False)
    cte, args = q._cte(None)
    sql = f"""{cte},
    ranked AS (SELECT q.id, q.model_id, q.item_id, q.state, row_number() OVER (PARTITION BY q.model_id
               ORDER BY q.k DESC, q.id) AS rn, count(*) OVER (PARTITION BY q.model_id) AS n
               FROM q WHERE q.model_id IS NOT NULL)
    SELECT r.model_id, r.n, i.key, f.payload, r.state FROM ranked r JOIN flags f ON f.id = r.id
    LEFT JOIN items i ON i.id = r.item_id WHERE r.rn <= :top ORDER BY r.model_id, r.rn"""
    rows = conn.execute(sql, args | {"top": top}).fetchall()
    # one parse of the kept payloads as a JSON array (30,000 json.loads calls were a quarter of the summary)
    payloads = json.loads("[" + ",".join(r[3] for r in rows) + "]") if rows else []
    out: dict[int, dict] = {}
    for (mid, n, key, _text, state), payload in zip(rows, payloads, strict=True):
        entry = out.setdefault(int(mid), {"count": int(n), "top": []})
        entry["top"].append({"item_key": key, "payload": payload, "state": state})
    return out


def undismissed_counts(conn: sqlite3.Connection, benchmark_id: int, kind: str) -> dict[int, int]:
    """Per item, its current flags of ``kind`` (store/queue.py: the latest producing run's, with an earlier
    run's decision carried to an open, note-less flag about the same thing) that are not dismissed, counted by
    SQLite without a frame of every flag (an anomalies run at 5,000 x 14,000 holds 210,000; issue 26,
    tests/unit/test_scale.py checks they are the queue's)."""
    from .queue import FlagQueue, prepare

    q = FlagQueue(prepare(conn), benchmark_id, kind, parse_payload=False)
    cte, args = q._cte(None)
    sql = f"{cte} SELECT q.item_id, count(*) FROM q WHERE q.item_id IS NOT NULL AND q.state != 'dismissed' GROUP BY q.item_id"
    return {int(i): int(n) for i, n in conn.execute(sql, args)}


def model_table(conn: sqlite3.Connection, benchmark: str) -> pd.DataFrame:
    """Models with static/arena/joint abilities and ranks side by side, bootstrap intervals when present."""
    ms = read.models(conn, benchmark)[["id", "name", "family", "owner"]].copy()
    for kind in ("joint", "static", "arena", "bt", "avg-reward"):
        rid = latest_run_id(conn, benchmark, (kind,))
        col = kind.replace("-", "_")
        vals = {}
        if rid is not None:
            vals = {r[0]: (r[1], r[2]) for r in conn.execute(
                "SELECT model_id, theta, rank FROM run_models WHERE run_id = ?", (rid,))}
        ms[f"{col}_theta"] = [vals.get(i, (None, None))[0] for i in ms["id"]]
        ms[f"{col}_rank"] = [vals.get(i, (None, None))[1] for i in ms["id"]]
    rid = latest_run_id(conn, benchmark, ("bootstrap",))
    vals = {}
    if rid is not None:
        vals = {r[0]: r[1:] for r in conn.execute(
            "SELECT model_id, se, lo, hi, rank_lo, rank_hi FROM run_models WHERE run_id = ?", (rid,))}
    for k, name in enumerate(("se", "lo", "hi", "rank_lo", "rank_hi")):
        ms[name] = [vals.get(i, (None,) * 5)[k] for i in ms["id"]]
    order = next((c for c in ("joint_rank", "static_rank", "arena_rank") if ms[c].notna().any()), None)
    if order:
        ms = ms.sort_values(order, na_position="last")
    return ms.reset_index(drop=True)


MODEL_RUN_KINDS = ("joint", "static", "arena", "bt", "avg-reward", "bootstrap")


def model_runs(conn: sqlite3.Connection, benchmark: str) -> pd.DataFrame:
    """Finished runs that estimated this benchmark's models (newest first): id, kind, created_at, models."""
    bid = read.benchmark_id(conn, benchmark)
    q = ",".join("?" * len(MODEL_RUN_KINDS))
    return pd.read_sql_query(
        f"SELECT r.id, r.kind, r.created_at, count(rm.model_id) AS models FROM runs r"
        f" JOIN run_models rm ON rm.run_id = r.id WHERE r.status = 'done' AND r.kind IN ({q})"
        f" AND (r.benchmark_id = ? OR r.id IN (SELECT run_id FROM run_inputs WHERE benchmark_id = ?))"
        f" GROUP BY r.id ORDER BY r.id DESC", conn, params=[*MODEL_RUN_KINDS, bid, bid])


def run_model_table(conn: sqlite3.Connection, benchmark: str, run_id: int | None) -> pd.DataFrame:
    """The benchmark's models with every estimate from ONE run (ability, se, interval, rank, rank interval),
    ranked; models the run did not estimate come last with blanks."""
    ms = read.models(conn, benchmark)[["id", "name", "family", "owner"]].copy()
    cols = ("theta", "se", "lo", "hi", "rank", "rank_lo", "rank_hi")
    vals = {}
    if run_id is not None:
        vals = {r[0]: r[1:] for r in conn.execute(
            f"SELECT model_id, {', '.join(cols)} FROM run_models WHERE run_id = ?", (run_id,))}
    for k, name in enumerate(cols):  # every estimate as a float: a bootstrap's rank interval is fractional
        # (quantiles of the replicates' ranks, 18.525), so ranks are not cast to integers (issue 21 item 2)
        ms[name] = pd.array([vals.get(i, (None,) * len(cols))[k] for i in ms["id"]], dtype="Float64").astype(float)
    if ms["rank"].notna().any():
        ms = ms.sort_values("rank", na_position="last", kind="stable")
    elif ms["theta"].notna().any():
        ms = ms.sort_values("theta", ascending=False, na_position="last", kind="stable")
    return ms.reset_index(drop=True)


ESTIMATE_FIELDS = ("estimate", "estimate_lo", "estimate_hi", "seen", "n_items", "observed")


def latest_estimates(conn: sqlite3.Connection, benchmark: str) -> tuple[int | None, int | None, dict[int, dict]]:
    """The latest ``estimate`` run of the benchmark (issue 34), the calibration run it estimated from and, per
    model it estimated, its predicted full accuracy with the interval, the items seen of the calibrated ones and
    the observed accuracy on them."""
    rid = latest_run_id(conn, benchmark, ("estimate",))
    if rid is None:
        return None, None, {}
    metrics = conn.execute("SELECT metrics FROM runs WHERE id = ?", (rid,)).fetchone()[0]
    calibration = json.loads(metrics or "{}").get("calibration_run")
    out = {}
    for mid, extra in conn.execute("SELECT model_id, extra FROM run_models WHERE run_id = ?", (rid,)):
        d = json.loads(extra or "{}")
        out[int(mid)] = {k: d.get(k) for k in ESTIMATE_FIELDS}
    return rid, calibration, out


def item_detail(conn: sqlite3.Connection, item_id: int) -> dict:
    """Everything the item panel shows: text, answer, outcomes by model (ordered by ability), params per run."""
    row = conn.execute("SELECT i.*, b.name AS benchmark FROM items i JOIN benchmarks b ON b.id = i.benchmark_id"
                       " WHERE i.id = ?", (item_id,)).fetchone()
    if row is None:
        raise read.StoreError(f"no item with id {item_id}")
    d = dict(row)
    d["metadata"] = json.loads(d["metadata"])
    sm = read.load_static(conn, d["benchmark"], include_retired=True)
    outcomes = pd.DataFrame(columns=["model", "outcome", "theta"])
    col = np.flatnonzero(sm.items["id"].to_numpy() == item_id)
    if col.size:
        j = int(col[0])
        outcomes = pd.DataFrame({"model_id": sm.models["id"], "model": sm.models["name"],
                                 "outcome": np.where(sm.mask[:, j], sm.correct[:, j], -1)})
        rid = latest_run_id(conn, d["benchmark"], CALIBRATION_KINDS)
        theta = {}
        if rid is not None:
            theta = dict(conn.execute("SELECT model_id, theta FROM run_models WHERE run_id = ?", (rid,)).fetchall())
        outcomes["theta"] = [theta.get(i) for i in outcomes["model_id"]]
        outcomes = outcomes.sort_values("theta", ascending=False, na_position="last").reset_index(drop=True)
    params = pd.read_sql_query(
        "SELECT r.id AS run, r.kind, r.created_at, ri.difficulty, ri.sharpness, ri.fisher, ri.dif_range, ri.extra"
        " FROM run_items ri JOIN runs r ON r.id = ri.run_id WHERE ri.item_id = ? ORDER BY r.id DESC",
        conn, params=[item_id])
    d["outcomes"] = outcomes
    d["params"] = params
    return d


def compare_runs(conn: sqlite3.Connection, run_a: int, run_b: int) -> dict:
    """Two runs' model rankings side by side: Spearman and Kendall correlation of the scores over the common
    models, and the models ordered by how far they moved (rank in b minus rank in a)."""
    a = pd.read_sql_query("SELECT model_id, theta, rank FROM run_models WHERE run_id = ?", conn, params=[run_a])
    b = pd.read_sql_query("SELECT model_id, theta, rank FROM run_models WHERE run_id = ?", conn, params=[run_b])
    names = dict(conn.execute("SELECT id, name FROM models").fetchall())
    both = a.merge(b, on="model_id", suffixes=("_a", "_b")).dropna(subset=["theta_a", "theta_b"])
    out = {"run_a": run_a, "run_b": run_b, "models_a": len(a), "models_b": len(b), "common": len(both),
           "spearman": None, "kendall": None, "moved": pd.DataFrame(columns=["model", "rank_a", "rank_b", "moved"])}
    if len(both) < 2:
        return out
    out["spearman"] = float(both["theta_a"].corr(both["theta_b"], method="spearman"))
    out["kendall"] = float(both["theta_a"].corr(both["theta_b"], method="kendall"))
    ra = both["theta_a"].rank(ascending=False, method="min").astype(int)
    rb = both["theta_b"].rank(ascending=False, method="min").astype(int)
    moved = pd.DataFrame({"model": [names.get(i, str(i)) for i in both["model_id"]], "rank_a": ra.to_numpy(),
                          "rank_b": rb.to_numpy()})
    moved["moved"] = moved["rank_b"] - moved["rank_a"]
    out["moved"] = moved.reindex(moved["moved"].abs().sort_values(ascending=False, kind="stable").index
                                 ).reset_index(drop=True)
    return out
