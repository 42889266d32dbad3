"""Issue 23 through the command line, on real processes' files: `fit bt --external` on imported preferences,
`evaluate` on an arena-only benchmark, `contamination` metadata keys, `compress` and `anomalies --protocol`
on a multiple-choice workspace with chance levels."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchloupe.cli.main import main


def _battles(d, n_models=6, n=900, seed=0):
    rng = np.random.default_rng(seed)
    strength = np.linspace(-1.5, 1.5, n_models)
    names = [f"lab/m{i}" for i in range(n_models)]
    rows = []
    for q in range(n):
        i, j = rng.choice(n_models, 2, replace=False)
        p = 1 / (1 + np.exp(-(strength[i] - strength[j])))
        rows.append({"model_a": names[i], "model_b": names[j], "winner": "model_a" if rng.random() < p else "model_b",
                     "question_id": f"q{q}"})
    pd.DataFrame(rows).to_csv(d / "battles.csv", index=False)
    pd.DataFrame({"model": names, "score": strength}).to_csv(d / "official.csv", index=False)
    return names


def test_fit_bt_on_preferences_honours_external(tmp_path, capsys):
    """Before: the run's metrics had no spearman_vs_external (KeyError) although --external was given."""
    _battles(tmp_path)
    db = str(tmp_path / "w.db")
    assert main(["import", "battles", str(tmp_path / "battles.csv"), "--db", db, "--benchmark", "arena"]) == 0
    capsys.readouterr()
    assert main(["fit", "bt", "arena", "--db", db, "--external", str(tmp_path / "official.csv"), "--bootstrap", "0",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "bt-pref"
    assert out["metrics"]["spearman_vs_external"] == pytest.approx(1.0)
    assert out["metrics"]["external_matched"] == 6


def _arena_rewards(d, n_models=8, n_items=40, seed=1):
    rng = np.random.default_rng(seed)
    theta = np.linspace(-1, 1, n_models)
    rows = [{"model": f"lab/m{i}", "prompt": f"p{q}", "reward": float(theta[i] + rng.normal(0, 0.5))}
            for i in range(n_models) for q in range(n_items)]
    pd.DataFrame(rows).to_csv(d / "rewards.csv", index=False)


def test_evaluate_on_an_arena_only_benchmark_says_what_is_missing(tmp_path, capsys):
    """Before: two rows (Arena BT, Arena Avg Reward) and no word on DualEval or the static rows."""
    _arena_rewards(tmp_path)
    db = str(tmp_path / "w.db")
    assert main(["import", "arena", str(tmp_path / "rewards.csv"), "--db", db, "--benchmark", "chat"]) == 0
    capsys.readouterr()
    assert main(["evaluate", "chat", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "Arena BT" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("warning:") and "DualEval" in ln)
    assert "Static 2PL" in line and "arena data only" in line and "--arena chat" in line and "import" in line
    capsys.readouterr()
    assert main(["evaluate", "chat", "--db", db, "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["missing_methods"] == ["DualEval", "Static 2PL"]


def _dated(d, item_key="released", model_key="knowledge_cutoff", model_dates=True):
    rng = np.random.default_rng(4)
    n_models, n_items = 12, 160
    theta, b = np.sort(rng.normal(size=n_models)), rng.normal(size=n_items)
    y = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-1.3 * (theta[:, None] - b)))).astype(int)
    days = pd.to_datetime("2022-01-01") + pd.to_timedelta(rng.integers(0, 900, n_items), unit="D")
    cut = pd.to_datetime("2022-07-01") + pd.to_timedelta(rng.integers(0, 300, n_models), unit="D")
    names = [f"lab/m{i}" for i in range(n_models)]
    pd.DataFrame([{"model": names[i], "item": f"q{q}", "correct": y[i, q]} for i in range(n_models)
                  for q in range(n_items)]).to_csv(d / "res.csv", index=False)
    pd.DataFrame({"key": [f"q{q}" for q in range(n_items)], item_key: days.strftime("%Y-%m-%d"),
                  "difficulty": rng.integers(1, 5, n_items)}).to_csv(d / "items.csv", index=False)
    models = {"name": names, "params": rng.integers(1, 70, n_models)}
    if model_dates:
        models[model_key] = cut.strftime("%Y-%m")
    pd.DataFrame(models).to_csv(d / "models.csv", index=False)
    db = str(d / "w.db")
    assert main(["import", "long", str(d / "res.csv"), "--db", db, "--benchmark", "b",
                 "--models-file", str(d / "models.csv")]) == 0
    assert main(["import", "items", str(d / "items.csv"), "--db", db, "--benchmark", "b"]) == 0
    return db


def test_contamination_uses_the_single_date_key_of_each_side_and_says_so(tmp_path, capsys):
    """Before: "no item of 'b' has a 'date' date in its metadata" (and then a second failed run for the cutoff)."""
    db = _dated(tmp_path)
    capsys.readouterr()
    assert main(["contamination", "b", "--db", db, "--n-boot", "200", "--n-perm", "200", "--refit-without", "no"]) == 0
    out = capsys.readouterr().out
    assert "note: item dates: metadata key 'released', the only date-valued item key" in out
    assert "note: model cutoffs: metadata key 'knowledge_cutoff'" in out
    capsys.readouterr()
    assert main(["contamination", "b", "--db", db, "--n-boot", "200", "--n-perm", "200", "--refit-without", "no",
                 "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["date_key"] == "released" and m["cutoff_key"] == "knowledge_cutoff" and m["dated_items"] == 160


def test_contamination_lists_the_keys_of_both_sides_in_one_line(tmp_path, capsys):
    db = _dated(tmp_path, model_dates=False)
    capsys.readouterr()
    assert main(["contamination", "b", "--db", db]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "Item metadata keys: difficulty, released (date)" in err
    assert "Model metadata keys:" in err and "params" in err and "no model key holds dates" in err
    assert "--date-key KEY" in err and "--cutoff-key KEY" in err
    assert main(["contamination", "b", "--db", db, "--date-key", "nope", "--cutoff-key", "params"]) == 1
    err = capsys.readouterr().err
    assert "no item has metadata key 'nope'" in err


def _mc_workspace(d, c=0.25, n_models=150, n_items=60, seed=5, stated=None):
    """A four-way multiple-choice benchmark: results (long CSV) and an item file with chance = 1/4 (responses
    simulated with lower asymptote ``c``; the item file states ``stated``, ``c`` when None)."""
    rng = np.random.default_rng(seed)
    theta, b, a = rng.normal(size=n_models), rng.normal(0.3, 1, n_items), np.exp(rng.normal(0.3, 0.3, n_items))
    y = (rng.random((n_models, n_items)) < c + (1 - c) / (1 + np.exp(-a * (theta[:, None] - b)))).astype(int)
    pd.DataFrame([{"model": f"org/m{i}", "item": f"q{q}", "correct": y[i, q]} for i in range(n_models)
                  for q in range(n_items)]).to_csv(d / "mc.csv", index=False)
    pd.DataFrame({"key": [f"q{q}" for q in range(n_items)], "chance": c if stated is None else stated}).to_csv(
        d / "mc_items.csv", index=False)
    db = str(d / "mc.db")
    assert main(["import", "long", str(d / "mc.csv"), "--db", db, "--benchmark", "mc"]) == 0
    assert main(["import", "items", str(d / "mc_items.csv"), "--db", db, "--benchmark", "mc"]) == 0
    return db


def test_anomalies_protocol_prints_the_whole_table_with_ceilings(tmp_path, capsys):
    """Before: only protocol_min_auroc_clean_reference_static (KeyError: 'protocol')."""
    db = _mc_workspace(tmp_path)
    capsys.readouterr()
    assert main(["anomalies", "mc", "--db", db, "--protocol", "yes", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = pd.DataFrame(out["protocol"])
    static = rows[rows.target == "static"]
    assert len(static) == 16  # 4 rates x 2 detectors x (guessing-aware, 2PL)
    assert set(static.p_model) == {"guessing", "2pl"} and set(static.detector) == {"clean_reference",
                                                                                  "contaminated_fit"}
    assert sorted(set(static.rate)) == [0.005, 0.01, 0.02, 0.05]
    assert static[["auroc", "auprc", "ceiling_auroc", "ceiling_auprc", "below_ceiling"]].notna().all().all()
    assert (static.ceiling_auroc < 0.99).all()  # under guessing the paper's .995 is out of reach
    m = out["metrics"]
    assert m["protocol_ceiling_auroc_max"] < 0.99 and m["protocol_max_below_ceiling_clean_reference"] < 0.03
    capsys.readouterr()
    assert main(["anomalies", "mc", "--db", db, "--protocol", "yes"]) == 0
    text = capsys.readouterr().out
    assert "Synthetic contamination protocol" in text and "ceiling AUROC" in text and "contaminated_fit" in text


def test_compress_reports_margins_and_the_chance_it_used(tmp_path, capsys):
    db = _mc_workspace(tmp_path)
    capsys.readouterr()
    assert main(["compress", "mc", "--db", db, "--seeds", "5", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["items_with_chance"] == 60 and m["mean_chance"] == 0.25 and m["chance_mode"] == "stated"
    assert m["selection"].startswith("targeted (default)")
    assert m["versus_random"]["targeted"]["below"] == []
    assert set(m["versus_random"]) >= {"targeted", "top_fisher", "targeted_log"}
    capsys.readouterr()
    assert main(["compress", "mc", "--db", db, "--chance", "none", "--recovery", "no", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["items_with_chance"] == 0 and m["chance_mode"] == "none"


def test_fit_compress_and_anomalies_warn_when_the_data_reject_the_stated_chance(tmp_path, capsys):
    """Issue 32: data simulated with c = .08 and stated at .25 (the old rule fired only below half the stated
    chance with its floor's slack: silent).  Every run that resolves the chance warns with both numbers and the
    log-likelihood gain; the protocol's ceiling is simulated with the estimate (it said "not a ceiling" before:
    tests/integration/test_protocol_ceiling.py); with --chance estimate nothing advises --chance estimate."""
    db = _mc_workspace(tmp_path, c=0.08, stated=0.25)
    for argv in (["fit", "static", "mc"], ["compress", "mc", "--recovery", "no"]):
        capsys.readouterr()
        assert main([*argv, "--db", db]) == 0
        out = capsys.readouterr().out
        warn = [ln for ln in out.splitlines() if ln.startswith("warning: the data reject the stated chance")]
        assert len(warn) == 1, out
        assert "level 0.250" in warn[0] and "log-likelihood gain of" in warn[0] and "--chance estimate" in warn[0]
        assert "oracle ceiling is simulated with the estimate" in warn[0]
    capsys.readouterr()
    assert main(["anomalies", "mc", "--db", db, "--protocol", "yes", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["chance_test_rejected"] is True and m["chance_test_estimate"] < 0.2 and m["chance_test_loglik_gain"] > 5
    assert m["protocol_ceiling_holds"] is True and m["protocol_ceiling_chance"].startswith("estimated asymptote")
    capsys.readouterr()
    assert main(["anomalies", "mc", "--db", db, "--protocol", "yes", "--chance", "estimate", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert not any("--chance estimate" in w for w in m.get("warnings", []))
    assert "chance_test_rejected" not in m and m["chance_estimated"] < 0.2


def test_a_true_stated_chance_gives_no_chance_warning(tmp_path, capsys):
    db = _mc_workspace(tmp_path, c=0.25)
    capsys.readouterr()
    assert main(["fit", "static", "mc", "--db", db, "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["chance_test_rejected"] is False and abs(m["chance_test_estimate"] - 0.25) < 0.05
    assert not any("chance" in w for w in m.get("warnings", []))
