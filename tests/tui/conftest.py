"""Fixtures for the TUI tests: the demo workspace plus flags, runs and awkward item text written through
the store's own functions (create_run/save_outputs, write_import), and ``wait_until`` instead of sleeps."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

EVIL = "[bold red]not markup[/] and [/] 🧪🔬 emoji " + "lorem ipsum " * 330
EVIL_ANSWER = "[link=http://x]42[/link] ✅"


async def wait_until(pilot, predicate: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    """Let the app run until *predicate()* holds (workers finished, a screen loaded); fail after *timeout*."""
    waited = 0.0
    while not predicate():
        if waited >= timeout:
            s = pilot.app.screen
            raise AssertionError(f"timed out waiting for {what or predicate}: {type(s).__name__} {getattr(s, 'shown_token', None)} {getattr(s, 'current_token', lambda: None)()} {[(w.name, w.state.name) for w in pilot.app.workers]} {[n.message for n in pilot.app._notifications]} {getattr(pilot.app, 'watcher', None)!r}")
        await pilot.pause(0.02)
        waited += 0.02


def idle(app) -> Callable[[], bool]:
    """No worker of the app or any screen is pending or running."""
    return lambda: not any(w.is_running or w.state.name == "PENDING" for w in app.workers)


def loaded(app, mode: str) -> Callable[[], bool]:
    """The current screen is *mode* and has shown its data for the current benchmark and store version."""
    def check() -> bool:
        s = app.screen
        return (getattr(s, "MODE", None) == mode and s.shown_token == s.current_token() and idle(app)())
    return check


def add_flags(db: Path, benchmark: str = "demo-math", n_anomalies: int = 12, n_reversals: int = 4) -> dict:
    """An anomaly run, a near-tie run and a coverage run with flags, saved like a job saves them."""
    from benchloupe.store import read, runs
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        bid = read.benchmark_id(conn, benchmark)
        items = read.items(conn, benchmark)
        models = read.models(conn, benchmark)
        rid = runs.create_run(conn, "anomalies", bid, config={"threshold": 3.0}, seed=0, code_version="test",
                              input_fingerprint="test")
        rows = []
        for k in range(n_anomalies):
            p = 0.9 - 0.01 * k
            rows.append({"kind": "anomaly", "item_id": int(items["id"].iloc[k * 3]),
                         "model_id": int(models["id"].iloc[k % len(models)]), "score": -4.0 + 0.1 * k,
                         "payload": {"expected_p": p, "observed": 0, "residual": -4.0 + 0.1 * k, "source": "static"}})
        runs.save_outputs(conn, rid, runs.RunOutputs(metrics={"flagged": n_anomalies}, flags=pd.DataFrame(rows)))
        nid = runs.create_run(conn, "neartie", bid, config={}, seed=0, code_version="test", input_fingerprint="t")
        rows = []
        for k in range(n_reversals):
            a, b = models.iloc[2 * k], models.iloc[2 * k + 1]
            rows.append({"kind": "reversal", "model_id": int(a["id"]), "model_b_id": int(b["id"]), "score": 0.5 - 0.1 * k,
                         "payload": {"fold": k % 2, "model_a": a["name"], "model_b": b["name"],
                                     "family_a": a["family"], "family_b": b["family"], "owner_a": a["owner"],
                                     "owner_b": b["owner"], "full_a": 0.61, "full_b": 0.60, "anchor_a": 0.55,
                                     "anchor_b": 0.58, "gap": 0.01, "tied": False, "reversed": k % 2 == 0,
                                     "top_items": [{"item": items["key"].iloc[j], "weight": 1.0, "y_a": 0, "y_b": 1,
                                                    "contribution": 0.1 / (j + 1)} for j in range(3)]}})
        table1 = {"items": len(items), "eligible_pairs": n_reversals, "reversals": 2, "rate": 0.5, "p": 0.012,
                  "status": "significant"}
        runs.save_outputs(conn, nid, runs.RunOutputs(metrics={"table1": table1}, flags=pd.DataFrame(rows)))
        cid = runs.create_run(conn, "coverage", bid, config={}, seed=0, code_version="test", input_fingerprint="t")
        z = np.linspace(0, 1, len(items)) ** 2
        z[(z > 0.55) & (z < 0.75)] = 0.55
        gaps = [{"kind": "gap", "score": w, "payload": {"lo": lo, "hi": lo + w, "width": w, "midpoint": lo + w / 2,
                                                         "rank": r + 1}}
                for r, (lo, w) in enumerate(((0.55, 0.2), (0.8, 0.12), (0.3, 0.05)))]
        metrics = {"ddm": 0.21, "max_gap": 0.2, "topk_sum": 0.4, "max_gap_ratio": 2.1,
                   "diagnostic_checks": {"model_information": True, "item_inversion": False},
                   "diagnostics_passed": False}
        runs.save_outputs(conn, cid, runs.RunOutputs(
            metrics=metrics, items=pd.DataFrame({"item_id": items["id"], "difficulty": z * 4 - 2, "z": z}),
            flags=pd.DataFrame(gaps)))
        conn.execute("UPDATE runs SET created_at = '2026-01-01T00:00:00Z', finished_at = '2026-01-01T00:00:01Z'")
        return {"anomaly_run": rid, "neartie_run": nid, "coverage_run": cid}
    finally:
        conn.close()


def add_literal_benchmark(db: Path) -> None:
    """A small benchmark whose item text is markup-looking, emoji-laden and 4,000 characters long."""
    from benchloupe.store.db import connect
    from benchloupe.store.importers.base import ParsedImport
    from benchloupe.store.writer import write_import

    items = pd.DataFrame({"key": ["[b]evil[/b]", "plain"], "text": [EVIL, "ordinary text"],
                          "answer": [EVIL_ANSWER, "1"], "group": ["[red]g[/]", "g"]})
    models = pd.DataFrame({"name": ["model-[x]", "model-y", "model-z"]})
    correct = np.array([[1, 0], [0, 1], [1, 1]], np.int8)
    conn = connect(db)
    try:
        write_import(conn, ParsedImport("literal", "static", items, models, correct=correct, source="test"),
                     fmt="test")
    finally:
        conn.close()


@pytest.fixture
def flagged_db(demo_db: Path) -> Path:
    add_flags(demo_db)
    add_literal_benchmark(demo_db)
    return demo_db


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio through anyio's pytest plugin (anyio comes with openai/httpx)."""
    return "asyncio"
