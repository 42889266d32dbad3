"""Exports that keep what was imported: results with their successes/trials, models with their metadata.

``results``: a 0/1 benchmark exports as the wide matrix (model x item keys, blank = missing); a benchmark
holding successes/trials (Inspect epochs, binomial long files) exports in long form ``model, item,
successes, trials`` so that 2 of 4 stays 2/4 (rounding to a majority would lose it); both re-import as they
are (``import wide`` / ``import long``).
"""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pandas as pd

from . import read


def results_frame(conn: sqlite3.Connection, benchmark: str) -> pd.DataFrame:
    sm = read.load_static(conn, benchmark, include_retired=True)
    keys = sm.items["key"].astype(str).to_numpy()
    names = sm.models["name"].astype(str).to_numpy()
    if sm.trials is not None:
        m, j = np.nonzero(sm.trials > 0)
        return pd.DataFrame({"model": names[m], "item": keys[j], "successes": sm.successes[m, j],
                             "trials": sm.trials[m, j]})
    df = pd.DataFrame(sm.correct.astype("float64"), columns=keys, index=names).where(sm.mask)
    df.index.name = "model"
    return df.reset_index()


def models_frame(conn: sqlite3.Connection, benchmark: str) -> pd.DataFrame:
    """``read.models`` plus each model's metadata (a JSON object per row)."""
    df = read.models(conn, benchmark)
    meta = dict(conn.execute("SELECT id, metadata FROM models WHERE id IN (SELECT model_id FROM benchmark_models"
                             " WHERE benchmark_id = ?)", (read.benchmark_id(conn, benchmark),)).fetchall())
    df["metadata"] = [json.dumps(json.loads(meta.get(i) or "{}"), ensure_ascii=False, sort_keys=True)
                      for i in df["id"]]
    return df
