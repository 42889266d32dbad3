"""Closing the loop (issue 12): accepted BenchFill items export as Inspect Sample JSONL and as an lm-eval
JSONL dataset with its task YAML, and the real tools read them back."""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from benchloupe.cli.main import main
from benchloupe.store import fill
from benchloupe.store.db import connect
from tests.fixtures.real.make_lmeval_logs import lm_eval_command

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
MCQ = next(p for p in sorted((REAL / "inspect" / "logs").glob("*_mcq_*.eval")))


@pytest.fixture
def db_with_accepted(tmp_path):
    db = tmp_path / "w.db"
    assert main(["import", "inspect", str(MCQ), "--group-col", "topic", "--db", str(db)]) == 0
    conn = connect(db)
    try:
        bid = conn.execute("SELECT id FROM benchmarks WHERE name = 'mcq'").fetchone()[0]
        parent = conn.execute("SELECT id FROM items WHERE key = 'mc-1'").fetchone()[0]
        sid = fill.create_session(conn, bid, 0.2, 0.4, 0.3, {})
        fill.upsert_candidate(conn, sid, "c1", round_=1, parent_item_id=parent, text="What is 19 + 29?",
                              answer="48", payload={}, valid=True, difficulty_norm=0.31)
        cid = conn.execute("SELECT id FROM fill_candidates WHERE child_key = 'c1'").fetchone()[0]
        fill.decide(conn, cid, "accept")
    finally:
        conn.close()
    return db


def test_inspect_samples_of_accepted_items(db_with_accepted, tmp_path, capsys):
    out = tmp_path / "samples.jsonl"
    assert main(["export", "inspect-samples", "mcq", "-o", str(out), "--db", str(db_with_accepted)]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["input"] == "What is 19 + 29?" and rows[0]["target"] == "48"
    assert rows[0]["metadata"]["parent"] == "mc-1" and rows[0]["metadata"]["group"] == "add"
    assert main(["export", "inspect-samples", "mcq", "--all-items", "--db", str(db_with_accepted)]) == 0
    every = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert every[0]["choices"] == ["46", "47", "36", "48"] and every[0]["target"] == "D"  # letter, as choice() wants
    if importlib.util.find_spec("inspect_ai"):
        from inspect_ai.dataset import json_dataset

        out.write_text("".join(json.dumps(r) + "\n" for r in every))
        ds = json_dataset(str(out))
        assert [s.id for s in ds] == ["mc-1", "mc-2", rows[0]["id"]] and ds[0].choices == ["46", "47", "36", "48"]


def test_no_accepted_items_is_one_line(tmp_path, capsys):
    db = tmp_path / "w.db"
    assert main(["import", "inspect", str(MCQ), "--db", str(db)]) == 0
    assert main(["export", "inspect-samples", "mcq", "--db", str(db)]) == 1
    assert "no accepted BenchFill items" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None, reason="lm_eval is not installed")
def test_lmeval_task_runs_in_lm_eval(db_with_accepted, tmp_path):
    gen = tmp_path / "gen"
    assert main(["export", "lm-eval-task", "mcq", "-o", str(gen), "--db", str(db_with_accepted)]) == 0
    assert "output_type: generate_until" in (gen / "mcq__benchfill.yaml").read_text()  # the child has no choices
    plain = tmp_path / "plain.db"
    assert main(["import", "inspect", str(MCQ), "--db", str(plain)]) == 0
    folder = tmp_path / "task"
    assert main(["export", "lm-eval-task", "mcq", "--all-items", "-o", str(folder), "--db", str(plain)]) == 0
    assert "output_type: multiple_choice" in (folder / "mcq.yaml").read_text()
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    subprocess.run(lm_eval_command(["--model", "dummy", "--tasks", "mcq", "--include_path", str(folder),
                                    "--log_samples", "--output_path", str(tmp_path / "out")]), check=True, env=env,
                   capture_output=True, cwd=tmp_path)
    samples = next((tmp_path / "out").rglob("samples_mcq_*.jsonl"))
    # ... and the harness's log imports back onto the same items
    db = tmp_path / "back.db"
    assert main(["import", "lm-eval", str(samples), "--model", "dummy-run", "-b", "mcq", "--db", str(db)]) == 0
    conn = sqlite3.connect(db)
    keys = [r[0] for r in conn.execute("SELECT key FROM items ORDER BY pos")]
    answers = [r[0] for r in conn.execute("SELECT answer FROM items ORDER BY pos")]
    conn.close()
    assert keys[:2] == ["mc-1", "mc-2"] and answers[:2] == ["48", "Jupiter"]
