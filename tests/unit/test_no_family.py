"""A model with no family (no name rule matched, no column gave one) reads as None and prints as "none",
never as ``nan`` (issue 10, minor): in the store's frames (which the TUI formats with ``or '-'``, where NaN
is truthy), in ``show``, and in the CLI's ranking tables."""

from __future__ import annotations

import json

import numpy as np

from benchloupe.cli.main import main

NAMES = ["llama-3-8b", "qwen2-7b", "mystery-a", "mistral-7b", "zeta-x"]


def _workspace(tmp_path) -> str:
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, (len(NAMES), 30))
    y[:, 0], y[:, 1] = 1, 0
    y[0, 1], y[1, 0] = 1, 0  # no all-right or all-wrong model or item
    path = tmp_path / "w.csv"
    path.write_text("model," + ",".join(f"q{j}" for j in range(30)) + "\n"
                    + "".join(n + "," + ",".join(map(str, r)) + "\n" for n, r in zip(NAMES, y)))
    db = str(tmp_path / "w.db")
    assert main(["import", "wide", str(path), "-b", "s", "--db", db]) == 0
    return db


def test_store_frames_hold_none_not_nan(tmp_path):
    from benchloupe.store import read, runs, views
    from benchloupe.store.db import connect

    db = _workspace(tmp_path)
    assert main(["fit", "static", "s", "--db", db, "--no-heldout"]) == 0
    conn = connect(db)
    try:
        frames = {"models": read.models(conn, "s"), "model_table": views.model_table(conn, "s"),
                  "run_models": runs.run_models(conn, runs.latest_run(conn, read.benchmark_id(conn, "s"),
                                                                      ("static",)))}
    finally:
        conn.close()
    for label, df in frames.items():
        row = df[df["name"] == "mystery-a"].iloc[0]
        assert row["family"] is None, (label, row["family"])
        assert f"family {row['family'] or '-'}" == "family -", label


def test_show_and_rankings_say_none(tmp_path, capsys):
    db = _workspace(tmp_path)
    capsys.readouterr()
    assert main(["show", "s", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out.lower().split() and '"none": 2' in out
    assert main(["fit", "static", "s", "--db", db, "--no-heldout"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[1]: line.split() for line in out.splitlines()
            if line.split() and line.split()[0].isdigit() and len(line.split()) >= 3}
    assert rows["mystery-a"][2] == "none" and rows["zeta-x"][2] == "none" and rows["qwen2-7b"][2] == "qwen"
    assert main(["show", "s", "--db", db, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert "nan" not in json.dumps(shown).lower()
