"""``coverage ARENA`` over a joint fit of another (static) benchmark reads that fit's arena difficulties but
counts and ranges only the arena benchmark's own models, and prints no interval it does not have (issue 32
point 8: "n_models 130" for a 40-model benchmark and "max_gap_ci [nan, nan]")."""

from __future__ import annotations

import json

from benchloupe.cli.main import main


def test_arena_coverage_counts_its_own_models_and_prints_no_nan(demo_db, capsys):
    from benchloupe.store import read
    from benchloupe.store.db import connect

    # --no-heldout: the held-out calibration metrics (two thirds of the fit's time) are not what is tested here
    assert main(["fit", "joint", "demo-chem", "--arena", "demo-arena", "--db", str(demo_db), "--no-heldout",
                 "--json"]) == 0
    capsys.readouterr()
    assert main(["coverage", "demo-arena", "--db", str(demo_db), "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    conn = connect(demo_db)
    try:
        arena_models, chem_models = len(read.models(conn, "demo-arena")), len(read.models(conn, "demo-chem"))
    finally:
        conn.close()
    assert arena_models != chem_models and m["n_models"] == arena_models, m["n_models"]
    assert "max_gap_ci" not in m or all(isinstance(x, float) and x == x for x in m["max_gap_ci"])
    assert main(["coverage", "demo-arena", "--db", str(demo_db)]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out.lower().replace("nanosec", ""), out
    assert f"n_models                  {arena_models}" in out or f"n_models {arena_models}" in " ".join(out.split())
