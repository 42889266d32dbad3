"""Who is the same respondent across benchmarks (issue 32, point 2).

Respondents of the classic sets are people of that set: ``person_0001`` of LSAT7 is not ``person_0001`` of
SAT12, so importing SAT12 after LSAT7 must add 600 new respondents, not reuse LSAT7's. LLM names, on the other
hand, name the same model in every benchmark and must stay shared.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchloupe.cli.main import main
from benchloupe.store import read
from benchloupe.store.db import connect

ROOT = Path(__file__).resolve().parents[2]
CLASSIC = ROOT.parent / "shared" / "data" / "classic_irt"
LMEVAL = ROOT / "tests" / "fixtures" / "real" / "lmeval"


def _n_models(db) -> int:
    return connect(db).execute("SELECT count(*) FROM models").fetchone()[0]


@pytest.mark.skipif(not CLASSIC.exists(), reason=f"{CLASSIC} is absent (real data lives in ../shared)")
def test_classic_sets_keep_their_respondents_apart(tmp_path, capsys):
    db = str(tmp_path / "c.db")
    assert main(["import", "classic-irt", str(CLASSIC / "LSAT7_patterns.csv"), "--db", db]) == 0
    assert main(["import", "classic-irt", str(CLASSIC / "LSAT6_expanded.csv"), "--db", db]) == 0
    capsys.readouterr()
    assert main(["import", "classic-irt", str(CLASSIC / "SAT12_scored.csv"), "--db", db]) == 0
    assert "600 new models" in capsys.readouterr().out
    assert _n_models(db) == 1000 + 1000 + 600
    conn = connect(db)
    assert read.load_static(conn, "SAT12").models["name"].iloc[0] == "SAT12/person_0001"
    assert read.load_static(conn, "LSAT7").models["name"].iloc[0] == "LSAT7/person_0001"
    assert read.load_static(conn, "LSAT6").models["name"].iloc[-1] == "LSAT6/person_1000"


def test_unnamed_rows_of_any_wide_file_belong_to_their_file(tmp_path):
    """The class, not just mirt's files: ``--no-model-col`` respondents of two files are different people."""
    db = str(tmp_path / "w.db")
    (tmp_path / "quiz_a.csv").write_text("q1,q2\n1,0\n0,1\n")
    (tmp_path / "quiz_b.csv").write_text("r1,r2,r3\n1,1,0\n")
    for name in ("quiz_a", "quiz_b"):
        assert main(["import", "wide", str(tmp_path / f"{name}.csv"), "--no-model-col", "--db", db]) == 0
    assert _n_models(db) == 3
    assert read.load_static(connect(db), "quiz_b").models["name"].tolist() == ["quiz_b/person_0001"]


def test_llm_names_stay_shared_across_benchmarks(tmp_path, capsys):
    """The same harness model in two benchmarks (lm-eval's arith_gen and arith_mc, and two wide CSVs) is one model."""
    db = str(tmp_path / "l.db")
    assert main(["import", "lm-eval", str(LMEVAL / "i82qcls7"), "--model", "dummy-1", "--db", db]) == 0
    assert _n_models(db) == 1
    (tmp_path / "first.csv").write_text("model,a,b\nalpha,1,0\nbeta,0,1\n")
    (tmp_path / "second.csv").write_text("model,c\nalpha,1\nbeta,1\n")
    assert main(["import", "wide", str(tmp_path / "first.csv"), "--db", db]) == 0
    capsys.readouterr()
    assert main(["import", "wide", str(tmp_path / "second.csv"), "--db", db]) == 0
    assert "0 new models" in capsys.readouterr().out
    assert _n_models(db) == 3
    conn = connect(db)
    assert sorted(read.load_static(conn, "second").models["name"]) == ["alpha", "beta"]
