"""Typed reads: response matrices as numpy arrays with masks, everything else as pandas frames.

Row order of every matrix is the benchmark's model order (``benchmark_models.pos``); column order is the
item order (``items.pos``), restricted to the items asked for (active static items by default).
:func:`load_static_columns` gives the same matrix with items and models as :class:`~benchloupe.columns.Columns`,
for paths that must not pay pandas' import (the primary near-tie audit, issue 13); pandas is imported by the
functions that return frames.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from benchloupe.columns import Columns
from benchloupe.hints import Alt, Opt, say

from .db import StoreError

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class StaticMatrix:
    """A benchmark's static results. ``correct`` is int8 (-1 missing); ``mask`` is True where observed.

    For successes/trials results, ``successes``/``trials`` are int32 and ``correct`` holds the rounded
    per-cell majority (successes * 2 >= trials) so 0/1 methods still run.
    """

    benchmark: str
    items: pd.DataFrame  # Columns from load_static_columns
    models: pd.DataFrame
    correct: np.ndarray
    mask: np.ndarray
    successes: np.ndarray | None = None
    trials: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return self.correct.shape


@dataclass
class ArenaMatrix:
    """Arena rewards of one reward model: ``rewards`` (models x prompts) with NaN for a missing cell."""

    benchmark: str
    items: pd.DataFrame
    models: pd.DataFrame
    rewards: np.ndarray
    reward_model: str


def benchmark_id(conn: sqlite3.Connection, name: str) -> int:
    row = conn.execute("SELECT id FROM benchmarks WHERE name = ?", (name,)).fetchone()
    if row is None:
        names = [r[0] for r in conn.execute("SELECT name FROM benchmarks ORDER BY name")]
        hint = f"known: {', '.join(names)}" if names else say(
            "the database has no benchmarks; import one or ", Alt("run `benchloupe demo`", "build the demo (d on screen 1)"))
        raise StoreError(say(f"no benchmark named {name!r}; ", hint))
    return int(row[0])


def items(conn: sqlite3.Connection, name: str, *, kind: str | None = None, status: str | None = None,
          with_text: bool = True) -> pd.DataFrame:
    """A benchmark's items in position order."""
    import pandas as pd

    bid = benchmark_id(conn, name)
    cols = "id, pos, key, grp, kind, chance, origin, parent_id, status, metadata"
    if with_text:
        cols += ", text, answer"
    sql = f"SELECT {cols} FROM items WHERE benchmark_id = ?"
    args: list = [bid]
    if kind:
        sql += " AND kind = ?"
        args.append(kind)
    if status:
        sql += " AND status = ?"
        args.append(status)
    df = pd.read_sql_query(sql + " ORDER BY pos", conn, params=args)
    return df.rename(columns={"grp": "group"})


def models(conn: sqlite3.Connection, name: str) -> pd.DataFrame:
    """A benchmark's models in their import order, with family, owner and aliases."""
    import pandas as pd

    bid = benchmark_id(conn, name)
    df = pd.read_sql_query(
        "SELECT m.id, m.name, m.family, m.owner, bm.pos,"
        " (SELECT group_concat(alias, '|') FROM model_aliases a WHERE a.model_id = m.id) AS aliases"
        " FROM benchmark_models bm JOIN models m ON m.id = bm.model_id WHERE bm.benchmark_id = ? ORDER BY bm.pos",
        conn, params=[bid],
    )
    df["aliases"] = df["aliases"].fillna("")
    return none_for_missing(df, ("family", "owner"))


def none_for_missing(df: pd.DataFrame, columns) -> pd.DataFrame:
    """Missing text labels as None, not NaN (pandas reads SQL NULL as NaN, and ``nan or '-'`` is ``nan``:
    a model without a family would print as ``family nan``)."""
    for c in columns:
        if c in df.columns:
            df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df


def load_static(conn: sqlite3.Connection, name: str, *, include_retired: bool = False,
                with_text: bool = False) -> StaticMatrix:
    """The dense static response matrix of a benchmark, aligned with item and model order."""
    ps = load_static_packed(conn, name, include_retired=include_retired, with_text=with_text)
    return StaticMatrix(name, ps.items, ps.models, *ps.matrix(np.arange(len(ps.models))))


@dataclass
class PackedStatic:
    """A benchmark's static results as stored, one packed row per model, before a matrix is built: what
    :func:`load_static` reads, for callers that need the rows of a few models only.  ``estimate`` counts every
    model's answered cells (:meth:`answered`) and then builds the rows of the 2,000 models it uses of 6,000
    (:meth:`matrix`): the whole 6,000 x 14,000 matrix and its mask were half its time."""

    benchmark: str
    items: pd.DataFrame  # as load_static's
    models: pd.DataFrame  # as load_static's: the models with static results, in benchmark order
    rows: dict  # model id -> (model_id, n, correct, successes, trials) as stored
    n_all: int  # item positions of the benchmark (retired and other kinds included)

    @property
    def binomial(self) -> bool:
        """Whether any row holds successes/trials (then :meth:`matrix` gives them for every row)."""
        return any(r[4] is not None for r in self.rows.values())

    def matrix(self, model_rows, cols=None) -> tuple:
        """(correct, mask, successes, trials) of the models at ``model_rows`` (positions in ``models``), at the
        items ``cols`` (positions in ``items``; all of them by default): :func:`load_static`'s rows."""
        ids = self.models["id"].to_numpy()[np.asarray(model_rows, np.int64)].tolist()
        pos = self.items["pos"].to_numpy(np.int64)
        return _static_matrix(self.n_all, self.rows, ids, pos if cols is None else pos[cols], self.binomial)

    def answered(self, cols=None, block: int = 512) -> np.ndarray:
        """Per model, its answered cells at the items ``cols`` (all by default), a block of models at a time
        (no models x items matrix)."""
        out = np.zeros(len(self.models), np.int64)
        for r0 in range(0, len(out), block):
            mask = self.matrix(np.arange(r0, min(r0 + block, len(out))), cols)[1]
            out[r0:r0 + len(mask)] = np.count_nonzero(mask, axis=1)
        return out


def load_static_packed(conn: sqlite3.Connection, name: str, *, include_retired: bool = False,
                       with_text: bool = False) -> PackedStatic:
    """A benchmark's items, models and packed static rows (:class:`PackedStatic`)."""
    bid = benchmark_id(conn, name)
    its = items(conn, name, kind="static", status=None if include_retired else "active", with_text=with_text)
    ms = models(conn, name)
    rows = _static_rows(conn, bid)
    ms = ms[ms["id"].isin(rows.keys())].reset_index(drop=True)
    return PackedStatic(name, its.reset_index(drop=True), ms, rows, _item_positions(conn, bid))


ITEM_COLUMNS = ("id", "pos", "key", "group", "kind", "chance", "origin", "parent_id", "status", "metadata")
MODEL_COLUMNS = ("id", "name", "family", "owner", "pos", "aliases")


def load_static_columns(conn: sqlite3.Connection, name: str, *, include_retired: bool = False) -> StaticMatrix:
    """:func:`load_static` without pandas: the same matrix and rows, ``items`` (ITEM_COLUMNS, no text) and
    ``models`` (MODEL_COLUMNS; NULL family/owner as None, no aliases as "") as Columns."""
    bid = benchmark_id(conn, name)
    sql = ("SELECT id, pos, key, grp, kind, chance, origin, parent_id, status, metadata FROM items"
           " WHERE benchmark_id = ? AND kind = 'static'" + ("" if include_retired else " AND status = 'active'")
           + " ORDER BY pos")
    its = Columns.from_rows(conn.execute(sql, (bid,)).fetchall(), ITEM_COLUMNS)
    rows = _static_rows(conn, bid)
    ms = Columns.from_rows([r for r in conn.execute(
        "SELECT m.id, m.name, m.family, m.owner, bm.pos,"
        " coalesce((SELECT group_concat(alias, '|') FROM model_aliases a WHERE a.model_id = m.id), '')"
        " FROM benchmark_models bm JOIN models m ON m.id = bm.model_id WHERE bm.benchmark_id = ? ORDER BY bm.pos",
        (bid,)).fetchall() if r[0] in rows], MODEL_COLUMNS)
    return StaticMatrix(name, its, ms, *_static_matrix(_item_positions(conn, bid), rows, ms["id"].tolist(),
                                                       its["pos"].astype(np.int64)))


def _static_rows(conn: sqlite3.Connection, bid: int) -> dict:
    return {r[0]: r for r in conn.execute(
        "SELECT model_id, n, correct, successes, trials FROM static_results WHERE benchmark_id = ?", (bid,))}


def _item_positions(conn: sqlite3.Connection, bid: int) -> int:
    return int(conn.execute("SELECT coalesce(max(pos) + 1, 0) FROM items WHERE benchmark_id = ?", (bid,)).fetchone()[0])


def _static_matrix(n_all: int, rows: dict, model_ids: list[int], pos: np.ndarray, binomial: bool | None = None):
    """(correct, mask, successes, trials) of the given models (in order) at the given item positions, of a
    benchmark with ``n_all`` item positions; successes/trials when ``binomial`` (default: when any row has them)."""
    if binomial is None:
        binomial = any(r[4] is not None for r in rows.values())
    full = np.full((len(model_ids), n_all), -1, np.int8)
    succ = tri = None
    if binomial:
        succ = np.zeros((len(model_ids), n_all), np.int32)
        tri = np.zeros((len(model_ids), n_all), np.int32)
    for i, mid in enumerate(model_ids):
        _, n, packed, successes, trials = rows[mid]
        if packed is not None:
            full[i, :n] = np.frombuffer(packed, np.int8)
            if binomial:
                seen = full[i, :n] >= 0
                succ[i, :n][seen] = full[i, :n][seen]
                tri[i, :n][seen] = 1
        else:
            s = np.frombuffer(successes, np.int32)
            t = np.frombuffer(trials, np.int32)
            succ[i, :n], tri[i, :n] = s, t
            full[i, :n] = np.where(t > 0, (2 * s >= t).astype(np.int8), -1)
    if len(pos) == n_all and np.array_equal(pos, np.arange(n_all)):  # every item, in order: no reordering copy
        correct = full
    else:
        correct = full[:, pos]
        if binomial:
            succ, tri = succ[:, pos], tri[:, pos]
    return correct, correct >= 0, succ, tri


def static_item_counts(conn: sqlite3.Connection, bid: int, *, chunk: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Per item position of benchmark *bid*: how many of its models have an observed static cell there, and how
    many of those are right (``correct`` 1; a successes/trials cell by its majority, as :func:`load_static`).
    The column sums of :func:`load_static`'s matrix over every item (retired too), read from the packed rows a
    block of models at a time without building the matrix (5,000 x 14,000: 70 M cells, two 70 MB arrays, for
    the Items screen's pass rates; issue 26)."""
    n_all = _item_positions(conn, bid)
    seen = np.zeros(n_all, np.int64)
    right = np.zeros(n_all, np.int64)
    block: list[bytes] = []
    width = -1

    def flush() -> None:
        if block:
            m = np.frombuffer(b"".join(block), np.int8).reshape(len(block), width)
            seen[:width] += np.count_nonzero(m >= 0, axis=0)
            right[:width] += np.count_nonzero(m > 0, axis=0)
            block.clear()

    rows = conn.execute("SELECT s.n, s.correct, s.successes, s.trials FROM static_results s JOIN benchmark_models bm"
                        " ON bm.benchmark_id = s.benchmark_id AND bm.model_id = s.model_id WHERE s.benchmark_id = ?",
                        (bid,))
    for n, packed, successes, trials in rows:
        if packed is None:
            t = np.frombuffer(trials, np.int32)[:n]
            s = np.frombuffer(successes, np.int32)[:n]
            seen[:n] += t > 0
            right[:n] += (t > 0) & (2 * s >= t)
            continue
        if n != width or len(block) >= chunk:
            flush()
            width = n
        block.append(bytes(packed[:n]))
    flush()
    return seen, right


def reward_models(conn: sqlite3.Connection, name: str) -> list[str]:
    bid = benchmark_id(conn, name)
    return [r[0] for r in conn.execute(
        "SELECT DISTINCT r.reward_model FROM arena_rewards r JOIN items i ON i.id = r.item_id"
        " WHERE i.benchmark_id = ? ORDER BY 1", (bid,))]


def load_arena(conn: sqlite3.Connection, name: str, *, reward_model: str | None = None,
               include_retired: bool = False) -> ArenaMatrix:
    """The arena reward matrix (models x prompts) of one reward model."""
    import pandas as pd

    bid = benchmark_id(conn, name)
    rms = reward_models(conn, name)
    if not rms:
        raise StoreError(say(f"benchmark {name!r} has no arena rewards; import them with ",
                                 Alt("`benchloupe import arena`", "o on the Benchmarks screen (format arena)")))
    if reward_model is None:
        if len(rms) > 1:
            raise StoreError(say(f"benchmark {name!r} has {len(rms)} reward models ({', '.join(rms)}); "
                                 "choose one with ", Opt("reward_model")))
        reward_model = rms[0]
    elif reward_model not in rms:
        raise StoreError(f"benchmark {name!r} has no rewards from {reward_model!r}; known: {', '.join(rms)}")
    its = items(conn, name, kind="arena", status=None if include_retired else "active", with_text=False)
    df = pd.read_sql_query(
        "SELECT r.item_id, r.model_id, r.reward FROM arena_rewards r JOIN items i ON i.id = r.item_id"
        " WHERE i.benchmark_id = ? AND r.reward_model = ?", conn, params=[bid, reward_model])
    ms = models(conn, name)
    ms = ms[ms["id"].isin(set(df["model_id"]))].reset_index(drop=True)
    its = its[its["id"].isin(set(df["item_id"]))].reset_index(drop=True)
    mi = pd.Index(ms["id"]).get_indexer(df["model_id"])
    ii = pd.Index(its["id"]).get_indexer(df["item_id"])
    keep = (mi >= 0) & (ii >= 0)
    rewards = np.full((len(ms), len(its)), np.nan)
    rewards[mi[keep], ii[keep]] = df["reward"].to_numpy()[keep]
    return ArenaMatrix(name, its, ms, rewards, reward_model)


def load_preferences(conn: sqlite3.Connection, name: str) -> pd.DataFrame:
    import pandas as pd

    bid = benchmark_id(conn, name)
    return pd.read_sql_query(
        "SELECT i.key AS item, ma.name AS model_a, mb.name AS model_b, p.judge, p.prob_a FROM preferences p"
        " JOIN items i ON i.id = p.item_id JOIN models ma ON ma.id = p.model_a JOIN models mb ON mb.id = p.model_b"
        " WHERE i.benchmark_id = ?", conn, params=[bid])


def benchmark_summaries(conn: sqlite3.Connection) -> pd.DataFrame:
    """One row per benchmark: counts and the last run, for ``list`` and the Benchmarks screen."""
    import pandas as pd

    from .summary import SUMMARY_SQL

    return pd.read_sql_query(SUMMARY_SQL, conn)


def static_cell_count(conn: sqlite3.Connection, name: str) -> int:
    """Observed static cells (reads the packed vectors)."""
    sm = load_static(conn, name, include_retired=True)
    return int(sm.mask.sum())


def truth(conn: sqlite3.Connection, name: str, entity: str) -> pd.DataFrame:
    """Stored ground truth (demo workspace): long frame key, name, value."""
    import pandas as pd

    bid = benchmark_id(conn, name)
    return pd.read_sql_query("SELECT key, name, value FROM truth WHERE benchmark_id = ? AND entity = ?", conn,
                             params=[bid, entity])


def setting(conn: sqlite3.Connection, key: str, default=None):
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
    return default if row is None else json.loads(row[0])
