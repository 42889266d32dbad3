"""Near-tie family-DIF audit runs (paper 002): the benchmark's static results, families and owners from the
store, the engine's audit, and a stored run with every table the curator needs; each near-tie pair becomes
a ``reversal`` flag (reversed pairs first) carrying the items that drove it and its per-pair robustness.

Families (``AuditConfig.family_from``): ``name`` (default) applies the paper's name rules (C.1) to the model
id, whatever the importer stored; ``column`` uses the stored family labels (from the file or a models file);
``arch`` maps the stored leaderboard architecture (model metadata ``arch``).  Item groups are the stored
groups; when no item has one and the ids look like ``<subject>.<index>`` (metabench MMLU), the subject is the
group.  The report says which sources were used.  The owner is the stored owner, else the part of the id
before "/" or "__".  Missing cells are passed to the engine as a mask (docs/NEARTIE.md).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchloupe.columns import Columns
from benchloupe.engine import dense
from benchloupe.engine.common import EngineError, Progress, no_progress
from benchloupe.engine.families import family_from_architecture, infer_family, infer_owner
from benchloupe.engine.neartie import HALVES, AuditConfig, AuditResult, run_audit
from benchloupe.engine.neartie.report import verdict_line
from benchloupe.hints import Alt, Opt, say
from benchloupe.store import read, runs
from benchloupe.store.db import connect
from benchloupe.textsafe import markdown as md
from benchloupe.textsafe import markdown_code

from .base import Analysis, RunContext, fingerprint, register

if TYPE_CHECKING:
    import pandas as pd

FAMILY_SOURCES = {"name": "the paper's model-name rules (C.1)", "column": "the stored family labels",
                  "arch": "the leaderboard architecture (model metadata 'arch')"}
_SUBJECT_ID = re.compile(r"^(?P<subject>.+)\.(?P<index>\d+)$")


def _labels(series) -> list[str | None]:
    return [v if isinstance(v, str) and v.strip() else None for v in series]


def resolve_families(conn, models: Columns | pd.DataFrame, source: str) -> list[str | None]:
    """One family (or None) per model from the chosen source (see the module docstring)."""
    if source == "name":
        return [infer_family(str(n)) for n in models["name"]]
    if source == "column":
        return _labels(models["family"])
    if source == "arch":
        meta = dict(conn.execute(
            f"SELECT id, metadata FROM models WHERE id IN ({','.join('?' * len(models))})",
            [int(i) for i in models["id"]]).fetchall())
        arch = [json.loads(meta.get(int(i)) or "{}").get("arch") for i in models["id"]]
        if not any(arch):
            raise EngineError(say(Opt("family_from", "arch"), ": no model of this benchmark has a stored architecture "
                                  "(import it with ", Opt("models_file", "LEADERBOARD.csv"), " holding an 'arch' column)"))
        return [family_from_architecture(a) for a in arch]
    raise EngineError(f"family source must be one of {', '.join(FAMILY_SOURCES)}, not {source!r}")


def resolve_groups(items: Columns | pd.DataFrame) -> tuple[list[str], str]:
    """Item groups and where they came from: stored, from ``<subject>.<index>`` ids, or one group."""
    stored = _labels(items["group"])
    if any(stored):
        return [g or "(none)" for g in stored], "stored item groups"
    found = [_SUBJECT_ID.match(str(k)) for k in items["key"]]
    if found and all(found) and len({m["subject"] for m in found}) > 1:
        return [m["subject"] for m in found], "subjects from '<subject>.<index>' item ids"
    return ["all"] * len(items), "one group (no stored groups)"


def _item_frame(result: AuditResult, item_ids: np.ndarray) -> Columns:
    """One row per item: DIF range and family effects averaged over the two audit halves, per-half
    cell/anchor/weight (they go to the stored item row's extra)."""
    it = result.tables["items"]
    n = len(item_ids)
    item = np.asarray(it["item"], dtype=int)
    halves = [h for h in HALVES if (it["audit_half"] == h).any()]
    rows = {h: np.flatnonzero(it["audit_half"] == h) for h in halves}
    out: dict = {"item_id": np.asarray(item_ids)}
    for c in ["dif_range", *(c for c in it.columns if c.startswith("effect_"))]:
        per_half = np.full((len(halves), n), np.nan)
        for k, h in enumerate(halves):
            per_half[k, item[rows[h]]] = it[c][rows[h]]
        seen = np.isfinite(per_half)
        total = np.where(seen, per_half, 0.0).sum(axis=0)
        out[c] = np.where(seen.any(axis=0), total / np.maximum(seen.sum(axis=0), 1), np.nan)
    for h in halves:
        for c in ("anchor", "weight", "cell"):
            values = it[c][rows[h]]
            col = np.zeros(n, dtype=values.dtype)
            col[item[rows[h]]] = values
            out[f"{c}_{h}"] = col
    return Columns(out)


def _top_items(result: AuditResult, item_keys: np.ndarray) -> dict[tuple, list[dict]]:
    """(fold, model_a, model_b) -> the stored top items, built in one pass over the contributions table."""
    c = result.tables["contributions"]
    if not len(c):
        return {}
    keys = list(zip(np.asarray(c["fold"], dtype=int).tolist(), c["model_a"].tolist(), c["model_b"].tolist(),
                    strict=True))
    recs = [{"item": str(item_keys[i]), "weight": w, "y_a": a, "y_b": b, "contribution": v}
            for i, w, a, b, v in zip(np.asarray(c["item"], dtype=int).tolist(),
                                     np.asarray(c["weight"], dtype=float).tolist(),
                                     np.asarray(c["y_a"], dtype=int).tolist(), np.asarray(c["y_b"], dtype=int).tolist(),
                                     np.asarray(c["contribution"], dtype=float).tolist(), strict=True)]
    out: dict[tuple, list[dict]] = {}
    for key, rec in zip(keys, recs, strict=True):
        out.setdefault(key, []).append(rec)
    return out


def _flags(result: AuditResult, models: Columns, item_keys: np.ndarray, top: dict | None = None) -> Columns:
    """One ``reversal`` flag per non-tied near-tie pair; the payload holds the pair row (with
    ``random_reversal_fraction`` / ``random_tie_fraction``, the per-pair robustness) and its top items."""
    ids = dict(zip(models["name"].tolist(), models["id"].tolist(), strict=True))
    p = result.tables["pairs"]
    p = p.take(~np.asarray(p["tied"], dtype=bool))
    p = p.take(np.argsort(~np.asarray(p["reversed"], dtype=bool), kind="stable"))
    top = _top_items(result, item_keys) if top is None else top
    cols = p.columns
    payloads = [dict(zip(cols, row, strict=True)) for row in p.rows()]
    for pl in payloads:
        pl["top_items"] = top.get((pl["fold"], pl["model_a"], pl["model_b"]), [])
    return Columns({"kind": "reversal", "model_id": [ids[a] for a in p["model_a"].tolist()],
                    "model_b_id": [ids[b] for b in p["model_b"].tolist()],
                    "score": np.asarray(p["reversed"], dtype=float), "payload": payloads},
                   columns=["kind", "model_id", "model_b_id", "score", "payload"])


LISTED_PAIRS = 1000  # reversed pairs listed in the report; beyond it the report says how many more and how to get them


def reversed_pairs_lines(result: AuditResult, benchmark: str, run_id: int, item_keys: np.ndarray,
                         top: dict | None = None, listed: int = LISTED_PAIRS) -> list[str]:
    """Every reversed near-tie pair, most robust first (the share of matched-random recompositions in which it also
    reverses, then the fold, then the names), each with its fold named and the items that drove it; past
    ``listed`` (:data:`LISTED_PAIRS`) the report says how many more there are and how to export them all (issue 35: the list
    stopped at 50, alphabetically, with no word that it stopped)."""
    pairs = result.tables["pairs"]
    rev = pairs.take(np.asarray(pairs["reversed"], dtype=bool) & ~np.asarray(pairs["tied"], dtype=bool))
    order = np.lexsort((np.asarray(rev["model_b"], dtype=str), np.asarray(rev["model_a"], dtype=str),
                        np.asarray(rev["fold"], dtype=int), -np.asarray(rev["random_reversal_fraction"], dtype=float)))
    rev = rev.take(order)
    top = _top_items(result, item_keys) if top is None else top
    quoted = shlex.quote(benchmark)
    export = say(Alt(f"`benchloupe export run-artifact --run {run_id} --name pairs --format csv -o pairs.csv` (every "
                     f"near-tie pair, reversed or not, at full precision) or "
                     f"{markdown_code(f'benchloupe flags {quoted} --kind reversal --run {run_id}')} (the reversal "
                     "flags to triage)",
                     f"the Reversals screen (every near-tie pair of run #{run_id}, to triage)"))
    lines = [f"## Reversed near-tie pairs ({len(rev)})", ""]
    if not len(rev):
        return lines + ["No near-tie pair reverses under the low-DIF anchor.", ""]
    shown = min(len(rev), listed)
    lines += [("All " + str(len(rev)) if shown == len(rev) else f"The {shown} most robust of {len(rev)}") +
              " reversed pairs, most robust first. Robustness: the share of the matched-random recompositions (random "
              "anchors of the same blueprint and size) in which the pair also reverses; near 100%, the pair's order "
              "flips under almost any recomposition (the full-score order is fragile whatever the anchor); near 0%, "
              "only the low-DIF anchor reverses it. Fold: which owner half the anchor was chosen on and which half "
              "it scored (the target). Scores: full / low-DIF anchor.", "",
              "| # | Robustness | Fold | Model A (family, owner) | Scores A | Model B (family, owner) | Scores B | "
              "Items driving it |", "|---|---|---|---|---|---|---|---|"]
    for n, p in enumerate(rev.take(np.arange(shown)).records(), 1):
        items = top.get((p["fold"], p["model_a"], p["model_b"]), [])[:3]
        lines.append(
            f"| {n} | {100 * p['random_reversal_fraction']:.1f}% | {p['fold']}: {md(HALVES[p['fold']])} -> "
            f"{md(p['target_half'])} | **{md(p['model_a'])}** ({md(p['family_a'])}, {md(p['owner_a'])}) | "
            f"{p['full_a']:.4f} / {p['anchor_a']:.4f} | **{md(p['model_b'])}** ({md(p['family_b'])}, "
            f"{md(p['owner_b'])}) | {p['full_b']:.4f} / {p['anchor_b']:.4f} | "
            + ", ".join(f"{md(r['item'])} ({r['contribution']:+.4f})" for r in items) + " |")
    lines.append("")
    if shown < len(rev):
        lines.append(f"{len(rev) - shown} more reversed pairs, each less robust than those listed, are not shown here. "
                     f"All of them: {export}.")
    else:
        lines.append(f"The same pairs as data: {export}.")
    return lines + [""]


def report_markdown(result: AuditResult, benchmark: str, run_id: int, item_keys: np.ndarray, missing: int,
                    sources: dict[str, str], top: dict | None = None) -> str:
    lines = [result.to_markdown(benchmark).replace("# Family-DIF near-tie audit",
                                                   f"# Family-DIF near-tie audit: {md(benchmark)} (run #{run_id})", 1), ""]
    lines += ["## Inputs", "", f"- Families from {sources['families']}.", f"- Item groups: {sources['groups']}.",
              f"- Missing cells: {missing}" + (
                  " (passed to the audit as a mask: item rates, Newton sums and held-out losses use observed cells "
                  "only; scores are weighted means over each model's observed items; docs/NEARTIE.md)." if missing
                  else "."), ""]
    lines += reversed_pairs_lines(result, benchmark, run_id, item_keys, top)
    return "\n".join(lines) + "\n"


STDOUT = "-"  # ``--report -``: the report goes to standard output (the caller writes it; jobs never print)


def check_report_path(report: str | Path | None) -> Path | str | None:
    """The report destination, checked before any work: its folder must exist and it must not be a folder;
    ``"-"`` (:data:`STDOUT`) is standard output, returned as is for the caller to write."""
    if report is None:
        return None
    if str(report) == STDOUT:
        return STDOUT
    path = Path(report)
    if path.is_dir():
        raise EngineError(say(Opt("report"), f" {path}: is a folder; give a file name, e.g. {path / 'neartie.md'}"))
    if not path.parent.is_dir():
        raise EngineError(say(Opt("report"), f" {path}: folder {path.parent} does not exist; create it or choose another path"))
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise EngineError(say(Opt("report"), f" {path}: not writable; choose a file in a folder you can write to"))
    return path


def _compare_population(conn, other: str | None) -> pd.DataFrame | None:
    """The stored population of ``other``'s latest finished near-tie run (for the exact-common check)."""
    if other is None:
        return None
    rid = runs.latest_run(conn, read.benchmark_id(conn, other), ("neartie",))
    if rid is None:
        raise EngineError(say(Opt("compare"), f" {other}: that benchmark has no finished near-tie run; run ",
                              Alt(f"`benchloupe audit neartie {other}`", f"neartie on {other}"), " first"))
    return runs.load_artifact(conn, rid, "population")


def exact_common_section(table: pd.DataFrame, left: str, right: str) -> list[str]:
    left, right = md(left), md(right)
    lines = [f"## Table 10 (exact-common models): {left} / {right}", "",
             "| Exact-common pair | Family | n | Left shift | Right shift | Right-left | [95% CI] |",
             "|---|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        lines.append(f"| {left} / {right} | {md(r.family)} | {r.n} | {r.left_pp:+.2f} | {r.right_pp:+.2f} | "
                     f"{r.diff_pp:+.2f} | [{r.ci_lo:+.2f}, {r.ci_hi:+.2f}] |")
    return lines + ["", "Shifts in percentage points on exactly the models scored in both benchmarks; 2,000 "
                    "owner-bootstrap replicates (paper 002 B.7).", ""]


def run_neartie(db_path, benchmark: str, config: AuditConfig = AuditConfig(), *, report: str | Path | None = None,
                compare: str | None = None, progress: Progress = no_progress,
                cancel: threading.Event | None = None, device: str = "auto", **_) -> int:
    """The audit (plus the protocol parts the config asks for); returns the run id.

    ``device`` (auto | cpu | cuda, as on the fits) runs control scoring, the DIF Newton passes and the spectral
    products on numpy or torch (:mod:`benchloupe.engine.dense`); the run's metrics record it under ``compute``.

    The report is always stored with the run (artifact ``report``); a file is written only when ``report``
    names one, and that path is checked before the run is created (``"-"``: the caller prints the stored report).  ``compare`` names a benchmark whose
    latest near-tie run supplies the left side of the exact-common-model check (B.7, Table 10).
    """
    t0 = time.perf_counter()
    report_path = check_report_path(report)
    conn = connect(db_path)
    try:
        other = _compare_population(conn, compare)
        sm = read.load_static_columns(conn, benchmark)
        if not sm.correct.size:
            raise EngineError(f"benchmark {benchmark!r} has no static results to audit")
        backend = dense.resolve(device, int(sm.correct.size))  # a missing GPU is refused before the run exists
        families = resolve_families(conn, sm.models, config.family_from)
        owners = [o if isinstance(o, str) and o else infer_owner(n) for o, n in zip(sm.models["owner"], sm.models["name"])]
        groups, group_source = resolve_groups(sm.items)
        sources = {"families": f"{FAMILY_SOURCES[config.family_from]} (family source {config.family_from})",
                   "groups": f"{group_source}, {len(set(groups))} groups"}
        ctx = RunContext(db_path, "neartie", benchmark, config, config.family_seed)
        ctx.start(conn, fingerprint(sm.correct, np.array(families, dtype=object).astype(str)))
        with ctx.guard(conn):
            t_audit = time.perf_counter()
            res = run_audit(sm.correct, sm.models["name"].tolist(), families, owners, groups, config,
                            mask=sm.mask, progress=progress, cancel=cancel, device=backend)
            t_tables = ctx.lap("audit_s", t_audit)
            keys = sm.items["key"]
            items = _item_frame(res, sm.items["id"])
            pop = res.tables["population"]  # one row per model, in the order of sm.models
            models = Columns({"model_id": sm.models["id"], "theta": pop["full_score"],
                              "anchor_score": pop["anchor_score"], "half": pop["half"], "kept": pop["kept"],
                              "why": pop["why"], "representative": pop["representative"], "family": pop["family"]})
            missing = int((~sm.mask).sum())
            top = _top_items(res, keys)
            text = report_markdown(res, benchmark, ctx.run_id, keys, missing, sources, top)
            common = None
            if other is not None:
                from benchloupe.engine.neartie.shifts import exact_common_shifts

                common = exact_common_shifts(other, res.population)
                text += "\n" + "\n".join(exact_common_section(common, compare, benchmark))
            contributions = res.tables["contributions"]
            contributions = contributions.assign(item_key=keys[np.asarray(contributions["item"], dtype=int)])
            artifacts = {**{name: res.tables[name] for name in ("population", "dimension_curves", "purification",
                                                                "folds", "pairs", "controls", "split_edges")},
                         "contributions": contributions, "report": text}
            if "split_seeds" in res.tables:
                artifacts["split_seeds"] = res.tables["split_seeds"]
            if common is not None:
                artifacts["protocol_table10_exact_common"] = common.assign(left=compare, right=benchmark)
            for name, table in {**res.secondary, **res.protocol}.items():
                artifacts[f"secondary_{name}" if name in res.secondary else f"protocol_{name}"] = table
            flags = _flags(res, sm.models, keys, top)
            ctx.lap("tables_s", t_tables)
            stability = res.summary.get("split_stability")
            metrics = {**({"split_verdict": verdict_line(stability)} if stability else {}), **res.summary,
                       "table1": res.table1_row(), "missing_cells": missing, "sources": sources,
                       "compute": {**dense.provenance(backend), "power_iterations": res.power_iterations}}
            if res.protocol:
                from benchloupe.engine.neartie.protocol import protocol_summary

                metrics["protocol"] = protocol_summary(res.protocol)
            t_store = time.perf_counter()
            timings = {**ctx.timings, "total_s": round(time.perf_counter() - t0, 4)}
            runs.save_outputs(conn, ctx.run_id, runs.RunOutputs(
                metrics=metrics, timings=timings, models=models, items=items, artifacts=artifacts, flags=flags))
            # the whole job, store write included, as the last word on the run's timings
            timings.update(store_s=round(time.perf_counter() - t_store, 4), total_s=round(time.perf_counter() - t0, 4))
            runs.set_timings(conn, ctx.run_id, timings)
            if isinstance(report_path, Path):
                report_path.write_text(text, encoding="utf-8")
            return ctx.run_id
    finally:
        conn.close()


ROBUSTNESS_ARTIFACT = "protocol_table9_population_robustness"


def latest_full_protocol_run(conn, benchmark: str) -> int:
    """The newest finished near-tie run of ``benchmark`` that ran ``--protocol full`` (it holds Table 9)."""
    rows = conn.execute("SELECT id, config FROM runs WHERE benchmark_id = ? AND kind = 'neartie' AND status = 'done' "
                        "ORDER BY id DESC", (read.benchmark_id(conn, benchmark),)).fetchall()
    for rid, config in rows:
        if json.loads(config or "{}").get("protocol") == "full" and ROBUSTNESS_ARTIFACT in runs.artifact_names(conn, rid):
            return int(rid)
    raise EngineError(say(f"benchmark {benchmark!r} has no finished full-protocol near-tie run ({len(rows)} "
                          "primary-only); ", Alt(f"run `benchloupe audit neartie {benchmark} --protocol full` first",
                                                 "run the near-tie audit with protocol full first")))


def robustness_across(db_path, benchmarks: list[str], *, need: int = 3, alpha: float = 0.05,
                      report: str | Path | None = None) -> dict:
    """Paper 002 D.2's pass rule (eqs. 59-61) across benchmarks, read from each one's latest ``--protocol full``
    near-tie run: Table 9 with one column per benchmark, G_dir, G_sig and pass/fail per specification.

    Read-only (no run is stored); ``report`` also writes the Markdown section to that file (``"-"``: the caller
    writes ``markdown`` to standard output).  Returns
    ``{"runs": {benchmark: run_id}, "table": DataFrame, "markdown": str, "need": ..., "alpha": ...}``.
    """
    from benchloupe.engine.neartie.perturb import cross_benchmark_table
    from benchloupe.engine.neartie.report import cross_benchmark_markdown

    if not benchmarks:
        raise EngineError(say("name at least one benchmark, e.g. ",
                              Alt("`benchloupe audit robustness arc gsm8k truthfulqa`", "arc, gsm8k and truthfulqa")))
    dup = sorted({b for b in benchmarks if benchmarks.count(b) > 1})
    if dup:
        raise EngineError(f"benchmark {dup[0]!r} is named twice: name each benchmark once")
    if need < 1:
        raise EngineError(say(Opt("need"), f" must be at least 1, not {need}"))
    if not 0 < alpha < 1:
        raise EngineError(say(Opt("significance"), f" must be in (0, 1), not {alpha}"))
    report_path = check_report_path(report)
    conn = connect(db_path)
    try:
        run_ids = {b: latest_full_protocol_run(conn, b) for b in benchmarks}
        tables = {b: runs.load_artifact(conn, rid, ROBUSTNESS_ARTIFACT) for b, rid in run_ids.items()}
    finally:
        conn.close()
    table = cross_benchmark_table(tables, alpha, need)
    text = cross_benchmark_markdown(table, run_ids, alpha, need)
    if isinstance(report_path, Path):
        report_path.write_text(text, encoding="utf-8")
    return {"runs": run_ids, "table": table, "markdown": text, "need": need, "alpha": alpha}


register(Analysis("neartie", "Family-DIF near-tie audit (paper 002)", "audit", AuditConfig, "static",
                  lambda db, bench, config=None, **kw: run_neartie(db, bench, config or AuditConfig(), **kw)))
