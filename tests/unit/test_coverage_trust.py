"""Issue 15, "Misleading today": the sum-score lattice, tail gaps, per-gap C.6 intervals, the uniform baseline
default and arena-only benchmarks. Simulated data with known difficulties (paper 003 section 2.2, C.3, C.6)."""

from __future__ import annotations

import numpy as np
import pytest

from benchloupe.cli.main import main
from benchloupe.engine import coverage
from benchloupe.engine.common import EngineError
from benchloupe.engine.coverage import UncertaintyConfig, analyse, coverage_report


def _sim(m, n, *, seed=0, trials=1, sd_theta=1.0, sd_b=1.0, b=None, theta=None, missing=0.0):
    rng = np.random.default_rng(seed)
    th = rng.normal(0, sd_theta, m) if theta is None else theta
    bb = rng.normal(0, sd_b, n) if b is None else b
    p = 1 / (1 + np.exp(-(th[:, None] - bb[None, :])))
    t = np.full((m, n), trials)
    if missing:
        t = np.where(rng.random((m, n)) < missing, 0, t)
    c = rng.binomial(t, p)
    return th, bb, c.astype(float), t.astype(float)


def import_matrix(db, name, correct=None, *, successes=None, trials=None, models=None):
    """Write a models x items matrix into a real SQLite store through the importer's writer."""
    import pandas as pd

    from benchloupe.store.db import connect
    from benchloupe.store.importers.base import ParsedImport
    from benchloupe.store.writer import write_import

    arr = correct if correct is not None else successes
    m, n = arr.shape
    items = pd.DataFrame({"key": [f"i{j}" for j in range(n)]})
    names = pd.DataFrame({"name": models or [f"model-{i}" for i in range(m)]})
    kw = ({"correct": np.asarray(correct, np.int8)} if correct is not None else
          {"successes": np.asarray(successes, np.int32), "trials": np.asarray(trials, np.int32)})
    conn = connect(db)
    try:
        write_import(conn, ParsedImport(name, "static", items, names, source="test", **kw), fmt="test")
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------- 1. the lattice


def test_twelve_models_put_every_difficulty_on_thirteen_levels_and_diagnostics_do_not_pass_silently(tmp_path):
    _, _, c, _ = _sim(12, 6000, seed=1)
    a = analyse(c)
    lat = a.resolution.lattice
    assert lat.present and lat.n_levels <= 13 and lat.sum_score_levels == 13
    assert np.unique(np.round(a.fit.b, 9)).size <= 13
    # every positive gap lies between adjacent sum-score levels: none is a coverage gap
    g = a.resolution.gaps
    assert g.loc[g.width > 0, "below_resolution"].all()
    assert a.resolution.max_gap_trusted == 0.0
    assert any(w.startswith("lattice:") for w in a.resolution.warnings)
    # the floors: the max gap of the fit is the level spacing, DDM sits above its floor
    assert a.report.max_gap == pytest.approx(lat.max_gap_floor, abs=1e-6)
    assert 0 < lat.ddm_floor <= a.report.ddm
    # the C.3 checks alone pass on such a matrix (that is what misled); the run's verdict does not
    assert a.diagnostics.passed


def test_the_run_verdict_fails_on_a_lattice(tmp_path):
    from benchloupe.store.db import connect

    _, _, c, _ = _sim(12, 3000, seed=2)
    db = tmp_path / "lat.db"
    import_matrix(db, "lat", c)
    from benchloupe import jobs
    from benchloupe.jobs.coverage import CoverageConfig

    rid = jobs.ANALYSES["coverage"].run(db, "lat", CoverageConfig(n_draws=50))
    from benchloupe.store import runs

    conn = connect(db)
    m = runs.get_run(conn, rid)["metrics"]
    conn.close()
    assert m["lattice"] is True and m["c3_passed"] is True and m["diagnostics_passed"] is False
    assert any(w.startswith("lattice:") for w in m["warnings"])


def test_an_unoccupied_sum_score_makes_a_real_gap_on_the_lattice():
    # 12 models; items at every sum score except 4, 5 and 6: the gap spanning those scores is real
    rng = np.random.default_rng(3)
    cols = []
    for s in range(13):
        if s in (4, 5, 6):
            continue
        for _ in range(30):
            col = np.zeros(12)
            col[rng.choice(12, s, replace=False)] = 1
            cols.append(col)
    c = np.stack(cols, axis=1)
    a = analyse(c)
    g = a.resolution.gaps
    real = g[(g.width > 0) & ~g.below_resolution]
    assert len(real) == 1
    sums = c.sum(0)
    assert {sums[int(real.lo_item.iloc[0])], sums[int(real.hi_item.iloc[0])]} == {7.0, 3.0}
    assert real.index[0] == 0  # it is also the widest gap


def test_no_lattice_with_many_rollouts_or_many_models():
    _, _, c, t = _sim(60, 200, seed=4, trials=8)
    a = analyse(None, successes=c, trials=t)
    assert not a.resolution.lattice.present
    assert not any(w.startswith("lattice:") for w in a.resolution.warnings)
    _, _, c, _ = _sim(800, 150, seed=5)
    assert not analyse(c).resolution.lattice.present


def test_missing_cells_blur_but_do_not_hide_the_lattice():
    _, _, c, t = _sim(30, 3000, seed=6, missing=0.02)
    a = analyse(None, successes=c, trials=t)
    assert np.unique(np.round(a.fit.b, 9)).size > 31  # exact ties are broken by the missing cells ...
    assert a.resolution.lattice.present and a.resolution.lattice.n_levels < 80  # ... the levels are not


# ------------------------------------------------------------------------------------------- 2. tail gaps


def test_tail_flags_are_raised_exactly_for_end_and_out_of_range_gaps():
    b = np.array([-3.0, -0.5, -0.4, -0.1, 0.0, 0.3, 0.35, 0.8, 2.5, 3.0])
    r = coverage_report(b)
    theta = np.array([-1.0, 1.0])  # normalised ability range [1/3, 2/3]
    res = coverage.readout(r, theta)
    assert res.ability_lo == pytest.approx(2 / 6) and res.ability_hi == pytest.approx(4 / 6)
    g = res.gaps.set_index(["lo_item", "hi_item"])
    assert g.loc[(0, 1), "touches_end"] and g.loc[(0, 1), "tail"]  # from the easiest item
    assert g.loc[(8, 9), "touches_end"] and g.loc[(8, 9), "tail"]  # to the hardest item
    assert not g.loc[(7, 8), "touches_end"] and g.loc[(7, 8), "outside_ability"] > 0.5 and g.loc[(7, 8), "tail"]
    inside = [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6)]
    assert not g.loc[inside, "tail"].any()
    assert (6, 7) in g.index and g.loc[(6, 7), "outside_ability"] < 0.5 and not g.loc[(6, 7), "tail"]
    assert res.n_tail_gaps_topk == 3  # top 5 (raw widths): (0,1) 2.5, (7,8) 1.7, (8,9) .5, (6,7) .45, .3
    assert any(w.startswith("tail:") for w in res.warnings)
    assert res.max_gap_trusted == pytest.approx(0.45 / 6)


def test_end_gaps_inside_the_ability_range_are_not_tails():
    rng = np.random.default_rng(7)
    th = rng.normal(0, 1.5, 200)
    b = rng.uniform(-1, 1, 400)
    t = np.full((200, 400), 4)
    c = rng.binomial(t, 1 / (1 + np.exp(-(th[:, None] - b))))
    res = analyse(None, successes=c, trials=t).resolution
    assert res.ability_lo < 0 and res.ability_hi > 1
    assert res.gaps["touches_end"].sum() == 2 and not res.gaps["tail"].any()
    assert not any(w.startswith("tail:") for w in res.warnings)
    # the same items measured by models of a narrow ability range: the end gaps become tails
    th = rng.normal(0, 0.2, 200)
    c = rng.binomial(t, 1 / (1 + np.exp(-(th[:, None] - b))))
    res = analyse(None, successes=c, trials=t).resolution
    assert res.gaps.loc[res.gaps["touches_end"], "tail"].all()


def test_no_tail_warning_when_the_widest_gaps_are_inside_the_ability_range():
    b = np.concatenate([np.linspace(-1, -0.2, 40), np.linspace(0.6, 1, 20)])
    r = coverage_report(b)
    res = coverage.readout(r, np.array([-2.0, 2.0]), k=1)
    assert res.n_tail_gaps_topk == 0 and not res.warnings
    assert res.max_gap_trusted == pytest.approx(r.max_gap)


def test_gap_intervals_cover_the_true_gap_near_nominal():
    """C.6 intervals of the widest non-tail gaps against the true difficulties (posterior drawn from the prior)."""
    hits, total = 0, 0
    for seed in range(12):
        theta, b, c, t = _sim(60, 150, seed=100 + seed, trials=4)
        a = analyse(None, successes=c, trials=t, uncertainty=UncertaintyConfig(n_draws=400, seed=seed))
        g = a.resolution.gaps.head(20)
        loc = coverage.gap_locations(a.report, 20)
        zt = np.sort((b - b.min()) / (b.max() - b.min()))
        loc_t = (loc - b.min()) / (b.max() - b.min())
        pts = np.concatenate([[0.0], zt, [1.0]])
        pos = np.clip(np.searchsorted(pts, loc_t, side="right"), 1, pts.size - 1)
        true_w = np.where((loc_t >= 0) & (loc_t <= 1), pts[pos] - pts[pos - 1], 0.0)
        ok = ~g["tail"].to_numpy()
        hits += int(np.sum(((g.ci_lo <= true_w) & (true_w <= g.ci_hi)).to_numpy()[ok]))
        total += int(ok.sum())
    cover = hits / total
    assert total > 150 and 0.85 <= cover <= 0.99, cover


def test_detectability_readouts():
    theta, b, c, t = _sim(40, 300, seed=7, trials=4)
    a = analyse(None, successes=c, trials=t, uncertainty=UncertaintyConfig(n_draws=200), delta=0.1, lipschitz=2.0)
    res = a.resolution
    assert res.undetectable_width == a.report.max_gap
    assert res.b2_bound == pytest.approx(2.0 * a.report.ddm + np.sqrt(2 * np.log(2 / 0.1) / (300 * 4)))
    lo, hi = res.max_gap_ci
    assert lo < hi and lo <= a.uncertainty.max_gap_mean <= hi
    with pytest.raises(EngineError, match="delta"):
        coverage.readout(a.report, a.fit.theta, delta=1.5)


# ------------------------------------------------------------------------------------------- 3. the baseline


def test_uniform_baseline_defaults_to_the_normalised_comparison():
    """A benchmark whose difficulties are uniform has observed / baseline max gap ratio 1 on average only when
    the baseline is min-max normalised like the benchmark (n - 1 spacings, not n + 1)."""
    rng = np.random.default_rng(8)
    ratios = [coverage_report(rng.random(20), baseline_draws=2).max_gap_ratio for _ in range(2000)]
    assert coverage_report(rng.random(20)).baseline == "normalised"
    assert np.mean(ratios) == pytest.approx(1.0, abs=0.03)
    raw = [coverage_report(rng.random(20), baseline="raw", baseline_draws=2).max_gap_ratio for _ in range(2000)]
    assert np.mean(raw) > 1.05
    assert UncertaintyConfig().baseline == "normalised"


# ------------------------------------------------------------------------------------------- 4. arena only


def test_arena_only_benchmark_is_refused_with_one_line(demo_db, capsys):
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    conn = connect(demo_db)
    before = len(runs.list_runs(conn))
    conn.close()
    assert main(["coverage", "demo-arena", "--db", str(demo_db)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "arena prompts only" in err[0] and "fit joint" in err[0]
    assert "Traceback" not in err[0]
    conn = connect(demo_db)
    assert len(runs.list_runs(conn)) == before
    conn.close()


def test_arena_benchmark_with_a_joint_fit_uses_the_arena_difficulties(demo_db, capsys):
    import json

    assert main(["fit", "joint", "demo-chem", "--arena", "demo-arena", "--db", str(demo_db), "--json"]) == 0
    joint = json.loads(capsys.readouterr().out)
    assert main(["coverage", "demo-arena", "--db", str(demo_db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    m = out["metrics"]
    assert m["difficulty_source"].startswith(f"joint run #{joint['run_id']} arena difficulties")
    assert m["n_items"] == 120 and m["diagnostics_passed"] is False
    assert any("not the paper-003 1PL" in w for w in m["warnings"])


@pytest.mark.parametrize("args,msg", [(["--delta", "1.5"], "--delta"), (["--delta", "nan"], "--delta"),
                                      (["--lipschitz", "-1"], "--lipschitz"), (["--folds", "1"], "--folds"),
                                      (["--interval-gaps", "0"], "--interval-gaps"), (["--k", "0"], "--k"),
                                      (["--permutations", "0"], "--permutations"),
                                      (["--uncertainty", "nuts"], "--uncertainty")])
def test_bad_options_are_one_line_and_leave_the_store_alone(demo_db, capsys, args, msg):
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    conn = connect(demo_db)
    before = len(runs.list_runs(conn))
    conn.close()
    # a value outside an option's fixed choices is wrong usage: exit 2 (issue 37 #15)
    try:
        rc = main(["coverage", "demo-math", "--db", str(demo_db), *args])
    except SystemExit as exc:  # argparse's own usage exit
        rc = exc.code
    assert rc == (2 if args[0] == "--uncertainty" else 1)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0] and "Traceback" not in err[0]
    conn = connect(demo_db)
    assert len(runs.list_runs(conn)) == before
    conn.close()
