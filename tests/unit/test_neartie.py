"""Near-tie audit (paper 002, 3.1-3.4, C.1, C.6, C.7, D.1): invariants from the reference tests (B.10)."""

import threading

import numpy as np
import pandas as pd
import pytest

from benchloupe.engine.common import Cancelled, EngineError
from benchloupe.engine.neartie import (
    STATUS_DETECTED,
    STATUS_INSUFFICIENT,
    STATUS_NOT_DETECTED,
    STATUS_UNDEFINED,
    AuditConfig,
    build_population,
    control_weights,
    count_reversals,
    make_pairs,
    pool_folds,
    randomization_test,
    run_audit,
    run_fold,
)

FAST = AuditConfig(dimensions=(1, 2, 4, 8), controls=99)


def simulate(n_owners=90, n_items=240, seed=0, families=("gemma", "llama", "qwen")):
    """Models x items 0/1 responses with a 3-dimensional ability and family DIF on half of the items."""
    rng = np.random.default_rng(seed)
    ids, fams, owners = [], [], []
    for o in range(n_owners):
        for f in rng.choice(families, size=rng.integers(1, 3), replace=False):
            for c in range(rng.integers(1, 8)):
                ids.append(f"owner{o}/{f}-model-{c}")
                fams.append(str(f))
                owners.append(f"owner{o}")
    n = len(ids)
    code = np.searchsorted(sorted(families), fams)
    b = rng.normal(0.2, 1.0, n_items)
    a = rng.normal(0, 0.7, (n_items, 3))
    theta = rng.normal(0, 1, (n, 3))
    delta = rng.normal(0, 0.6, (n_items, len(families))) * (np.arange(n_items) < n_items // 2)[:, None]
    logits = b + theta @ a.T + delta[:, code].T
    y = (rng.random((n, n_items)) < 1 / (1 + np.exp(-logits))).astype(np.int8)
    groups = [f"task_{i % 4}" for i in range(n_items)]
    return y, ids, fams, owners, groups


@pytest.fixture(scope="module")
def sim():
    return simulate()


@pytest.fixture(scope="module")
def result(sim):
    y, ids, fams, owners, groups = sim
    return run_audit(y, ids, fams, owners, groups, FAST)


def test_population_cap_split_and_representatives(sim, result):
    pop = result.population
    kept = pop[pop["kept"]]
    assert kept.groupby(["owner", "family"]).size().max() <= 5  # owner cap per owner-family
    assert (kept.groupby("owner")["half"].nunique() == 1).all()  # owners never cross halves
    assert set(kept["half"]) == {"discovery", "validation"}
    reps = kept[kept["representative"]]
    assert len(reps) == kept.groupby(["owner", "family"]).ngroups  # one per owner-family
    for (_, _), group in kept.groupby(["owner", "family"]):
        med = np.median(group["accuracy"])
        rep = group[group["representative"]].iloc[0]
        assert abs(rep["accuracy"] - med) == pytest.approx((group["accuracy"] - med).abs().min())


def test_audit_fit_ignores_target_half_responses(sim, result):
    """Leakage (B.10): flipping every response of the target half leaves the audit half's fit unchanged."""
    y, ids, fams, owners, groups = sim
    pop = result.population
    fam_names = sorted(set(pop.loc[pop["kept"], "family"]))
    fam_code = pop["family"].map({f: i for i, f in enumerate(fam_names)}).to_numpy(dtype=float)
    owner_arr = pop["owner"].to_numpy().astype(str)
    half = pop["half"].to_numpy()
    audit = np.flatnonzero(pop["kept"].to_numpy() & (half == "discovery"))
    target = np.flatnonzero(pop["representative"].to_numpy() & (half == "validation"))
    y_flip = y.astype(float).copy()
    y_flip[half == "validation"] = 1 - y_flip[half == "validation"]
    args = (audit, target, fam_code, len(fam_names), owner_arr, np.array(groups), FAST)
    one = run_fold(0, "discovery", y.astype(float), None, *args)
    two = run_fold(0, "discovery", y_flip, None, *args)
    assert one.selection.k == two.selection.k
    assert np.array_equal(one.purification.weights, two.purification.weights)
    assert np.array_equal(one.purification.final.dif_range, two.purification.final.dif_range)
    assert not np.array_equal(one.full, two.full)  # the target scores did change


def test_every_cell_keeps_its_mass_in_anchors_and_controls(result):
    items = result.items[result.items["audit_half"] == "discovery"]
    cells = items["cell"].to_numpy()
    selected = items["anchor"].to_numpy()
    ctrl = control_weights(cells, selected, 25, seed=3)
    for cell in np.unique(cells):
        in_cell = cells == cell
        assert items.loc[in_cell, "weight"].sum() == pytest.approx(in_cell.sum())
        np.testing.assert_allclose(ctrl[in_cell].sum(axis=0), in_cell.sum())
        assert ((ctrl[in_cell] > 0).sum(axis=0) == selected[in_cell].sum()).all()  # same count per cell


def test_pair_counting_excludes_same_owner_and_ties():
    full = np.array([0.50, 0.505, 0.508, 0.50, 0.70])
    low = np.array([0.52, 0.50, 0.51, 0.49, 0.40])
    owners = np.array(["a", "b", "c", "a", "d"])
    families = np.array(["x", "y", "y", "y", "x"])
    pairs = make_pairs(full, owners, families, 0.01, 0.0)
    ok, flips = count_reversals(pairs, low, pairs.cross & pairs.close)
    # close cross pairs: (0,1) reversed; (0,2) full differs, low 0.52 vs 0.51 -> reversed;
    # (0,3) same owner -> excluded; (1,3),(2,3) same family; (3,?) (0,4),(..4) far apart.
    assert (ok[0], flips[0]) == (2, 2)
    tied_low = low.copy()
    tied_low[1] = tied_low[0]
    ok, flips = count_reversals(pairs, tied_low, pairs.cross & pairs.close)
    assert (ok[0], flips[0]) == (1, 1)  # the low-score tie leaves the denominator
    tied_full = full.copy()
    tied_full[2] = tied_full[0]
    pairs = make_pairs(tied_full, owners, families, 0.01, 0.0)
    ok, _ = count_reversals(pairs, low, pairs.cross & pairs.close)
    assert ok[0] == 1  # the full-score tie leaves the denominator


def test_float_gap_and_tolerance_option():
    full = np.array([10 / 100, 9 / 100])
    pairs = make_pairs(full, np.array(["a", "b"]), np.array(["x", "y"]), 0.01, 0.0)
    assert not pairs.close[0]  # 0.1 - 0.09 = 0.010000000000000009 > 0.01: the reference's float comparison
    # 80 of the 99 one-item gaps on 100 items land above 0.01 in floating point
    assert sum((k + 1) / 100 - k / 100 > 0.01 for k in range(100)) == 80
    assert make_pairs(full, np.array(["a", "b"]), np.array(["x", "y"]), 0.01, 1e-9).close[0]


def test_pooled_rates_come_from_counts():
    """Toy case of the reference: 2/10 pooled (fold rates 1/2 and 1/8), control median .1, p = .5."""
    ctrl0 = np.array([[1, 0], [1, 0], [1, 1]])
    ctrl1 = np.array([[9, 0], [9, 1], [9, 2]])
    pairs, flips, cp, cf = pool_folds([(2, 1, ctrl0), (8, 1, ctrl1)])
    assert (pairs, flips) == (10, 2)
    test = randomization_test(pairs, flips, cp, cf)
    assert test["rate"] == pytest.approx(0.2)  # not (1/2 + 1/8) / 2
    assert test["random_median"] == pytest.approx(0.1)
    assert test["excess_pp"] == pytest.approx(10.0)
    assert test["p"] == pytest.approx(0.5)  # (1 + #{.3 >= .2}) / (3 + 1)
    assert test["status"] == STATUS_NOT_DETECTED


def test_status_words():
    assert randomization_test(0, 0, np.ones(5), np.zeros(5))["status"] == STATUS_INSUFFICIENT
    assert randomization_test(0, 0, np.ones(5), np.zeros(5))["p"] is None
    assert randomization_test(10, 5, np.array([10, 0, 10]), np.array([1, 0, 1]))["status"] == STATUS_UNDEFINED
    strong = randomization_test(10, 8, np.full(99, 10), np.full(99, 1))
    assert strong["status"] == STATUS_DETECTED and strong["p"] == pytest.approx(0.01)


def test_result_tables_and_contributions(sim, result):
    y, ids, *_ = sim
    s = result.summary
    assert s["eligible_pairs"] == result.folds["close_cross_pairs"].sum()
    pairs = result.pairs
    assert len(pairs) > 0 and (pairs["owner_a"] != pairs["owner_b"]).all()
    assert (pairs["family_a"] != pairs["family_b"]).all() and (pairs["gap"] <= 0.01).all()
    assert int((~pairs["tied"]).sum()) == s["eligible_pairs"] and int(pairs["reversed"].sum()) == s["reversals"]
    assert len(result.dimension_curves) == 8 and set(result.table1_row()) >= {"rate", "p", "status"}
    assert "Family-DIF near-tie audit" in result.to_markdown()
    # the exact per-item contributions of a reversed pair sum to (anchor gap - full gap)
    row = pairs[pairs["reversed"]].iloc[0]
    full_cfg = AuditConfig(dimensions=(1, 2, 4, 8), controls=99, top_items=10_000)
    every = run_audit(*sim, full_cfg).contributions
    one = every[(every["model_a"] == row["model_a"]) & (every["model_b"] == row["model_b"])]
    shift = (row["anchor_a"] - row["anchor_b"]) - (row["full_a"] - row["full_b"])
    assert np.sign(one["contribution"].sum()) == np.sign(shift)
    assert (np.sign(one["contribution"]) == np.sign(shift)).all()  # only items pushing toward the reversal
    top = result.contributions
    top = top[(top["model_a"] == row["model_a"]) & (top["model_b"] == row["model_b"])]
    assert len(top) <= 10 and top["contribution"].abs().is_monotonic_decreasing


def test_contributions_sum_exactly(sim):
    cfg = AuditConfig(dimensions=(1, 2, 4), controls=9, top_items=10_000)
    res = run_audit(*sim, cfg)
    pairs = res.pairs[res.pairs["reversed"]]
    items = res.items
    y, ids, *_ = sim
    index = {m: i for i, m in enumerate(ids)}
    row = pairs.iloc[0]
    w = items.loc[items["audit_half"] == ("discovery" if row["fold"] == 0 else "validation"), "weight"].to_numpy()
    ya, yb = y[index[row["model_a"]]], y[index[row["model_b"]]]
    c = (w / w.sum() - 1 / w.size) * (ya - yb)
    shift = (row["anchor_a"] - row["anchor_b"]) - (row["full_a"] - row["full_b"])
    assert c.sum() == pytest.approx(shift, abs=1e-12)
    got = res.contributions
    got = got[(got["model_a"] == row["model_a"]) & (got["model_b"] == row["model_b"])]
    np.testing.assert_allclose(got["contribution"].to_numpy(), c[got["item"].to_numpy()], atol=1e-15)


def test_determinism(sim, result):
    again = run_audit(*sim, FAST)
    for name in ("population", "dimension_curves", "items", "pairs", "contributions", "controls", "folds"):
        pd.testing.assert_frame_equal(getattr(result, name), getattr(again, name), check_exact=True)
    assert result.summary == again.summary
    assert result.to_markdown() == again.to_markdown()


def test_missing_cells_are_handled_by_mask(sim):
    y, ids, fams, owners, groups = sim
    mask = np.random.default_rng(5).random(y.shape) > 0.05
    res = run_audit(y, ids, fams, owners, groups, FAST, mask=mask)
    assert res.summary["eligible_pairs"] > 0
    assert np.isfinite(res.items["dif_range"]).all()
    with pytest.raises(EngineError, match="missing"):
        run_audit(np.where(mask, y, np.nan), ids, fams, owners, groups, FAST)


def test_secondary_analyses(sim):
    cfg = AuditConfig(dimensions=(1, 2, 4), controls=49, specificity=True, bootstrap=50,
                      gap_curve=(0.25, 0.5, 1, 2, 3, 5), fraction_sensitivity=(0.3, 0.7))
    res = run_audit(*sim, cfg)
    curve = res.secondary["gap-threshold curve"]
    assert curve["pairs"].is_monotonic_increasing  # nested bands
    assert curve.loc[curve["gap_pp"] == 1, "pairs"].item() == res.summary["eligible_pairs"]
    spec = res.secondary["within-family specificity"]
    assert spec["within_pairs"].item() > 0
    boot = res.secondary["composition bootstrap"]
    assert boot["units"].item() == 100  # 4 item groups < 5 -> 100 contiguous clusters
    assert boot["rate_lo"].item() <= boot["rate_hi"].item()
    frac = res.secondary["anchor-fraction sensitivity"]
    anchors = [sum(map(int, a.split("/"))) for a in frac["anchors"]]
    assert anchors[0] < res.items["anchor"].sum() < anchors[1]


def test_bad_input_messages(sim):
    y, ids, fams, owners, groups = sim
    with pytest.raises(EngineError, match="at least 2 model families, found 1"):
        run_audit(y, ids, ["llama"] * len(ids), owners, groups, FAST)
    small = [f if f != "qwen" or i % 20 == 0 else None for i, f in enumerate(fams)]
    with pytest.raises(EngineError, match=r"family 'qwen' has \d+ models after the owner cap, \d+ short"):
        run_audit(y, ids, small, owners, groups, FAST)
    with pytest.raises(EngineError, match="at least 4 owners, found 2"):
        build_population(np.random.default_rng(0).random(60), [f"m{i}" for i in range(60)],
                         ["a", "b"] * 30, ["o1", "o2"] * 30, AuditConfig(min_family_models=1))
    with pytest.raises(EngineError, match="no different-owner, different-family pairs"):
        run_audit(y, ids, fams, owners, groups, AuditConfig(dimensions=(1, 2), controls=9, gap=-1.0))
    with pytest.raises(EngineError, match="0/1"):
        run_audit(y * 2, ids, fams, owners, groups, FAST)


def test_progress_and_cancel(sim):
    seen = []
    run_audit(*sim, AuditConfig(dimensions=(1, 2), controls=9), progress=lambda d, t, m: seen.append((d / t, m)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any("final refit" in m for _, m in seen)
    stop = threading.Event()
    stop.set()
    with pytest.raises(Cancelled):
        run_audit(*sim, FAST, cancel=stop)
