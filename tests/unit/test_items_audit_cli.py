"""``audit items`` end to end (issue 33): SAT12 imported as chosen options with its documented key, item 32
flagged with key 3 suggested, the key fixed (results re-scored, audited, undoable); bad option files refused with
one line and the database unchanged."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.hostile import check_outcome, dump, run_cli

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "classic_irt"
SAT12_KEY = [1, 4, 5, 2, 3, 1, 2, 1, 3, 1, 2, 4, 2, 1, 5, 3, 4, 4, 1, 4, 3, 3, 4, 1, 3, 5, 1, 3, 1, 5, 4, 5]


def sat12(tmp_path: Path) -> Path:
    """A workspace holding SAT12 (the shared real data) as chosen options with its documented key, not audited."""
    raw = DATA / "SAT12_raw.csv"
    if not raw.exists():
        pytest.skip(f"{raw} is absent (the shared real-data folder is not on this machine)")
    db = tmp_path / "w.db"
    keys = tmp_path / "sat12_items.csv"
    keys.write_text("key,answer\n" + "".join(f"Item.{i + 1},{k}\n" for i, k in enumerate(SAT12_KEY)))
    for argv in (["import", "items", keys, "--benchmark", "SAT12"],
                 ["import", "wide", raw, "--options", "--na-values", "8", "--benchmark", "SAT12"]):
        rc, _out, err = run_cli([*argv, "--db", db])
        assert rc == 0, err
    return db


def _item_rest(db: Path, key: str) -> float:
    rc, out, err = run_cli(["audit", "items", "SAT12", "--db", db, "--json", "--permutations", "99"])
    assert rc == 0, err
    run = json.loads(out)["run_id"]
    rc, out, err = run_cli(["export", "run-artifact", "--run", run, "--name", "table", "--format", "json",
                            "--db", db])
    assert rc == 0, err
    rows = json.loads(out)
    rows = rows if isinstance(rows, list) else [dict(zip(rows["columns"], r)) for r in rows["data"]]
    return next(r["r_rest"] for r in rows if r["key"] == key)


def test_sat12_item_32_flagged_with_key_3_then_fixed_and_undone(tmp_path):
    db = sat12(tmp_path)
    rc, out, err = run_cli(["audit", "items", "SAT12", "--db", db])
    assert rc == 0, err
    assert "Item.32  miskeyed: suggested key: 3 (61 % of the top quartile; key 5: 19 %)" in out
    assert "1 flagged" in out
    rc, out, err = run_cli(["flags", "SAT12", "--kind", "item", "--json", "--db", db])
    flags = json.loads(out)
    assert [f["item_key"] for f in flags] == ["Item.32"] and flags[0]["payload"]["q_miskey"] <= .05
    fid = flags[0]["id"]
    rc, out, err = run_cli(["flags", "--fix-key", fid, "3", "--expect-key", "5", "--note", "mirt manual",
                            "--db", db])
    assert rc == 0, err
    changed = int(out.split("; ")[1].split()[0])
    assert changed > 300 and "key 5 -> 3" in out
    assert _item_rest(db, "Item.32") > 0.15  # was .037 with key 5
    conn = sqlite3.connect(db)
    logged = json.loads(conn.execute("SELECT detail FROM audit_log WHERE action = 'item:fix-key'").fetchone()[0])
    state = conn.execute("SELECT state FROM flags WHERE id = ?", (fid,)).fetchone()[0]
    conn.close()
    assert logged["changed"] == changed and state == "confirmed"
    # a second fix on the key as first seen is refused: someone (we) changed it
    before = dump(db)
    rc, out, err = run_cli(["flags", "--fix-key", fid, "4", "--expect-key", "5", "--db", db])
    check_outcome("stale fix", rc, out, err, before, dump(db))
    assert rc == 1 and "now '3'" in err
    rc, out, err = run_cli(["flags", "--undo", "--db", db])
    assert rc == 0, err
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT answer FROM items WHERE key = 'Item.32'").fetchone()[0] == "5"
    assert conn.execute("SELECT state FROM flags WHERE id = ?", (fid,)).fetchone()[0] == "open"
    conn.close()
    assert abs(_item_rest(db, "Item.32") - 0.037) < 0.01


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_bad_option_files_are_refused_with_one_line_and_nothing_written(tmp_path):
    db = tmp_path / "w.db"
    items = _write(tmp_path, "items.csv", "key,answer\nq1,A\nq2,B\nq3,\n")
    rc, _o, err = run_cli(["import", "items", items, "--benchmark", "mc", "--db", db])
    assert rc == 0, err
    conn = sqlite3.connect(db)
    conn.execute("UPDATE items SET choices = '[\"A\", \"B\", \"C\"]' WHERE key IN ('q1', 'q2')")
    conn.commit()
    conn.close()
    cases = {
        "not a choice": ("model,q1,q2\nm1,A,D\nm2,B,B\n", "option 'D' is not among its choices"),
        "no answer": ("model,q1,q3\nm1,A,B\nm2,B,A\n", "has no answer"),
        "mixed 0/1": ("model,q1,q2\nm1,0,A\nm2,1,B\n", "only 0/1 cells"),
    }
    for case, (text, words) in cases.items():
        before = dump(db)
        path = _write(tmp_path, f"{case.replace(' ', '_').replace('/', '_')}.csv", text)
        rc, out, err = run_cli(["import", "wide", path, "--options", "--benchmark", "mc", "--db", db])
        check_outcome(case, rc, out, err, before, dump(db))
        assert rc == 1 and words in err, (case, err)


def test_options_scored_with_the_answer_and_kept_per_cell(tmp_path):
    db = tmp_path / "w.db"
    items = _write(tmp_path, "items.csv", "key,answer\nq1,A\nq2,C\n")
    opts = _write(tmp_path, "opts.csv", "model,q1,q2\nm1,A,C\nm2,B,\nm3,C,A\n")
    for argv in (["import", "items", items, "--benchmark", "mc"], ["import", "wide", opts, "--options",
                                                                   "--benchmark", "mc"]):
        rc, _o, err = run_cli([*argv, "--db", db])
        assert rc == 0, err
    from benchloupe.store import read
    from benchloupe.store.db import connect
    from benchloupe.store.itemkeys import load_options

    conn = connect(db)
    try:
        sm = read.load_static(conn, "mc")
        opt = load_options(conn, read.benchmark_id(conn, "mc"), sm.models["id"].tolist(), sm.items["pos"])
        choices = [json.loads(r[0]) for r in conn.execute("SELECT choices FROM items ORDER BY pos")]
    finally:
        conn.close()
    assert sm.correct.tolist() == [[1, 1], [0, -1], [0, 0]]
    assert choices == [["A", "B", "C"], ["A", "C"]]
    assert opt.tolist() == [[0, 1], [1, -1], [2, 0]]


REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"


def _stored(db: Path, bench: str):
    from benchloupe.store import read
    from benchloupe.store.db import connect
    from benchloupe.store.itemkeys import load_options

    conn = connect(db)
    try:
        sm = read.load_static(conn, bench)
        opt = load_options(conn, read.benchmark_id(conn, bench), sm.models["id"].tolist(), sm.items["pos"])
        choices = [json.loads(r[0]) for r in conn.execute("SELECT choices FROM items ORDER BY pos")]
        return sm, opt, choices
    finally:
        conn.close()


def test_lmeval_multiple_choice_keeps_the_argmax_of_the_loglikelihoods(tmp_path):
    log = next((REAL / "lmeval" / "i82qcls7").glob("samples_arith_mc_*.jsonl"))
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    want = [max(range(len(r["filtered_resps"])), key=lambda k, r=r: float(r["filtered_resps"][k][0])) for r in rows]
    db = tmp_path / "w.db"
    rc, _o, err = run_cli(["import", "lm-eval", log, "--model", "dummy", "--db", db])
    assert rc == 0, err
    sm, opt, choices = _stored(db, "arith_mc")
    assert opt.tolist() == [want]
    assert sm.correct.tolist() == [[int(r["acc"]) for r in rows]]  # the harness's own score is kept
    assert choices == [r["doc"]["choices"] for r in rows]


def test_inspect_multiple_choice_keeps_the_answer_letter(tmp_path):
    log = next((REAL / "inspect" / "json").glob("*_mcq_*.json"))
    doc = json.loads(log.read_text())
    want = [ord(s["scores"]["choice"]["answer"]) - 65 for s in doc["samples"]]
    db = tmp_path / "w.db"
    rc, _o, err = run_cli(["import", "inspect", log, "--db", db])
    assert rc == 0, err
    _sm, opt, choices = _stored(db, "mcq")
    assert opt.tolist() == [want] and choices == [s["choices"] for s in doc["samples"]]


def test_long_option_column_is_scored_with_the_answer_column(tmp_path):
    path = _write(tmp_path, "long.csv", "model,item,choice,answer\nm1,q1,A,A\nm2,q1,B,A\nm1,q2,C,C\nm2,q2,,C\n")
    db = tmp_path / "w.db"
    rc, _o, err = run_cli(["import", "long", path, "--option-col", "choice", "--benchmark", "L", "--db", db])
    assert rc == 0, err
    sm, opt, choices = _stored(db, "L")
    assert sm.correct.tolist() == [[1, 1], [0, -1]] and opt.tolist() == [[0, 0], [1, -1]]
    assert choices == [["A", "B"], ["C"]]


def test_lmeval_log_set_with_a_contradicted_key_gets_it_flagged_with_the_true_answer(tmp_path):
    """200 simulated models' lm-eval multiple-choice logs, written from the real fixture's row and results files
    (the real tool's format, its values simulated): on item 0 the task's target says choice 0, the models answer
    consistently with choice 2 being right; the audit flags it and suggests choice 2's text."""
    real = REAL / "lmeval" / "i82qcls7"
    template = json.loads(next(real.glob("samples_arith_mc_*.jsonl")).read_text().splitlines()[0])
    results = json.loads(next((REAL / "lmeval" / "alpha").glob("results_*.json")).read_text())
    rng = __import__("numpy").random.default_rng(7)
    n_items, n_models = 24, 200
    theta = rng.normal(size=n_models)
    b = rng.normal(size=n_items)
    true = rng.integers(0, 4, n_items)
    true[0], b[0] = 2, -0.5  # an item most models can answer
    stated = true.copy()
    stated[0] = 0  # the task's key contradicts what the models agree on
    logs = tmp_path / "logs"
    for m in range(n_models):
        folder = logs / f"model{m:02d}"
        folder.mkdir(parents=True)
        stamp = "2026-12-01T09-38-10.963199"
        res = dict(results, model_name=f"model{m:02d}")
        res["config"] = dict(results["config"], model_args={"model": f"model{m:02d}"})
        (folder / f"results_{stamp}.json").write_text(json.dumps(res))
        rows = []
        for j in range(n_items):
            p = 0.25 + 0.75 / (1 + __import__("math").exp(-1.7 * (theta[m] - b[j])))
            pick = int(true[j]) if rng.random() < p else int((true[j] + rng.integers(1, 4)) % 4)
            choices = [f"opt{j}-{k}" for k in range(4)]
            row = json.loads(json.dumps(template))
            row["doc_id"], row["doc"] = j, {"id": f"q{j}", "question": f"question {j}", "choices": choices}
            row["target"] = str(int(stated[j]))
            row["arguments"] = {f"gen_args_{k}": {"arg_0": f"Question {j}\nAnswer:", "arg_1": f" {c}"}
                                for k, c in enumerate(choices)}
            lls = [-1.5 - rng.random() for _ in range(4)]
            lls[pick] = -0.2
            row["resps"] = [[[str(v), "False"]] for v in lls]
            row["filtered_resps"] = [[str(v), "False"] for v in lls]
            row["acc"] = float(pick == stated[j])
            rows.append(json.dumps(row))
        (folder / f"samples_arith_mc_{stamp}.jsonl").write_text("\n".join(rows) + "\n")
    db = tmp_path / "w.db"
    rc, _o, err = run_cli(["import", "lm-eval", logs, "--db", db])
    assert rc == 0, err
    rc, out, err = run_cli(["audit", "items", "arith_mc", "--db", db, "--json", "--permutations", "499"])
    assert rc == 0, err
    flags = json.loads(out)["flags"]
    assert [f["item_key"] for f in flags][:1] == ["q0"], flags
    assert "suggested key: opt0-2" in flags[0]["headline"]


def test_audit_items_bad_input_one_line_and_nothing_written(tmp_path):
    db = tmp_path / "w.db"
    items = _write(tmp_path, "items.csv", "key,answer\nq1,A\nq2,B\n")
    binary = _write(tmp_path, "bin.csv", "model,q1,q2\nm1,1,0\nm2,0,1\nm3,1,1\nm4,0,0\nm5,1,0\n")
    for argv in (["import", "items", items, "--benchmark", "only-items"],
                 ["import", "wide", binary, "--benchmark", "bin"]):
        rc, _o, err = run_cli([*argv, "--db", db])
        assert rc == 0, err
    rc, out, err = run_cli(["audit", "items", "bin", "--db", db, "--permutations", "99"])
    assert rc == 0, err
    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO flags (kind, benchmark_id, item_id) VALUES ('item', (SELECT id FROM benchmarks WHERE"
                 " name = 'bin'), (SELECT id FROM items WHERE key = 'q1' AND benchmark_id = (SELECT id FROM benchmarks"
                 " WHERE name = 'bin')))")
    conn.execute("INSERT INTO flags (kind, benchmark_id) VALUES ('anomaly', 1)")
    conn.commit()
    other_flag, item_flag = (r[0] for r in conn.execute("SELECT id FROM flags ORDER BY id DESC LIMIT 2"))
    conn.close()
    cases = {
        "no static results": (["audit", "items", "only-items"], "no static results"),
        "fdr nan": (["audit", "items", "bin", "--fdr", "nan"], "--fdr"),
        "fdr 1": (["audit", "items", "bin", "--fdr", "1"], "--fdr"),
        "neartie flag": (["audit", "items", "bin", "--protocol", "full"], "applies to `audit neartie`"),
        "two benchmarks": (["audit", "items", "bin", "only-items"], "takes one benchmark"),
        "not an item flag": (["flags", "--fix-key", other_flag, "A"], "is an anomaly flag, not an item flag"),
        "no stored options": (["flags", "--fix-key", item_flag, "0"], "no stored options"),
        "no such flag": (["flags", "--retire", "99999"], "no flag with id 99999"),
    }
    for case, (argv, words) in cases.items():
        before = dump(db)
        rc, out, err = run_cli([*argv, "--db", db])
        check_outcome(case, rc, out, err, before, dump(db), usage=True)
        assert rc in (1, 2) and words in err, (case, err)
