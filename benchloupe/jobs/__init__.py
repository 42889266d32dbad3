"""The one bridge between the store, the engine and the prompts: one run = load -> compute -> save.

The CLI and the TUI both call these functions, so a fit started from either is the same fit. Every function
takes a database *path* and opens its own connection in the calling thread (sqlite3 connections cannot
cross threads), and long work takes ``progress`` and ``cancel`` like the engine does.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchloupe.engine.common import EngineError
from benchloupe.engine.families import infer_family, infer_owner
from benchloupe.engine.simulate import Workspace, demo_workspace
from benchloupe.hints import Alt, say
from benchloupe.store import read, runs
from benchloupe.store.db import StoreError, connect, transaction

# What every run shares lives in jobs/base.py, which the area modules import (they never import this package
# back: issue 27); the names stay reachable here, where the CLI and the TUI look for them.
from .base import (  # noqa: F401 - re-exported
    _REGISTRY,
    Analysis,
    RunContext,
    Terminated,
    cancellable_by_signals,
    code_version,
    fingerprint,
    register,
    stop_reason,
)

if TYPE_CHECKING:  # the import modules load pandas: imported where a file is parsed or written
    import threading

    from benchloupe.store.importers.base import ParsedImport
    from benchloupe.store.writer import ImportSummary

# The errors a face catches from a run (EngineError and StoreError are taken from here too: the faces import no engine).
JobError = (EngineError, StoreError, ValueError)  # ValueError covers store.importers.base.ImportFormatError


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fill_families(parsed: ParsedImport) -> ParsedImport:
    """Family and owner from model names (paper 002 C.1 rules) where the file gave none."""
    m = parsed.models
    if not len(m):
        return parsed
    names = [str(n) for n in m["name"].tolist()]

    def given(column: str) -> list:
        if column not in m.columns:
            return [None] * len(names)
        return [v if v is not None and v == v and str(v) != "" else None for v in m[column].tolist()]

    # plain lists, not pandas column operations: one small file costs microseconds here, not milliseconds
    # (a folder of 5,000 one-row files, issue 24)
    family = [f if f is not None else infer_family(n) for f, n in zip(given("family"), names)]
    owner = [o if o is not None else infer_owner(n) for o, n in zip(given("owner"), names)]
    m = m.copy()
    m["family"] = family
    m["owner"] = owner
    parsed.models = m
    return parsed


def parse_file(path: str | Path, fmt: str | None = None, **options) -> tuple[str, ParsedImport]:
    """Parse (and validate) a file without touching any database; families from names or architectures."""
    from benchloupe.engine.families import family_from_architecture
    from benchloupe.store.importers import detect
    from benchloupe.store.importers.base import ImportFormatError

    fmt = detect.detect_format(path) if fmt in (None, "auto") else detect.ALIASES.get(fmt, fmt)
    if fmt not in detect.FORMATS:
        names = sorted(detect.FORMATS) + sorted(detect.ALIASES)
        raise ImportFormatError(path, "", f"unknown import format {fmt!r}", f"use one of {', '.join(names)}")
    options = {k: v for k, v in options.items() if v is not None}
    options.setdefault("arch_to_family", family_from_architecture)
    parsed = detect.parse_file(path, fmt, **options)
    return fmt, fill_families(parsed)


def import_file(db_path: str | Path, path: str | Path, fmt: str | None = None, *, replace: bool = False,
                **options) -> ImportSummary:
    """Parse, validate, then write in one transaction. A bad file leaves the database untouched (it is not
    even opened before the file has parsed)."""
    from benchloupe.store.importers.readers import read_sha256
    from benchloupe.store.writer import write_import

    fmt, parsed = parse_file(path, fmt, **options)
    sha = read_sha256(path) or file_sha256(path)  # the bytes parsed, even if the file grew since (issue 10)
    if parsed.run:  # a harness run: counted against the runs already stored, as a batch import does (issue 37)
        from benchloupe.jobs.reruns import resolve_reruns, stored_runs

        entry = [(str(path), fmt, parsed, sha)]
        stored = stored_runs(db_path, entry) if Path(db_path).exists() and not replace else {}
        ((_, _, parsed, sha),) = resolve_reruns(entry, stored)
    conn = connect(db_path)
    try:
        return write_import(conn, parsed, fmt=fmt, sha256=sha, replace=replace)
    finally:
        conn.close()


# --------------------------------------------------------------------------------------------- demo

def _parsed_from_sim(ws: Workspace, bench) -> ParsedImport:
    import pandas as pd

    from benchloupe.store.importers.base import ParsedImport

    items = pd.DataFrame({
        "key": bench.item_keys, "text": bench.item_text, "answer": bench.item_answer, "group": bench.item_group,
        "kind": bench.kind, "chance": bench.item_chance,
    })
    if bench.item_dates is not None:
        items["metadata"] = [{"date": d} for d in bench.item_dates]
    rows = bench.model_rows if bench.model_rows is not None else list(range(len(ws.model_names)))
    models = pd.DataFrame({"name": [ws.model_names[r] for r in rows],
                           "family": [None if ws.families[r] == "unknown" else ws.families[r] for r in rows],
                           "owner": [ws.owners[r] for r in rows]})
    if ws.cutoffs is not None:
        models["metadata"] = [{"cutoff": ws.cutoffs[r]} for r in rows]
    if bench.kind == "static":
        return ParsedImport(bench.name, "static", items, models, correct=bench.correct, source="demo simulation")
    mi, ii = np.nonzero(np.isfinite(bench.rewards))
    rewards = pd.DataFrame({"model": np.array(models["name"], dtype=object)[mi],
                            "item": np.array(bench.item_keys, dtype=object)[ii],
                            "reward": bench.rewards[mi, ii], "reward_model": "demo-rm"})
    return ParsedImport(bench.name, "arena", items, models, rewards=rewards, source="demo simulation")


def build_demo(db_path: str | Path, *, seed: int = 20261129, force: bool = False, analyses: bool = False,
               progress=None, cancel: threading.Event | None = None) -> dict:
    """Write the demo workspace (engine.simulate.demo_workspace) and its ground truth into *db_path*.

    With ``analyses`` the showcase runs follow (calibrations, anomalies, coverage, the near-tie audit), so every
    screen has something to show on first open.
    """
    from benchloupe.engine.common import Stages, no_progress
    from benchloupe.store.writer import write_import

    stages = Stages(progress or no_progress, {"data": 0.08 if analyses else 1.0, "analyses": 0.92 if analyses else 0})
    to_data = stages.part("data")
    to_data(0, 1, "simulating the demo workspace")  # the first line comes within the first second (issue 32)
    ws = demo_workspace(seed)
    conn = connect(db_path)
    try:
        have = {r[0] for r in conn.execute("SELECT name FROM benchmarks")}
        names = [b.name for b in ws.benchmarks]
        if have & set(names) and not force:
            return {"db": str(db_path), "created": False, "benchmarks": sorted(have & set(names)),
                    "message": say("demo workspace already present", Alt(" (use --force to rebuild it)", ""))}
        if force:
            with transaction(conn):
                conn.executemany("DELETE FROM benchmarks WHERE name = ?", [(n,) for n in names])
        for k, bench in enumerate(ws.benchmarks):
            to_data(k + 1, len(ws.benchmarks) + 2, f"writing {bench.name}")
            write_import(conn, _parsed_from_sim(ws, bench), fmt="demo", sha256=f"seed:{seed}")
            bid = read.benchmark_id(conn, bench.name)
            in_bench = bench.model_rows if bench.model_rows is not None else range(len(ws.model_names))
            rows = [(bid, "model", ws.model_names[r], "theta", float(ws.theta[r])) for r in in_bench]
            rows += [(bid, "item", k, "a", float(a)) for k, a in zip(bench.item_keys, bench.a)]
            rows += [(bid, "item", k, "b", float(b)) for k, b in zip(bench.item_keys, bench.b)]
            rows += [(bid, "cell", f"{ws.model_names[m]}\t{bench.item_keys[j]}", "contaminated", 1.0)
                     for m, j in bench.contaminated]
            rows.append((bid, "model", ws.model_names[ws.adversarial], "adversarial", 1.0))
            if bench.gap is not None:
                rows += [(bid, "benchmark", "gap", "lo", bench.gap[0]), (bid, "benchmark", "gap", "hi", bench.gap[1])]
            with transaction(conn):
                conn.executemany("INSERT OR REPLACE INTO truth (benchmark_id, entity, key, name, value)"
                                 " VALUES (?, ?, ?, ?, ?)", rows)
        info_eps = _demo_endpoints(conn, ws)
    finally:
        conn.close()
    info = {"db": str(db_path), "created": True, "benchmarks": names, "models": len(ws.model_names), "seed": seed,
            "endpoints": info_eps}
    if analyses:
        info.update(finish_demo(db_path, seed=seed, progress=stages.part("analyses"), cancel=cancel, ws=ws))
        info["models"] += "late_model" in info
    return info


def finish_demo(db_path, *, seed: int = 20261129, progress=None, cancel: threading.Event | None = None,
                ws: Workspace | None = None) -> dict:
    """The demo's showcase runs (:func:`run_demo_analyses`), then its late model, imported after them so that the
    clean fit of demo-math has not seen it (``benchloupe screen`` checks it).  ``build_demo(analyses=True)`` ends
    with it; ``benchloupe demo --open`` runs it as the workbench's first job, after the first screen (issue 32
    point 16).  Returns ``runs`` (their ids), ``late_model`` and a ``message`` for the job line."""
    out: dict = {"runs": run_demo_analyses(db_path, progress, cancel)}
    ws = ws if ws is not None else demo_workspace(seed)
    if ws.late is not None:  # arrives after the clean fit of demo-math: `benchloupe screen` checks it
        out["late_model"] = _import_late_model(db_path, ws)
    out["message"] = (f"{len(out['runs'])} showcase runs done"
                      + (f", then the late model {out['late_model']} imported" if "late_model" in out else ""))
    return out


def run_demo_showcase(progress, cancel: threading.Event, db_path: str, seed: int) -> dict:
    """:func:`finish_demo` as a job of the workbench (``jobs.process.JobSpec``: ``fn(progress, cancel, *args)``):
    ``benchloupe demo --open`` writes the data, opens the workbench and lets it run this first (issue 32
    point 16: the first screen no longer waits for the showcase runs)."""
    return finish_demo(db_path, seed=seed, progress=progress, cancel=cancel)


def demo_unfinished(db_path) -> bool:
    """True when the demo's benchmarks are in *db_path* without what :func:`finish_demo` adds last (the late model
    in demo-math): a workbench closed while the showcase job ran, or a ``--bare`` demo."""
    conn = connect(db_path, create=False)
    try:
        row = conn.execute("SELECT id FROM benchmarks WHERE name = 'demo-math'").fetchone()
        return row is not None and conn.execute(
            "SELECT 1 FROM truth WHERE benchmark_id = ? AND entity = 'model' AND name = 'window'",
            (row[0],)).fetchone() is None
    finally:
        conn.close()


def _import_late_model(db_path, ws: Workspace) -> str:
    """The demo's late model (engine.simulate.LateModel): its demo-math results imported after the showcase runs,
    so the clean static fit of demo-math has not seen them, and its window in the ground truth."""
    import pandas as pd

    from benchloupe.store.importers.base import ParsedImport
    from benchloupe.store.writer import write_import

    late = ws.late
    math = next(b for b in ws.benchmarks if b.name == "demo-math")
    conn = connect(db_path)
    try:
        write_import(conn, ParsedImport(
            "demo-math", "static", pd.DataFrame({"key": math.item_keys}),
            pd.DataFrame({"name": [late.name], "family": [late.family], "owner": [late.owner],
                          "metadata": [{"cutoff": late.cutoff}]}),
            correct=late.correct[None, :], source="demo simulation: a model imported after the clean fit"),
            fmt="demo", sha256=f"late:{late.name}")
        bid = read.benchmark_id(conn, "demo-math")
        rows = [(bid, "model", late.name, "theta", late.theta), (bid, "model", late.name, "window", 1.0)]
        rows += [(bid, "cell", f"{late.name}\t{math.item_keys[j]}", "contaminated", 1.0) for j in late.window_items]
        with transaction(conn):
            conn.executemany("INSERT OR REPLACE INTO truth (benchmark_id, entity, key, name, value)"
                             " VALUES (?, ?, ?, ?, ?)", rows)
    finally:
        conn.close()
    return late.name


DEMO_ANNOTATORS = 12
DEMO_TRIALS = 4


def _demo_endpoints(conn, ws: Workspace) -> str:
    """BenchFill out of the box (issue 11 item 10): unless this database already names its own endpoints, the
    demo's rewriter, judge and annotators are the built-in simulated endpoint (``simulated://demo``,
    prompts/simulated.py), with 12 of the demo's models, spread over the ability range, as annotators."""
    from benchloupe.prompts import simulated
    from benchloupe.store.curation import put_setting

    from .fill import ENDPOINTS_KEY

    have = read.setting(conn, ENDPOINTS_KEY, None)
    if have and (have.get("rewriter") or have.get("judge") or have.get("annotators")):
        return "kept the database's own endpoints"
    shared = ws.benchmarks[1].model_rows or range(len(ws.model_names))  # models in every demo benchmark
    ranked = sorted(shared, key=lambda r: float(ws.theta[r]))
    picks = [ranked[round(k * (len(ranked) - 1) / (DEMO_ANNOTATORS - 1))] for k in range(DEMO_ANNOTATORS)]
    eps = simulated.demo_endpoints([(ws.model_names[r], DEMO_TRIALS) for r in dict.fromkeys(picks)])
    put_setting(conn, ENDPOINTS_KEY, eps)
    return simulated.SIMULATED_URL


def run_demo_analyses(db_path, progress=None, cancel: threading.Event | None = None) -> list[int]:
    """The showcase runs of the demo workspace (each with the paper's defaults unless noted); *cancel* stops
    between and inside them (the app's ``x``)."""
    from benchloupe.engine.joint import JointConfig
    from benchloupe.engine.neartie import AuditConfig

    from .coverage import CoverageConfig
    from .diagnostics import AnomalyConfig

    steps = [
        ("static fit of demo-math", "static", "demo-math", JointConfig(mode="static"), {"heldout": False}),
        ("joint fit of demo-chem + demo-arena", "joint", "demo-chem", JointConfig(), {"arena": "demo-arena",
                                                                                      "heldout": False}),
        ("anomaly candidates in demo-math", "anomalies", "demo-math", AnomalyConfig(), {}),
        # demo-chem is the benchmark the workbench opens first: its Anomalies screen has candidates too
        ("anomaly candidates in demo-chem", "anomalies", "demo-chem", AnomalyConfig(), {}),
        ("coverage of demo-math", "coverage", "demo-math", CoverageConfig(), {}),
        ("coverage of demo-chem", "coverage", "demo-chem", CoverageConfig(), {}),
        # demo-chem holds 25-27 models per family: the paper's settings apply as they are
        ("near-tie audit of demo-chem", "neartie", "demo-chem", AuditConfig(), {}),
    ]
    from benchloupe.engine.common import Stages, no_progress

    ids = []
    stages = Stages(progress or no_progress, {label: 1.0 for label, *_ in steps})
    for label, kind, bench, cfg, kw in steps:
        part = stages.part(label)
        part(0, 1, label)

        def inner(done, total, message, part=part, label=label):  # each analysis's own lines, within its step
            part(done, total, f"{label}: {message}")

        ids.append(_load_analyses()[kind].run(db_path, bench, cfg, cancel=cancel, progress=inner, **kw))
    return ids


# --------------------------------------------------------------------------------------------- runs

def remove_run(db_path, run_id: int) -> None:
    """Delete a run that is not running (an interrupted one, say) with its outputs."""
    conn = connect(db_path)
    try:
        runs.remove_run(conn, run_id)
    finally:
        conn.close()


# --------------------------------------------------------------------------------------------- registry

# The order analyses are listed in (Runs screen, help): by area module, then in each module's own order. Modules
# are imported lazily and in whatever order commands ask for them, so the registry's insertion order is not it.
_AREA_ORDER = ("calibration", "diagnostics", "estimate", "audit", "items", "coverage", "fill")


def _load_analyses() -> dict[str, Analysis]:
    """Import the area modules so they register their analyses (into the registry of jobs/base.py).

    Done on first use of ``ANALYSES``, not at import: ``import`` and ``list`` never load the engine's heavy
    modules (scipy.stats, the openai client) that only analyses use (issue 12, speed of imports).
    """
    from . import audit, calibration, coverage, diagnostics, estimate, fill, items  # noqa: F401

    seq = {name: i for i, name in enumerate(_REGISTRY)}

    def key(name: str) -> tuple[int, int]:
        module = _REGISTRY[name].run.__module__.rsplit(".", 1)[-1]
        return (_AREA_ORDER.index(module) if module in _AREA_ORDER else len(_AREA_ORDER), seq[name])

    return {name: _REGISTRY[name] for name in sorted(_REGISTRY, key=key)}


# Which area module registers each analysis, so that one command loads only its own module (a whole
# ``audit neartie`` process no longer imports the openai client through the fill job: issue 13's figure).
_AREA_MODULE = {"neartie": "audit", "joint": "calibration", "static": "calibration", "arena": "calibration",
                "evaluate": "calibration", "bt": "calibration", "avg-reward": "calibration",
                "coverage": "coverage", "calibrate": "coverage", "compress": "diagnostics",
                "anomalies": "diagnostics", "screen": "diagnostics", "bootstrap": "diagnostics",
                "contamination": "diagnostics", "estimate": "estimate", "items": "items"}


def analysis(name: str) -> Analysis:
    """The registered analysis ``name``, importing only the area module that defines it."""
    if name not in _REGISTRY:
        module = _AREA_MODULE.get(name)
        if module is None:
            return _load_analyses()[name]
        import importlib

        importlib.import_module(f"{__name__}.{module}")
    return _REGISTRY[name]


def __getattr__(name: str):
    if name == "ANALYSES":
        return _load_analyses()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
