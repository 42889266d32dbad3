"""The item audit run (issue 33): load a benchmark's results, chosen options, keys, texts and release dates,
run engine.itemhealth, store the whole table as the run's ``table`` artifact, the evidence cards' arrays as
``cards``, and one flag of kind ``item`` per flagged item (reason: its most serious) for the triage queue."""

from __future__ import annotations

import json
import threading
import time

import numpy as np

from benchloupe.engine.common import EngineError, Progress, no_progress
from benchloupe.engine.itemhealth import ItemAuditConfig, ItemAuditInputs, run_item_audit
from benchloupe.store import itemkeys, read, runs
from benchloupe.store.db import connect

from .base import Analysis, RunContext, fingerprint, register

KIND = "items"
__all__ = ["ItemAuditConfig", "run_items_audit"]  # the faces take the config from here (they import no engine)
DATE_KEYS = ("release_date", "released", "date", "release")


def _years(meta_texts: list[str]) -> np.ndarray:
    """Decimal years of the models' release dates (metadata ``release_date``/``released``/``date``), NaN unknown."""
    import pandas as pd

    out = np.full(len(meta_texts), np.nan)
    for i, text in enumerate(meta_texts):
        try:
            meta = json.loads(text or "{}")
        except ValueError:
            continue
        value = next((meta[k] for k in DATE_KEYS if isinstance(meta, dict) and meta.get(k)), None)
        if value is None:
            continue
        stamp = pd.to_datetime(str(value), errors="coerce", utc=True)
        if stamp is not pd.NaT and not pd.isna(stamp):
            out[i] = stamp.year + (stamp.dayofyear - 1) / 365.25
    return out


def load_inputs(conn, benchmark: str) -> tuple[ItemAuditInputs, object, list]:
    """(engine inputs, the StaticMatrix, each item's choices) of the benchmark's active static items."""
    sm = read.load_static(conn, benchmark, with_text=True)
    if sm.correct.size == 0:
        raise EngineError(f"benchmark {benchmark!r} has no static results to audit; import some first")
    bid = read.benchmark_id(conn, benchmark)
    if sm.trials is not None:
        with np.errstate(invalid="ignore", divide="ignore"):
            y = np.where(sm.trials > 0, sm.successes / np.maximum(sm.trials, 1), np.nan)
    else:
        y = np.where(sm.mask, sm.correct, np.nan).astype(float)
    items = sm.items
    model_ids = sm.models["id"].tolist()
    options = itemkeys.load_options(conn, bid, model_ids, items["pos"].to_numpy(np.int64))
    choices_by_id = itemkeys.item_choices(conn, bid)
    choices = [choices_by_id.get(int(i), []) for i in items["id"]]
    answers = [str(a) for a in items["answer"].fillna("")]
    key = np.array([c.index(a) if a in c else -1 for c, a in zip(choices, answers, strict=True)])
    meta = dict(conn.execute(f"SELECT id, metadata FROM models WHERE id IN ({','.join('?' * len(model_ids))})",
                             model_ids).fetchall()) if model_ids else {}
    release = _years([meta.get(i, "{}") for i in model_ids])
    ref = [r[0] for r in conn.execute("SELECT text FROM items WHERE benchmark_id != ? AND text != ''", (bid,))]
    texts = [str(t) for t in items["text"].fillna("")]
    inp = ItemAuditInputs(y=y, chance=items["chance"].to_numpy(float), options=options, key=key,
                          n_choices=np.array([len(c) for c in choices]), texts=texts if any(texts) else None,
                          ref_texts=ref, groups=[str(g) for g in items["group"].fillna("")],
                          release=release if np.isfinite(release).any() else None)
    return inp, sm, choices


def _label(choices: list, idx) -> str | None:
    idx = int(idx)
    return str(choices[idx]) if 0 <= idx < len(choices) else None


def headline(reasons: list[str], row: dict, choices: list, answer: str) -> str:
    """One line for the queue: what is wrong and the strongest evidence."""
    parts = []
    if "miskeyed" in reasons or "ambiguous" in reasons:
        sug = _label(choices, row["suggested"])
        if sug is not None:
            parts.append(f"suggested key: {sug} ({row['top_share'] * 100:.0f} % of the top quartile; key {answer}: "
                         f"{row['key_share'] * 100:.0f} %)")
        else:
            parts.append(f"option {_label(choices, row['distractor'])} goes with ability (q {row['q_miskey']:.2g})")
    if np.isfinite(row["slope"]):
        parts.append(f"slope {row['slope']:.2f} [{row['slope_lo']:.2f}, {row['slope_hi']:.2f}]")
    if "backwards" in reasons:
        parts.append(f"item-rest r {row['r_rest']:.3f} (q {row['q_backwards']:.2g})")
    if "dead" in reasons:
        parts.append(f"no model right of {int(row['n_answers'])}")
    if "solved" in reasons:
        parts.append(f"every model right of {int(row['n_answers'])}")
    if "misfit" in reasons:
        parts.append(f"S-X2 {row['sx2']:.1f} on {int(row['sx2_df'])} df (q {row['sx2_q']:.2g}, RMSEA "
                     f"{row['sx2_rmsea']:.3f})")
    if "duplicate" in reasons:
        parts.append(f"near-duplicate text (Jaccard {row['dup_jaccard']:.2f})")
    return "; ".join(parts)


def run_items_audit(db_path, benchmark: str, config: ItemAuditConfig = ItemAuditConfig(), *,
                    progress: Progress = no_progress, cancel: threading.Event | None = None, **_) -> int:
    """Audit *benchmark*'s items; the run id. Bad input (EngineError) leaves no run behind."""
    import pandas as pd

    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        inp, sm, choices = load_inputs(conn, benchmark)
        ctx = RunContext(db_path, KIND, benchmark, config, config.seed, [(benchmark, "static")])
        ctx.start(conn, fingerprint(inp.y, inp.options, inp.key))
        with ctx.guard(conn):
            t = ctx.lap("load_s", t0)
            res = run_item_audit(inp, config, progress=progress, cancel=cancel)
            t = ctx.lap("audit_s", t)
            items = sm.items
            table = pd.DataFrame({"item_id": items["id"].to_numpy(), "key": items["key"].astype(str),
                                  **{k: np.asarray(v) for k, v in res.table.items()}})
            table["answer"] = [str(a) for a in items["answer"].fillna("")]
            table["choices"] = [json.dumps(c) for c in choices]
            table["suggested_key"] = [_label(c, s) for c, s in zip(choices, res.table["suggested"], strict=True)]
            rows = table.to_dict("records")
            flags = []
            for f in res.flags:
                j = f["item"]
                row = rows[j]
                payload = {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in row.items()
                           if k not in ("choices",)}
                payload.update({"reasons": f["reasons"], "choices": choices[j],
                                "headline": headline(f["reasons"], row, choices[j], row["answer"])})
                flags.append({"kind": "item", "item_id": int(row["item_id"]), "score": f["score"],
                              "reason": f["reasons"][0], "payload": payload})
            metrics = dict(res.metrics)
            metrics["benchmark"] = benchmark
            artifacts = {"table": table, "cards": {k: np.asarray(v, float) for k, v in res.cards.items()}}
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=metrics, timings=ctx.timings, artifacts=artifacts,
                flags=pd.DataFrame(flags) if flags else None))
            ctx.lap("save_s", t)
            runs.set_timings(conn, ctx.run_id, {**ctx.timings, "total_s": round(time.perf_counter() - t0, 4)})
        return int(ctx.run_id)
    finally:
        conn.close()


register(Analysis("items", "Broken items: mis-keyed, backwards, dead, misfitting, duplicated, with the key the data "
                  "suggest", "audit", ItemAuditConfig, "static",
                  lambda db, bench, config=None, **kw: run_items_audit(db, bench, config or ItemAuditConfig(), **kw)))
