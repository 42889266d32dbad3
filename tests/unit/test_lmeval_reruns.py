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


# ------------------------------------------------------------------------------------------------- issue 37, point 3
# Trials merge only runs of identical documents and settings; a file is counted once however often it is imported
# or copied; a later import adds trials or refuses, never silently replaces. lmeval_later/ holds two more real
# lm_eval runs of `sampler` on add_gen (make_lmeval_logs.py --later): `same/` with the same documents and settings,
# `changed/` with the same settings over changed documents (add-2 asks 10 + 39): doc/target/task hashes differ.

LATER = RERUNS.parent / "lmeval_later"
SAME, CHANGED = LATER / "same" / "sampler", LATER / "changed" / "sampler"


def _import(db, *paths, reruns="trials", capsys=None):
    if capsys is not None:
        capsys.readouterr()
    rc = main(["import", "lm-eval", *map(str, paths), "--db", str(db), "--reruns", reruns])
    return rc, (capsys.readouterr() if capsys is not None else None)


def _dump(db):
    return list(sqlite3.connect(db).iterdump())


@pytest.mark.parametrize("together", [True, False], ids=["one-batch", "later-import"])
def test_trials_refuse_runs_whose_documents_differ(tmp_path, capsys, together):
    db = tmp_path / "w.db"
    if together:
        assert main(["import", "lm-eval", str(SAME), "--db", str(db), "--benchmark", "other"]) == 0
        before = _dump(db)
        rc, out = _import(db, SAMPLER, CHANGED, capsys=capsys)
    else:
        assert _import(db, SAMPLER)[0] == 0
        before = _dump(db)
        rc, out = _import(db, CHANGED, capsys=capsys)
    assert rc == 1
    assert "differ in their documents" in out.err and "item 'add-2'" in out.err
    assert "--reruns newest" in out.err and "\n" not in out.err.strip() and "Traceback" not in out.err
    assert _dump(db) == before


def test_a_copied_folder_is_counted_once(tmp_path, capsys):
    import shutil

    copy = tmp_path / "copy" / "sampler"
    shutil.copytree(SAMPLER, copy)
    db = tmp_path / "w.db"
    rc, out = _import(db, SAMPLER, copy, capsys=capsys)
    assert rc == 0 and "(a copy): counted once" in out.out
    assert _cells(db)[1]["sampler"] == ([1, 1, 1], [2, 2, 2])  # not 4 trials
    rc, out = _import(db, copy, capsys=capsys)  # the copy again, later: already counted
    assert rc == 0 and "already imported: not counted again" in out.out
    assert _cells(db)[1]["sampler"] == ([1, 1, 1], [2, 2, 2])


def test_a_later_run_adds_trials_and_a_repeat_adds_nothing(tmp_path, capsys):
    db = tmp_path / "w.db"
    assert _import(db, SAMPLER)[0] == 0
    assert _cells(db)[1]["sampler"] == ([1, 1, 1], [2, 2, 2])
    rc, out = _import(db, SAME, capsys=capsys)
    assert rc == 0 and "3 runs of task 'add_gen'" in out.out and "2 already imported; this import adds 1" in out.out
    assert _cells(db)[1]["sampler"] == ([2, 1, 2], [3, 3, 3])  # right, wrong, right added: not 1/1
    before = _dump(db)
    for paths in ([SAME], [SAMPLER, SAME]):  # every file already counted: nothing changes but the import log
        assert _import(db, *paths)[0] == 0
        assert _cells(db)[1]["sampler"] == ([2, 1, 2], [3, 3, 3])
    assert len(_dump(db)) > len(before)


def test_newest_after_trials_says_what_it_replaces(tmp_path, capsys):
    db = tmp_path / "w.db"
    assert _import(db, SAMPLER)[0] == 0
    rc, out = _import(db, SAME, reruns="newest", capsys=capsys)
    assert rc == 0 and "the stored results of 2 runs are replaced" in out.out.replace("\n  ", " ")
    assert _cells(db)[1]["sampler"] == ([1, 0, 1], [1, 1, 1])
    # and trials after newest count the stored run once: the two earlier runs add to it
    assert _import(db, SAMPLER)[0] == 0
    assert _cells(db)[1]["sampler"] == ([2, 1, 2], [3, 3, 3])


def test_trials_refuse_to_replace_results_no_recorded_run_gave(tmp_path, capsys):
    """A model's cells imported from another format cannot silently become 1/1 of one run."""
    db = tmp_path / "w.db"
    (tmp_path / "add_gen.csv").write_text("model,add-1,add-2,mul-1\nsampler,1,1,1\n")
    assert main(["import", "wide", str(tmp_path / "add_gen.csv"), "--db", str(db)]) == 0
    before = _dump(db)
    rc, out = _import(db, SAMPLER, capsys=capsys)
    assert rc == 1 and "no recorded run of task 'add_gen' gave" in out.err and "\n" not in out.err.strip()
    assert _dump(db) == before


@pytest.mark.slow
@pytest.mark.skipif(__import__("importlib").util.find_spec("lm_eval") is None, reason="lm_eval is not installed")
def test_fresh_later_runs_from_lm_eval_add_or_refuse_like_the_committed_ones(tmp_path):
    import subprocess
    import sys

    subprocess.run([sys.executable, str(RERUNS.parent / "make_lmeval_logs.py"), str(tmp_path / "out"), "--later"],
                   check=True, capture_output=True, cwd=tmp_path)
    db = tmp_path / "w.db"
    import_paths(db, [str(SAMPLER)], "lm-eval", reruns="trials")
    import_paths(db, [str(tmp_path / "out" / "same")], "lm-eval", reruns="trials")
    assert _cells(db)[1]["sampler"][1] == [3, 3, 3]
    with pytest.raises(ImportFormatError, match="item 'add-2'"):
        import_paths(db, [str(tmp_path / "out" / "changed")], "lm-eval", reruns="trials")


def test_changed_documents_after_a_newest_import_are_refused_too(tmp_path, capsys):
    """A newest import stores only its documents' digest (not one per item): trials against it still compare."""
    db = tmp_path / "w.db"
    assert _import(db, SAME, reruns="newest")[0] == 0
    before = _dump(db)
    rc, out = _import(db, CHANGED, capsys=capsys)
    assert rc == 1 and "differ in their documents" in out.err and "\n" not in out.err.strip()
    assert _dump(db) == before
    counts = [json.loads(c) for (c,) in sqlite3.connect(db).execute("SELECT counts FROM imports")]
    assert "docs" not in counts[0]["runs"][0] and len(counts[0]["runs"][0]["docs_digest"]) == 32


def test_a_single_file_import_counts_runs_like_a_batch(tmp_path):
    """jobs.import_file (one file) goes through the same run records: a later run adds a trial, a copy does not."""
    from benchloupe.jobs import import_file

    db = tmp_path / "w.db"
    first, second = sorted(SAMPLER.glob("samples_*.jsonl"))
    import_file(db, first, "lm-eval", reruns="trials")
    import_file(db, second, "lm-eval", reruns="trials")
    import_file(db, first, "lm-eval", reruns="trials")  # already counted
    assert _cells(db)[1]["sampler"] == ([1, 1, 1], [2, 2, 2])
    with pytest.raises(ImportFormatError, match="differ in their documents"):
        import_file(db, next(CHANGED.glob("samples_*.jsonl")), "lm-eval", reruns="trials")
