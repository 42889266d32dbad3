"""Bradley-Terry on pairwise preferences (engine.pairwise, jobs.pairwise; issue 12): ground truth from
simulated battles, the MM fixed-point equation of Hunter (2004), ties as half wins, bootstrap coverage, and
`fit bt` on imported battles."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchloupe.cli.main import main
from benchloupe.engine.common import EngineError
from benchloupe.engine.pairwise import PairwiseData, aggregate, fit_bt


def _battles(n_models=12, n=40_000, seed=0):
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_models)
    theta -= theta.mean()
    a = rng.integers(0, n_models, n)
    b = rng.integers(0, n_models - 1, n)
    b = b + (b >= a)
    p = (rng.random(n) < 1 / (1 + np.exp(-(theta[a] - theta[b])))).astype(float)
    return theta, PairwiseData(a, b, p, n_models)


def test_recovers_simulated_strengths():
    theta, data = _battles()
    res = fit_bt(data, alpha=0.0)
    assert res.converged and np.abs(res.theta - theta).max() < 0.08  # ~3 se at 40k battles / 12 models


def test_solution_is_the_mm_fixed_point():
    """Hunter's MM update leaves the maximum-likelihood strengths unchanged (alpha = 0)."""
    _, data = _battles(n_models=6, n=3000, seed=3)
    res = fit_bt(data, alpha=0.0, tol=1e-12)
    W, N = aggregate(data.a, data.b, data.p, data.n_models)
    pi = np.exp(res.theta)
    update = W.sum(axis=1) / (N / (pi[:, None] + pi[None, :])).sum(axis=1)
    assert np.allclose(np.log(update) - np.log(update).mean(), res.theta, atol=1e-9)


def test_a_tie_is_half_a_win_each_way():
    tie = fit_bt(PairwiseData(np.array([0, 0]), np.array([1, 1]), np.array([0.5, 0.5]), 2), alpha=0.0)
    assert np.allclose(tie.theta, 0)
    one_each = fit_bt(PairwiseData(np.array([0, 0, 1]), np.array([1, 1, 0]), np.array([1.0, 0.5, 0.5]), 2),
                      alpha=0.0)
    # 0 has 1.5 + 0.5 = 2 of 3 "wins": P = 2/3, theta difference log 2
    assert np.isclose(one_each.theta[0] - one_each.theta[1], np.log(2))


def test_a_model_that_always_wins_stays_finite_with_the_prior():
    res = fit_bt(PairwiseData(np.array([0, 0, 1]), np.array([1, 2, 2]), np.array([1.0, 1.0, 0.5]), 3))
    assert np.isfinite(res.theta).all() and res.theta[0] > res.theta[1]


def test_bootstrap_intervals_cover_the_truth():
    theta, data = _battles(n=8000, seed=5)
    res = fit_bt(data, bootstrap=100, seed=2)
    inside = (res.lo <= theta) & (theta <= res.hi)
    assert inside.mean() >= 0.75 and (res.se > 0).all()


@pytest.mark.parametrize("data", [
    PairwiseData(np.array([0]), np.array([0]), np.array([1.0]), 2),
    PairwiseData(np.array([0]), np.array([1]), np.array([1.5]), 2),
    PairwiseData(np.array([], int), np.array([], int), np.array([]), 2),
])
def test_bad_comparisons_are_refused(data):
    with pytest.raises(EngineError):
        fit_bt(data)


def test_fit_bt_on_imported_battles(tmp_path, capsys):
    rng = np.random.default_rng(0)
    names = ["gpt-4", "claude-2", "vicuna-13b", "llama-2-7b"]
    strength = {"gpt-4": 1.5, "claude-2": 1.0, "vicuna-13b": 0.0, "llama-2-7b": -1.0}
    battles = []
    for k in range(600):
        x, y = rng.choice(names, 2, replace=False)
        d = strength[x] - strength[y]
        u = rng.random()
        winner = "tie" if u < 0.1 else "model_a" if rng.random() < 1 / (1 + np.exp(-d)) else "model_b"
        battles.append({"model_a": x, "model_b": y, "winner": winner, "judge": f"u{k % 7}", "question_id": f"q{k}"})
    path = tmp_path / "clean_battle.json"
    path.write_text(json.dumps(battles))
    db = str(tmp_path / "w.db")
    assert main(["import", "battles", str(path), "-b", "arena", "--db", db]) == 0
    capsys.readouterr()
    assert main(["fit", "bt", "arena", "--db", db, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ranking = [r["name"] for r in sorted(out["ranking"], key=lambda r: r["rank"])]
    assert ranking == names and out["metrics"]["comparisons"] == 600
    assert all(r["lo"] <= r["theta"] <= r["hi"] for r in out["ranking"])


def test_dualeval_arena_term_on_preferences_recovers_abilities():
    """Extension: preferences as the DualEval arena pairs (p* = P(a beats b)); arena-only and joint fits."""
    from benchloupe.engine.joint import ArenaData, JointConfig, StaticData, fit_joint
    from benchloupe.engine.pairwise import preference_pairs

    rng = np.random.default_rng(4)
    n_models, n_prompts, n = 10, 60, 6000
    theta = rng.normal(0, 1, n_models)
    a = rng.integers(0, n_models, n)
    b = rng.integers(0, n_models - 1, n)
    b = b + (b >= a)
    q = rng.integers(0, n_prompts, n)
    p = (rng.random(n) < 1 / (1 + np.exp(-1.5 * (theta[a] - theta[b])))).astype(float)
    pairs = preference_pairs(a, b, q, p, n_models, n_prompts)
    assert (pairs.i < pairs.j).all() and pairs.decisive.all()
    arena = ArenaData(np.full((n_models, n_prompts), np.nan), preference_pairs=pairs)
    res = fit_joint(None, arena, JointConfig(mode="arena"))
    assert np.corrcoef(res.theta, theta)[0, 1] > 0.97
    b_static = rng.normal(0, 1, 80)
    correct = (rng.random((n_models, 80)) < 1 / (1 + np.exp(-(theta[:, None] - b_static)))).astype(float)
    joint = fit_joint(StaticData(correct, np.ones_like(correct, bool)), arena, JointConfig(mode="joint"))
    assert np.corrcoef(joint.theta, theta)[0, 1] > 0.97 and np.isfinite(joint.gamma)


def test_fit_arena_and_joint_on_imported_preferences(tmp_path, capsys):
    """`fit arena` / `fit joint --arena` on a benchmark with preferences and no rewards (was: "no arena rewards")."""
    rng = np.random.default_rng(1)
    names = ["gpt-4", "claude-2", "vicuna-13b", "llama-2-7b"]
    strength = dict(zip(names, [1.5, 1.0, 0.0, -1.0]))
    battles = []
    for k in range(800):
        x, y = rng.choice(names, 2, replace=False)
        win = rng.random() < 1 / (1 + np.exp(-(strength[x] - strength[y])))
        battles.append({"model_a": x, "model_b": y, "winner": "model_a" if win else "model_b",
                        "question_id": f"q{k % 40}", "judge": f"u{k}"})
    (tmp_path / "b.json").write_text(json.dumps(battles))
    static = "model,item,correct\n" + "".join(
        f"{m},s{i},{int(rng.random() < 1 / (1 + np.exp(-(strength[m] - (i % 5 - 2) * 0.5))))}\n"
        for m in names for i in range(30))
    (tmp_path / "s.csv").write_text(static)
    db = str(tmp_path / "w.db")
    assert main(["import", "battles", str(tmp_path / "b.json"), "-b", "prefs", "--db", db]) == 0
    assert main(["import", "long", str(tmp_path / "s.csv"), "-b", "stat", "--db", db]) == 0
    capsys.readouterr()
    for args in (["fit", "arena", "prefs"], ["fit", "joint", "stat", "--arena", "prefs"]):
        assert main([*args, "--db", db, "--json", "--no-heldout"]) == 0, args
        out = json.loads(capsys.readouterr().out)
        ranking = [r["name"] for r in sorted(out["ranking"], key=lambda r: r["rank"])]
        assert ranking == names, (args, ranking)


def _imported_battles(tmp_path, n=300):
    rng = np.random.default_rng(1)
    names = ["gpt-4", "claude-2", "vicuna-13b"]
    battles = []
    for k in range(n):
        x, y = rng.choice(names, 2, replace=False)
        battles.append({"model_a": x, "model_b": y, "winner": "model_a" if rng.random() < 0.6 else "model_b",
                        "question_id": f"q{k}"})
    path = tmp_path / "battles.json"
    path.write_text(json.dumps(battles))
    db = str(tmp_path / "w.db")
    assert main(["import", "battles", str(path), "-b", "arena", "--db", db]) == 0
    return db


def _run_config(db, run_id):
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return runs.get_run(conn, run_id)
    finally:
        conn.close()


def test_fit_bt_bootstrap_and_prior_alpha_options(tmp_path, capsys):
    """`fit bt --bootstrap N --prior-alpha A` on preferences: N replicates (0 = no intervals), the prior's
    strength, both recorded in the run's config and metrics; --seed seeds the bootstrap."""
    db = _imported_battles(tmp_path)
    capsys.readouterr()
    assert main(["fit", "bt", "arena", "--db", db, "--json", "--bootstrap", "0", "--prior-alpha", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metrics"]["bootstrap"] == 0 and out["metrics"]["alpha"] == 0.0
    assert all(r.get(k) is None for r in out["ranking"] for k in ("lo", "hi", "se"))
    run = _run_config(db, out["run_id"])
    assert run["config"]["bootstrap"] == 0 and run["config"]["alpha"] == 0.0

    assert main(["fit", "bt", "arena", "--db", db, "--json", "--bootstrap", "30", "--prior-alpha", "2.5",
                 "--seed", "7"]) == 0
    out = json.loads(capsys.readouterr().out)
    run = _run_config(db, out["run_id"])
    assert run["config"]["bootstrap"] == 30 and run["config"]["alpha"] == 2.5 and run["seed"] == 7
    assert all(r["lo"] <= r["theta"] <= r["hi"] for r in out["ranking"])
    # a stronger prior pulls the strengths towards the reference
    assert main(["fit", "bt", "arena", "--db", db, "--json", "--bootstrap", "0", "--prior-alpha", "500"]) == 0
    shrunk = json.loads(capsys.readouterr().out)
    spread = lambda o: np.ptp([r["theta"] for r in o["ranking"]])  # noqa: E731
    assert spread(shrunk) < spread(out)


@pytest.mark.parametrize("extra, needle", [
    (["--bootstrap", "-1"], "--bootstrap"),
    (["--bootstrap", "1"], "--bootstrap"),
    (["--bootstrap", "100000000"], "--bootstrap"),
    (["--prior-alpha", "-0.5"], "--prior-alpha"),
    (["--prior-alpha", "nan"], "--prior-alpha"),
    (["--prior-alpha", "inf"], "--prior-alpha"),
])
def test_fit_bt_bad_bootstrap_or_alpha_is_one_line(tmp_path, capsys, extra, needle):
    db = _imported_battles(tmp_path, n=30)
    before = open(db, "rb").read()
    capsys.readouterr()
    assert main(["fit", "bt", "arena", "--db", db, *extra]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and "Traceback" not in err[0]
    assert open(db, "rb").read() == before


def test_bootstrap_options_are_refused_where_they_do_not_apply(tmp_path, capsys):
    db = _imported_battles(tmp_path, n=30)
    capsys.readouterr()
    assert main(["fit", "static", "arena", "--db", db, "--bootstrap", "10"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fit bt" in err[0]


def test_engine_fit_bt_refuses_bad_alpha_and_bootstrap():
    _, data = _battles(n_models=3, n=100)
    for kw in ({"alpha": float("nan")}, {"alpha": -1.0}, {"bootstrap": -2}):
        with pytest.raises(EngineError):
            fit_bt(data, **kw)


def test_bootstrap_options_are_refused_on_a_rewards_benchmark(tmp_path, capsys):
    """`fit bt` on arena rewards fits the reward-derived pairs, which have no bootstrap or prior: say so."""
    path = tmp_path / "arena.csv"
    path.write_text("model,prompt,reward\n" + "".join(f"m{i},p{j},{(i * 7 + j * 3) % 5 / 5}\n"
                                                       for i in range(4) for j in range(6)))
    db = str(tmp_path / "w.db")
    assert main(["import", "arena", str(path), "-b", "ar", "--db", db]) == 0
    capsys.readouterr()
    assert main(["fit", "bt", "ar", "--db", db, "--bootstrap", "10"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "arena rewards" in err[0]
    assert main(["db", "check", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"]["runs"] == 0
