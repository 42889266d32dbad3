"""A BenchFill session killed with SIGKILL mid-round loses no completed annotation; resuming continues the same
session without asking the annotators again for what was journaled."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pytest

from tests.fake_llm import fake_llm  # noqa: F401
from tests.fill_world import configure_endpoints, store_world


def _annotations(db) -> list[tuple]:
    conn = sqlite3.connect(db)
    rows = [json.loads(p) for (p,) in conn.execute(
        "SELECT payload FROM fill_events WHERE kind = 'annotation' ORDER BY id")]
    conn.close()
    return [(r["child_id"], r["model"], r["trial"]) for r in rows]


@pytest.mark.slow
def test_kill_mid_round_then_resume(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db = tmp_path / "k.db"
    bench = store_world(fake_llm, db)
    configure_endpoints(fake_llm, db, monkeypatch)
    fake_llm.latency = 0.03
    env = {**os.environ, "FAKE_LLM_KEY": os.environ["FAKE_LLM_KEY"]}
    proc = subprocess.Popen([sys.executable, "-m", "benchloupe", "fill", bench, "--db", str(db)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if len(_annotations(db)) >= 40:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    before = _annotations(db)
    assert len(before) >= 40
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    sid, state = conn.execute("SELECT id, state FROM fill_sessions").fetchone()
    conn.close()
    assert state == "running"  # the killed process could not mark it; resume picks it up
    annotator_requests = sum(1 for m, _ in fake_llm.requests if m.startswith("annot-"))
    fake_llm.latency = 0.0
    r = subprocess.run([sys.executable, "-m", "benchloupe", "fill", "--resume", str(sid), "--db", str(db), "--json"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["session"] == sid and summary["state"] in ("proposed", "no_valid_child")
    after = _annotations(db)
    assert after[: len(before)] == before  # nothing completed was lost
    assert max(Counter(after).values()) == 1  # and nothing was annotated twice
    new_requests = sum(1 for m, _ in fake_llm.requests if m.startswith("annot-")) - annotator_requests
    assert new_requests < len(after)  # the journaled annotations were replayed, not re-asked
    assert new_requests >= len(after) - len(before)
