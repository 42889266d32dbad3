"""DualEval commands on real files through the real CLI (issue 14: --reward-model everywhere, --external matching,
``benchloupe evaluate``)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pandas as pd
import pytest

from benchloupe.cli.main import main
from tests.unit._joint_sim import simulate


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("dualeval_cli")
    truth, S, A = simulate(n_models=16, n_static=60, n_arena=30, seed=5)
    names = [f"org/model-{i:02d}" for i in range(16)]
    st = pd.DataFrame([{"model": names[i], "item": f"q{q}", "correct": int(S.correct[i, q])}
                       for i in range(16) for q in range(60)])
    st.to_csv(d / "static.csv", index=False)
    rows = []
    rng = np.random.default_rng(0)
    for rm, noise in (("rm-a", 0.0), ("rm-b", 0.5)):
        for i in range(16):
            for q in range(30):
                rows.append({"model": names[i], "prompt": f"p{q}", "reward_model": rm,
                             "reward": float(A.rewards[i, q] + noise * rng.normal())})
    pd.DataFrame(rows).to_csv(d / "arena.csv", index=False)
    ext = pd.DataFrame({"display": [f"Model {i}" for i in range(16)], "hf": names, "elo": truth["theta"]})
    ext.to_csv(d / "board.csv", index=False)
    db = d / "w.db"
    assert main(["import", "long", str(d / "static.csv"), "--db", str(db), "--benchmark", "st"]) == 0
    assert main(["import", "arena", str(d / "arena.csv"), "--db", str(db), "--benchmark", "ar"]) == 0
    return d, db, truth


def _db_bytes(db):
    conn = sqlite3.connect(db)
    try:
        return [tuple(r) for r in conn.execute("SELECT id, kind, status FROM runs ORDER BY id")]
    finally:
        conn.close()


@pytest.mark.parametrize("command", ["anomalies", "bootstrap", "compress"])
def test_every_arena_command_takes_reward_model(files, command, capsys):
    d, db, _ = files
    extra = {"bootstrap": ["--B", "3"], "compress": ["--recovery", "no"], "anomalies": []}[command]
    before = _db_bytes(db)
    assert main([command, "st", "--arena", "ar", "--db", str(db), *extra]) == 1
    assert "--reward-model" in capsys.readouterr().err
    assert _db_bytes(db) == before  # bad input leaves no run behind
    assert main([command, "st", "--arena", "ar", "--reward-model", "rm-b", "--db", str(db), "--json", *extra]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metrics"]["mode"] == "joint"


def test_external_reports_matches_and_warns_on_display_names(files, capsys):
    d, db, _ = files
    assert main(["fit", "static", "st", "--db", str(db), "--json", "--no-heldout",
                 "--external", f"{d / 'board.csv'}:elo", "--external-model", "display"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["external_matched"] == 0 and m["external_models"] == 16
    assert any("matched only 0 of 16" in w for w in m["warnings"])
    # a name-mapping column of the same file fixes it
    assert main(["fit", "static", "st", "--db", str(db), "--json", "--no-heldout",
                 "--external", f"{d / 'board.csv'}:elo", "--external-model", "display",
                 "--external-map", "hf"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["external_matched"] == 16 and "matched only" not in " ".join(m["warnings"])
    assert m["spearman_vs_external"] > 0.8


def test_external_map_file_and_bad_column(files, capsys, tmp_path):
    d, db, _ = files
    board = pd.read_csv(d / "board.csv")
    board[["display", "hf"]].to_csv(tmp_path / "map.csv", index=False)
    assert main(["fit", "bt", "ar", "--db", str(db), "--json", "--reward-model", "rm-a",
                 "--external", f"{d / 'board.csv'}:elo", "--external-model", "display",
                 "--external-map", str(tmp_path / "map.csv")]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["external_matched"] == 16 and m["spearman_vs_external"] > 0.8
    assert main(["fit", "bt", "ar", "--db", str(db), "--reward-model", "rm-a",
                 "--external", f"{d / 'board.csv'}:elo", "--external-model", "nope"]) == 1
    err = capsys.readouterr().err
    assert "nope" in err and "columns are" in err and "Traceback" not in err


def test_evaluate_prints_table_2(files, capsys):
    d, db, _ = files
    assert main(["evaluate", "st", "--arena", "ar", "--reward-model", "rm-a", "--db", str(db),
                 "--external", f"{d / 'board.csv'}:elo", "--external-model", "hf"]) == 0
    out = capsys.readouterr().out
    for word in ("DualEval", "Static 2PL", "Arena BT", "Arena Avg Reward", "Pair Acc.", "Static rho", "Arena rho",
                 "Public rho"):
        assert word in out
    assert main(["evaluate", "st", "--arena", "ar", "--reward-model", "rm-a", "--db", str(db), "--json",
                 "--splits", "2"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["metrics"]["splits"] == 2 and len(js["table"]) == 4
    assert 0.5 < js["metrics"]["dualeval_pair_acc"] <= 1
    # which fits it made (issue 26): the full-data static 2PL and BT, then per split a static 2PL, a joint fit
    # started from it and a BT fit
    refits = js["metrics"]["refits"]
    assert refits["reference_fits"] == ["static_2pl", "arena_bt"] and refits["fits"] == 2 + 2 * 3
    assert refits["joint_fits"] == len(refits["joint_fit_passes"]) == 2
    assert "warm-started" in refits["per_split"]["dualeval"]
    assert main(["evaluate", "st", "--arena", "ar", "--reward-model", "rm-a", "--db", str(db), "--splits", "1",
                 "--ablation", "yes"]) == 0
    assert "No both-bad loss" in capsys.readouterr().out


def test_external_normalised_names_match_only_when_unique(tmp_path):
    from benchloupe.jobs.calibration import read_external

    models = pd.DataFrame({"name": ["gpt4_turbo", "Llama-3 8B", "llama3-8b", "x"], "aliases": ["", "", "", ""]})
    pd.DataFrame({"model": ["GPT-4 Turbo", "LLAMA 3 8B", "x"], "score": [3.0, 2.0, 1.0]}).to_csv(tmp_path / "e.csv")
    ext = read_external(str(tmp_path / "e.csv"), models)
    # gpt4_turbo matches by key; the two llama names share a key in the workspace, so neither is guessed
    np.testing.assert_array_equal(ext.scores, [3.0, np.nan, np.nan, 1.0])
    assert ext.matched == 2 and ext.normalised == 1


def test_bootstrap_compare_reports_table_4(files, capsys):
    d, db, _ = files
    assert main(["bootstrap", "st", "--arena", "ar", "--reward-model", "rm-a", "--db", str(db), "--json",
                 "--B", "4", "--compare", "yes"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert [r["method"] for r in m["table4"]] == ["dualeval", "arena_bt", "static_2pl"]
    assert all(r["median_rank_ci_width"] >= 0 for r in m["table4"])


def test_evaluate_cross_reward_models_and_human_preferences(files, capsys, tmp_path):
    d, db, truth = files
    names = [f"org/model-{i:02d}" for i in range(16)]
    rng = np.random.default_rng(1)
    rows = []
    for _ in range(400):
        a, b = rng.choice(16, 2, replace=False)
        rows.append({"model_a": names[a], "model_b": names[b], "prompt": f"p{rng.integers(30)}",
                     "winner": "a" if truth["theta"][a] > truth["theta"][b] else "b"})
    pd.DataFrame(rows).to_csv(tmp_path / "prefs.csv", index=False)
    assert main(["import", "preferences", str(tmp_path / "prefs.csv"), "--db", str(db), "--benchmark", "ar"]) == 0
    capsys.readouterr()
    assert main(["evaluate", "st", "--arena", "ar", "--reward-model", "rm-a", "--db", str(db), "--json",
                 "--splits", "1", "--cross-reward-models", "yes"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    cross = m["cross_reward_models"][0]
    assert (cross["reward_model_a"], cross["reward_model_b"]) == ("rm-a", "rm-b") and cross["spearman_theta"] > 0.7
    human = {r["reward_model"]: r for r in m["reward_vs_human"]}
    stored = len(pd.DataFrame(rows).drop_duplicates(["model_a", "model_b", "prompt"]))  # one row per key is stored
    assert human["rm-a"]["n"] == stored and human["rm-a"]["agreement"] > human["rm-b"]["agreement"] > 0.5
    assert main(["evaluate", "st", "--arena", "ar", "--reward-model", "rm-a", "--db", str(db), "--splits", "1",
                 "--cross-reward-models", "yes"]) == 0
    out = capsys.readouterr().out
    assert "Appendix F" in out and "Appendix C" in out


def test_external_warning_escapes_control_characters(tmp_path, capsys):
    db = tmp_path / "w.db"
    rng = np.random.default_rng(0)
    names = ["evil\x1b]0;pwned\x07", "ok/model-1", "ok/model-2", "ok/model-3"]
    pd.DataFrame([{"model": n, "item": f"q{q}", "correct": int(rng.random() < 0.5)} for n in names
                  for q in range(30)]).to_csv(tmp_path / "r.csv", index=False)
    pd.DataFrame({"model": ["nobody"], "score": [1.0]}).to_csv(tmp_path / "e.csv", index=False)
    assert main(["import", "long", str(tmp_path / "r.csv"), "--db", str(db), "--benchmark", "b"]) == 0
    capsys.readouterr()
    assert main(["fit", "static", "b", "--db", str(db), "--no-heldout", "--external", str(tmp_path / "e.csv")]) == 0
    warning = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("warning: --external"))
    # the ranking table is the output layer's (escaped there); the warning line quotes model names itself
    assert "matched only 0 of 4" in warning and "\x1b" not in warning and "\x07" not in warning


def test_compress_prints_recovery_curves_beside_random(files, capsys):
    d, db, _ = files
    assert main(["compress", "st", "--db", str(db), "--seeds", "3"]) == 0
    out = capsys.readouterr().out
    assert "Subset recovery" in out and "targeted" in out and "random 95%" in out
