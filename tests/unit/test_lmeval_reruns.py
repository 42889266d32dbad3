"""lm-eval re-runs and filters (issue 23, must-fix 3), on real lm_eval output folders
(tests/fixtures/real/lmeval_reruns, written offline by make_lmeval_logs.py --reruns: task add_gen run twice per
model into one --output_path, filters strict-match and flexible-extract).

Before the fix importing the strong-solver folder failed: "model 'strong-solver' item 'add-1' of benchmark
'add_gen' is also in ...samples_add_gen_2026-12-01T22-28-29.896856.jsonl"."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from benchloupe.cli.main import main
from benchloupe.jobs.imports import import_paths
from benchloupe.store import read
from benchloupe.store.db import connect
from benchloupe.store.importers.base import ImportFormatError
from benchloupe.store.importers.lmeval import parse_lmeval

RERUNS = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "lmeval_reruns"
SOLVER, SAMPLER = RERUNS / "strong-solver", RERUNS / "sampler"
OLD = "samples_add_gen_2026-12-01T22-28-29.896856.jsonl"


def _cells(db, bench="add_gen"):
    conn = connect(db)
    try:
        sm = read.load_static(conn, bench)
    finally:
        conn.close()
    out = {}
    for m, name in enumerate(sm.models["name"]):
        if sm.trials is not None:
            out[name] = (sm.successes[m].tolist(), sm.trials[m].tolist())
        else:
            out[name] = sm.correct[m].tolist()
    return sm.items["key"].tolist(), out


def test_newest_run_wins_with_a_note_naming_the_superseded_file(tmp_path):
    db = tmp_path / "w.db"
    summary = import_paths(db, [str(SOLVER)], "lm-eval", filter_name="flexible-extract")
    assert len(summary.files) == 1
    notes = summary.files[0]["notes"]
    assert any("newest of 2 runs of task 'add_gen'" in n and OLD in n for n in notes), notes
    keys, cells = _cells(db)
    assert keys == ["add-1", "add-2", "mul-1"]
    assert cells["strong-solver"] == [1, 1, 1]  # the newer run (defaults); the older one answered 41 throughout


def test_trials_keeps_every_run_when_settings_agree(tmp_path):
    db = tmp_path / "w.db"
    summary = import_paths(db, [str(SAMPLER)], "lm-eval", reruns="trials")
    assert any("2 runs of task 'add_gen' for model 'sampler' kept as repeated trials" in n
               for n in summary.files[0]["notes"])
    _, cells = _cells(db)
    assert cells["sampler"] == ([1, 1, 1], [2, 2, 2])  # right, wrong, right then wrong, right, wrong


def test_trials_refuse_runs_whose_settings_differ_and_leave_the_database_alone(tmp_path, capsys):
    db = tmp_path / "w.db"
    assert main(["import", "lm-eval", str(SAMPLER), "--db", str(db)]) == 0
    before = list(sqlite3.connect(db).iterdump())
    capsys.readouterr()
    assert main(["import", "lm-eval", str(SOLVER), "--db", str(db), "--reruns", "trials"]) == 1
    err = capsys.readouterr().err
    assert "differ in their settings" in err and "config.gen_kwargs.temperature: 0.9 vs null" in err
    assert "--reruns newest" in err and "\n" not in err.strip()
    assert list(sqlite3.connect(db).iterdump()) == before


def test_the_filter_is_named_and_selectable():
    path = next(SOLVER.glob("samples_add_gen_2026-12-01T22-28-53*.jsonl"))
    strict = parse_lmeval(path)
    assert strict.correct.tolist() == [[0, 0, 0]]  # "The answer is 4" does not match strict-match's ^N$
    assert any("filter 'strict-match'" in n and "'flexible-extract'" in n and "--filter-name" in n
               for n in strict.notes)
    flexible = parse_lmeval(path, filter_name="flexible-extract")
    assert flexible.correct.tolist() == [[1, 1, 1]]
    with pytest.raises(ImportFormatError, match="the file has strict-match, flexible-extract"):
        parse_lmeval(path, filter_name="nope")
    with pytest.raises(ImportFormatError, match="reruns"):
        parse_lmeval(path, reruns="all")
    plain = parse_lmeval(next((RERUNS.parent / "lmeval" / "alpha").glob("samples_*.jsonl")))
    assert not any("filter" in n for n in plain.notes)  # lm-eval's "none" filter is not worth a note


def test_run_settings_come_from_the_runs_own_results_file():
    old, new = (parse_lmeval(p) for p in sorted(SOLVER.glob("samples_*.jsonl")))
    assert old.run["stamp"] < new.run["stamp"]
    assert old.run["settings"]["config.gen_kwargs"] == {"temperature": 0.9}
    assert new.run["settings"]["config.gen_kwargs"] == {}
    assert new.run["settings"]["n-shot.add_gen"] == 0 and new.run["settings"]["filter"] == "strict-match"


def test_cli_json_summary_carries_the_notes(tmp_path, capsys):
    db = tmp_path / "w.db"
    capsys.readouterr()
    assert main(["import", "lm-eval", str(RERUNS), "--db", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    notes = [n for f in out["files"] for n in f["notes"]]
    assert sum("newest of 2 runs" in n for n in notes) == 2
    _, cells = _cells(db)
    assert set(cells) == {"strong-solver", "sampler"} and np.array(cells["sampler"]).tolist() == [0, 1, 0]
