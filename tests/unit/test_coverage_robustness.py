"""Paper 003's robustness analyses (C.3 leave-one-out, C.5 BIC, C.3 prior variants, D.1, E.2) on simulated data
with known structure, and their place in `benchloupe coverage` / `benchloupe calibrate` runs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from benchloupe.cli.main import main
from benchloupe.engine.common import EngineError
from benchloupe.engine.coverage import analyse
from benchloupe.engine.coverage import robustness as rb
from benchloupe.engine.irt import fit_1pl
from tests.unit.test_coverage_trust import import_matrix


def _sim(m, n, a=None, dims=1, seed=0):
    rng = np.random.default_rng(seed)
    th = rng.normal(0, 1, (m, dims))
    b = rng.normal(0, 1, n)
    A = np.ones((n, dims)) if a is None else a
    return (rng.random((m, n)) < 1 / (1 + np.exp(-(th @ A.T - b)))).astype(float)


# ------------------------------------------------------------------------------------------- C.3 LOO


def test_loo_exact_refits_are_the_definition():
    y = _sim(15, 120, seed=1)
    fit = fit_1pl(y)
    loo = rb.leave_one_out(fit, y, method="exact")
    j = 4
    ref = fit_1pl(np.delete(y, j, axis=0)).b
    row = loo.table.iloc[j]
    assert row.pearson == pytest.approx(np.corrcoef(ref, fit.b)[0, 1], abs=1e-7)
    assert row.spearman == pytest.approx(stats.spearmanr(rb.tie_ranks(ref), rb.tie_ranks(fit.b))[0], abs=1e-7)
    z = np.sort((ref - ref.min()) / (ref.max() - ref.min()))
    assert row.ddm == pytest.approx(np.mean(np.abs(z - (np.arange(1, 121) - 0.5) / 120)), abs=1e-7)
    assert row.max_gap == pytest.approx(np.diff(np.concatenate([[0], z, [1]])).max(), abs=1e-7)
    assert loo.summary["pearson_min"] == pytest.approx(loo.table.pearson.min())
    assert len(loo.persistence) == 5 and np.all((0 <= loo.persistence) & (loo.persistence <= 1))


def test_one_step_loo_matches_exact_refits():
    y = _sim(80, 200, seed=2)
    fit = fit_1pl(y)
    ex = rb.leave_one_out(fit, y, method="exact")
    one = rb.leave_one_out(fit, y, method="one-step")
    assert np.max(np.abs(ex.table.pearson - one.table.pearson)) < 1e-4
    assert np.max(np.abs(ex.table.ddm - one.table.ddm)) < 1e-3
    assert np.max(np.abs(ex.table.max_gap - one.table.max_gap)) < 5e-3


def test_loo_folds_and_guessing():
    y = _sim(30, 150, seed=3)
    fit = fit_1pl(y, chance=0.25)
    loo = rb.leave_one_out(fit, y, chance=0.25, folds=5)
    assert loo.summary["refits"] == 5 and loo.summary["spearman_mean"] > 0.95
    with pytest.raises(EngineError, match="folds"):
        rb.leave_one_out(fit, y, folds=1)


# ------------------------------------------------------------------------------------------- C.5 BIC


def test_bic_picks_the_generating_model():
    rng = np.random.default_rng(4)
    assert rb.compare_models(_sim(1000, 40, seed=5)).selected == "1pl"
    two = rb.compare_models(_sim(1000, 40, a=np.exp(rng.normal(0, 0.7, (40, 1))), seed=6))
    assert two.selected == "2pl" and two.one_pl_clearly_worse and "warning" in two.summary
    a = np.zeros((300, 2))
    a[:150, 0] = 2.0
    a[150:, 1] = 2.0
    assert rb.compare_models(_sim(300, 300, a=a, dims=2, seed=7)).selected == "mirt2"


def test_bic_table_is_the_formula():
    y = _sim(20, 60, seed=8)
    cm = rb.compare_models(y, models=("1pl", "2pl"))
    t = cm.table.set_index("model")
    assert t.loc["1pl", "params"] == 80 and t.loc["2pl", "params"] == 140
    assert t.loc["2pl", "bic"] == pytest.approx(-2 * t.loc["2pl", "loglik"] + 140 * np.log(1200))
    assert t.loc["2pl", "loglik"] >= t.loc["1pl", "loglik"] - 1.0  # more slopes never fit much worse


# ------------------------------------------------------------------------------------------- prior variants


def test_hierarchical_priors_reach_their_joint_mode():
    y = _sim(40, 200, seed=9)
    fit = fit_1pl(y)
    ps = rb.prior_sensitivity(fit, y, variants=("hierarchical_theta",))
    row = ps.table.iloc[1]
    f = ps.fits["hierarchical_theta"]
    # stationarity of mu and sigma given theta (mu ~ N(0,1), sigma ~ HalfNormal(1))
    mu, sigma = row.mu, row.sigma
    assert np.sum(f.theta - mu) / sigma**2 - mu == pytest.approx(0, abs=1e-4)
    assert -f.theta.size / sigma + np.sum((f.theta - mu) ** 2) / sigma**3 - sigma == pytest.approx(0, abs=1e-3)
    assert row.spearman > 0.99 and ps.summary["ddm_shift_max"] < 0.02


# ------------------------------------------------------------------------------------------- D.1 and E.2


def test_calibration_experiment_rows():
    rng = np.random.default_rng(10)
    m, n = 20, 200
    ability = rng.normal(0, 1, m)
    b = np.concatenate([rng.normal(-1.5, 0.3, 160), rng.uniform(-2, 2, 40)])
    s = (rng.random((m, n)) < 1 / (1 + np.exp(-(ability[:, None] - b)))).astype(float)
    z = (b - b.min()) / (b.max() - b.min())
    ex = rb.calibration_experiment(s, z, ability, k=50).set_index("variant")
    assert ex.loc["Cal.", "w1"] < ex.loc["Random", "w1"] and ex.loc["Cal.", "w1"] < ex.loc["Full", "w1"]
    assert ex.loc["Full", "spearman"] == pytest.approx(stats.spearmanr(s.mean(1), ability)[0])
    curve = rb.calibration_curve(z, ks=[20, 50, 100], item_scores=s, reference=ability)
    assert list(curve.k) == [20, 50, 100] and np.all(curve.w1_reduction > 0)


def test_improvement_test_is_the_permutation_test():
    rng = np.random.default_rng(11)
    pre = rng.binomial(8, 0.4, 6)
    post = rng.binomial(8, 0.6, 6)
    res = rb.improvement_test(pre, np.full(6, 8), post, np.full(6, 8), n_permutations=200_000, seed=1)
    # brute force: permute the 16 rollout outcomes of each item
    outcomes = [np.r_[np.ones(p + q), np.zeros(16 - p - q)] for p, q in zip(pre, post, strict=True)]
    obs = post.sum() / 48 - pre.sum() / 48
    hits = 0
    for _ in range(20_000):
        g = 0.0
        for o in outcomes:
            perm = rng.permutation(o)
            g += perm[8:].sum() - perm[:8].sum()
        hits += g / 48 >= obs - 1e-12
    assert res["gain"] == pytest.approx(obs)
    assert res["p_value"] == pytest.approx(hits / 20_000, abs=0.012)
    null = rb.improvement_test([5] * 30, [32] * 30, [5] * 30, [32] * 30, n_permutations=10_000)
    assert null["p_value"] > 0.4
    with pytest.raises(EngineError, match="between 0"):
        rb.improvement_test([9], [8], [1], [8])


# ------------------------------------------------------------------------------------------- in runs


def test_coverage_run_stores_robustness(tmp_path, capsys):
    y = _sim(25, 120, seed=12)
    db = tmp_path / "r.db"
    import_matrix(db, "sim", y)
    assert main(["coverage", "sim", "--db", str(db), "--robustness", "all", "--n-draws", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rob = out["metrics"]["robustness"]
    assert set(rob) == {"loo", "bic", "priors"} and rob["loo"]["refits"] == 25
    assert rob["bic"]["selected"] == "1pl"
    assert main(["coverage", "sim", "--db", str(db), "--robustness", "nope"]) == 1
    assert "unknown robustness analysis" in capsys.readouterr().err
    a = analyse(y)
    assert out["metrics"]["ddm"] == pytest.approx(a.report.ddm)


def test_calibrate_runs_the_d1_experiment_against_other_benchmarks(tmp_path, capsys):
    rng = np.random.default_rng(13)
    m = 12
    ability = rng.normal(0, 1, m)
    names = [f"model-{i}" for i in range(m)]

    def bench(b):
        return (rng.random((m, b.size)) < 1 / (1 + np.exp(-(ability[:, None] - b)))).astype(float)

    db = tmp_path / "d1.db"
    import_matrix(db, "src", bench(np.concatenate([rng.normal(-1.5, 0.3, 120), rng.uniform(-2, 2, 30)])),
                  models=names)
    import_matrix(db, "ref-a", bench(rng.normal(0, 1, 80)), models=names)
    import_matrix(db, "ref-b", bench(rng.normal(0, 1, 80)), models=names[::-1])
    assert main(["coverage", "src", "--db", str(db), "--uncertainty", "none"]) == 0
    capsys.readouterr()
    assert main(["calibrate", "src", "--db", str(db), "--reference", "ref-a,ref-b", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    exp = out["metrics"]["experiment"]
    assert set(exp) == {"Full", "Random", "Cal."} and out["metrics"]["experiment_models"] == m
    assert exp["Cal."]["w1"] < exp["Full"]["w1"]
    assert {"w1_reduction", "spearman_cal", "spearman_random"} <= set(out["sweep"][0])
    assert main(["calibrate", "src", "--db", str(db), "--reference", "src"]) == 1
    assert "other benchmarks" in capsys.readouterr().err


def test_coverage_run_e2_improvement_test(tmp_path, capsys):
    rng = np.random.default_rng(14)
    n = 30
    b = rng.normal(0, 1, n)
    t = np.full((4, n), 32)
    p = 1 / (1 + np.exp(-(np.array([[-0.5], [0.5], [0.0], [0.0]]) - b)))
    p[3] += np.where(np.abs(b) < 0.5, 0.3, 0.0) * (1 - p[3])  # "post": a localised improvement
    s = rng.binomial(t, np.clip(p, 0, 1))
    db = tmp_path / "e2.db"
    import_matrix(db, "aime", successes=s, trials=t, models=["m-a", "m-b", "pre", "post"])
    assert main(["coverage", "aime", "--db", str(db), "--uncertainty", "none", "--improvement", "pre,post",
                 "--permutations", "20000", "--json"]) == 0
    it = json.loads(capsys.readouterr().out)["metrics"]["improvement_test"]
    ref = rb.improvement_test(s[2], t[2], s[3], t[3], n_permutations=20000)
    assert it["original"]["gain"] == pytest.approx(ref["gain"]) and it["original"]["p_value"] < 0.05
    assert main(["coverage", "aime", "--db", str(db), "--improvement", "pre,nobody"]) == 1
    assert "nobody" in capsys.readouterr().err


def test_coverage_run_with_a_hierarchical_prior(tmp_path, capsys):
    y = _sim(30, 150, seed=15)
    db = tmp_path / "h.db"
    import_matrix(db, "sim", y)
    assert main(["coverage", "sim", "--db", str(db), "--prior", "hierarchical_theta", "--uncertainty", "none",
                 "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    ref = rb.prior_sensitivity(fit_1pl(y), y, variants=("hierarchical_theta",)).table.iloc[1]
    assert m["prior"]["prior"] == "hierarchical_theta" and m["prior"]["converged"]
    assert m["prior"]["sigma"] == pytest.approx(ref.sigma, abs=1e-6)
    assert m["ddm"] == pytest.approx(ref.ddm, abs=1e-6) and m["max_gap"] == pytest.approx(ref.max_gap, abs=1e-6)
    with pytest.raises(SystemExit) as exit_:  # a choice outside --prior's list is a usage error: exit 2
        main(["coverage", "sim", "--db", str(db), "--prior", "flat"])
    assert exit_.value.code == 2 and "--prior" in capsys.readouterr().err
