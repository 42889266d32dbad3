"""Near-tie family-DIF audit runs (paper 002): the benchmark's static results, families and owners from the
store, the engine's audit, and a stored run with every table the curator needs; each near-tie pair becomes
a ``reversal`` flag (reversed pairs first) carrying the items that drove it.

Families come from the stored model labels (inferred from names at import with the paper's rules, or given by
the file / ``--models-file``); the owner is the stored owner, else the part of the id before "/" or "__".
Missing cells are passed to the engine as a mask (see docs/NEARTIE.md for how each step treats them).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from benchloupe.engine.common import EngineError, Progress, no_progress
from benchloupe.engine.families import infer_owner
from benchloupe.engine.neartie import AuditConfig, AuditResult, run_audit
from benchloupe.store import read, runs
from benchloupe.store.db import connect

from . import Analysis, RunContext, fingerprint, register


def _labels(series: pd.Series) -> list[str | None]:
    return [v if isinstance(v, str) and v.strip() else None for v in series]


def _item_frame(result: AuditResult, item_ids: np.ndarray) -> pd.DataFrame:
    """One row per item: DIF range averaged over the two audit halves, per-half cell/anchor/weight in extra."""
    it = result.items.copy()
    it["item_id"] = item_ids[it["item"].to_numpy(int)]
    effects = [c for c in it.columns if c.startswith("effect_")]
    agg = it.groupby("item_id").agg(dif_range=("dif_range", "mean"), **{c: (c, "mean") for c in effects})
    for half, part in it.groupby("audit_half"):
        part = part.set_index("item_id")
        agg[f"anchor_{half}"] = part["anchor"].astype(bool)
        agg[f"weight_{half}"] = part["weight"]
        agg[f"cell_{half}"] = part["cell"]
    return agg.reset_index()


def _flags(result: AuditResult, models: pd.DataFrame, item_keys: np.ndarray) -> pd.DataFrame:
    ids = dict(zip(models["name"], models["id"]))
    contrib = result.contributions
    rows = []
    for p in result.pairs.itertuples(index=False):
        if p.tied:
            continue
        top = contrib[(contrib["fold"] == p.fold) & (contrib["model_a"] == p.model_a) & (contrib["model_b"] == p.model_b)]
        payload = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in p._asdict().items()}
        payload["top_items"] = [
            {"item": str(item_keys[int(r.item)]), "weight": float(r.weight), "y_a": int(r.y_a), "y_b": int(r.y_b),
             "contribution": float(r.contribution)} for r in top.itertuples(index=False)]
        rows.append({"kind": "reversal", "model_id": ids[p.model_a], "model_b_id": ids[p.model_b],
                     "score": 1.0 if p.reversed else 0.0, "payload": payload})
    return pd.DataFrame(rows, columns=["kind", "model_id", "model_b_id", "score", "payload"])


def report_markdown(result: AuditResult, benchmark: str, run_id: int, item_keys: np.ndarray, missing: int) -> str:
    lines = [result.to_markdown().replace("# Family-DIF near-tie audit",
                                          f"# Family-DIF near-tie audit: {benchmark} (run #{run_id})", 1), ""]
    lines += ["## Missing cells", "",
              f"{missing} missing cells were passed to the audit as a mask: item rates, Newton sums and held-out "
              "losses use observed cells only; the spectral working matrix holds 0 (the item mean) where a cell is "
              "missing; full and anchor scores are weighted means over each model's observed items, and the item "
              "contributions use the same per-model denominators (docs/NEARTIE.md).", ""]
    rev = result.pairs[result.pairs["reversed"] & ~result.pairs["tied"]]
    lines += [f"## Reversed near-tie pairs ({len(rev)})", ""]
    for p in rev.head(50).itertuples(index=False):
        lines.append(f"- fold {p.fold}: **{p.model_a}** ({p.family_a}, {p.owner_a}) full {p.full_a:.4f} / anchor "
                     f"{p.anchor_a:.4f} vs **{p.model_b}** ({p.family_b}, {p.owner_b}) full {p.full_b:.4f} / anchor "
                     f"{p.anchor_b:.4f}")
        c = result.contributions
        top = c[(c["fold"] == p.fold) & (c["model_a"] == p.model_a) & (c["model_b"] == p.model_b)].head(5)
        if len(top):
            lines.append("  - items driving it: " + ", ".join(
                f"{item_keys[int(r.item)]} ({r.contribution:+.4f})" for r in top.itertuples(index=False)))
    return "\n".join(lines) + "\n"


def run_neartie(db_path, benchmark: str, config: AuditConfig = AuditConfig(), *, report: str | Path | None = None,
                progress: Progress = no_progress, cancel: threading.Event | None = None, **_) -> int:
    """The primary audit (plus any secondary analyses the config asks for); returns the run id."""
    conn = connect(db_path)
    try:
        t0 = time.perf_counter()
        sm = read.load_static(conn, benchmark)
        if not sm.correct.size:
            raise EngineError(f"benchmark {benchmark!r} has no static results to audit")
        families = _labels(sm.models["family"])
        owners = [o if isinstance(o, str) and o else infer_owner(n) for o, n in zip(sm.models["owner"], sm.models["name"])]
        groups = [g if g else "all" for g in sm.items["group"]]
        ctx = RunContext(db_path, "neartie", benchmark, config, config.family_seed)
        ctx.start(conn, fingerprint(sm.correct, np.array(families, dtype=object).astype(str)))
        with ctx.guard(conn):
            res = run_audit(sm.correct.astype(float), sm.models["name"].tolist(), families, owners, groups, config,
                            mask=sm.mask, progress=progress, cancel=cancel)
            ctx.lap("audit_s", t0)
            keys = sm.items["key"].to_numpy()
            items = _item_frame(res, sm.items["id"].to_numpy())
            pop = res.population.merge(sm.models[["name", "id"]], left_on="model_id", right_on="name")
            models = pd.DataFrame({"model_id": pop["id"], "theta": pop["full_score"], "anchor_score": pop["anchor_score"],
                                   "half": pop["half"], "kept": pop["kept"], "why": pop["why"],
                                   "representative": pop["representative"], "family": pop["family"]})
            missing = int((~sm.mask).sum())
            text = report_markdown(res, benchmark, ctx.run_id, keys, missing)
            artifacts = {"population": res.population, "dimension_curves": res.dimension_curves,
                         "purification": res.purification, "folds": res.folds, "pairs": res.pairs,
                         "contributions": res.contributions.assign(item_key=keys[res.contributions["item"].astype(int)])
                         if len(res.contributions) else res.contributions,
                         "controls": res.controls, "report": text}
            for name, table in res.secondary.items():
                artifacts[f"secondary_{name}"] = table
            metrics = {**res.summary, "table1": res.table1_row(), "missing_cells": missing}
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=metrics, timings={**ctx.timings, "total_s": round(time.perf_counter() - t0, 4)},
                models=models, items=items, artifacts=artifacts, flags=_flags(res, sm.models, keys)))
            if report:
                Path(report).write_text(text, encoding="utf-8")
            return ctx.run_id
    finally:
        conn.close()


def demo_config(config: AuditConfig = AuditConfig()) -> AuditConfig:
    """The demo workspace has ~8 models per family: the paper's minimum family size (20) is lowered to 6."""
    return replace(config, min_family_models=6)


register(Analysis("neartie", "Family-DIF near-tie audit (paper 002)", "audit", AuditConfig, "static",
                  lambda db, bench, config=None, **kw: run_neartie(db, bench, config or AuditConfig(), **kw)))
