"""The robustness protocol of paper 002 on simulated data where the answer is known.

DIF injected into one family's items: the item-signature replication finds it (Table 2); without DIF the
overlap is at chance.  Without DIF the matched-control p-values (blueprint and discrimination-matched) are
roughly uniform over seeds.  Eq. 72 holds exactly; the perturbations freeze K; per-pair robustness equals a
brute-force count.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from benchloupe.engine.neartie import AuditConfig, run_audit
from benchloupe.engine.neartie.direct_mirt import direct_mirt_audit
from benchloupe.engine.neartie.matched import matched_controls, matched_weights
from benchloupe.engine.neartie.perturb import pass_rule, population_robustness
from benchloupe.engine.neartie.replication import replication
from benchloupe.engine.neartie.results import ProtocolInputs
from benchloupe.engine.neartie.shifts import exact_common_shifts, family_shifts

FAST = AuditConfig(dimensions=(1, 2, 4, 8), controls=99)
FAMILIES = ("gemma", "llama", "qwen")


def simulate(seed=0, dif_family: str | None = "llama", dif_sd=0.9, n_owners=90, n_items=240):
    """3-dimensional 2PL-like responses; residual DIF only for ``dif_family`` on the first half of the items."""
    rng = np.random.default_rng(seed)
    ids, fams, owners = [], [], []
    for o in range(n_owners):
        for f in rng.choice(FAMILIES, size=rng.integers(1, 3), replace=False):
            for c in range(rng.integers(1, 8)):
                ids.append(f"owner{o}/{f}-model-{c}")
                fams.append(str(f))
                owners.append(f"owner{o}")
    code = np.searchsorted(FAMILIES, fams)
    b = rng.normal(0.2, 1.0, n_items)
    a = rng.normal(0, 0.7, (n_items, 3))
    theta = rng.normal(0, 1, (len(ids), 3))
    delta = np.zeros((n_items, len(FAMILIES)))
    if dif_family is not None:
        delta[: n_items // 2, FAMILIES.index(dif_family)] = rng.normal(0, dif_sd, n_items // 2)
    logits = b + theta @ a.T + delta[:, code].T
    y = (rng.random(logits.shape) < 1 / (1 + np.exp(-logits))).astype(np.int8)
    return y, ids, fams, owners, [f"task_{i % 4}" for i in range(n_items)]


def _inputs(res, y, ids, fams, owners, groups) -> ProtocolInputs:
    pop = res.population
    names = sorted(set(pop.loc[pop["kept"], "family"]))
    return ProtocolInputs(y, ids, fams, owners, groups, None, np.asarray(y, float), None, np.asarray(groups, str),
                          pop["family"].map({f: i for i, f in enumerate(names)}).to_numpy(float),
                          pop["owner"].to_numpy().astype(str), names)


@pytest.fixture(scope="module")
def dif_case():
    sim = simulate()
    res = run_audit(*sim, FAST)
    return res, _inputs(res, *sim)


def test_replication_finds_the_injected_family_dif(dif_case):
    res, inputs = dif_case
    rep = replication(res, inputs, permutations=99)
    t = rep["table2"].iloc[0]
    assert t["top20_overlap"] > 0.35 and t["p_overlap"] <= 0.02  # chance is 20%
    rho = rep["family_rho"].set_index("family")["rho"]
    assert rho["llama"] > 0.4  # the family that carries the DIF replicates across owner halves


def test_replication_without_dif_is_at_chance():
    sim = simulate(seed=1, dif_family=None)
    res = run_audit(*sim, FAST)
    t = replication(res, _inputs(res, *sim), permutations=99)["table2"].iloc[0]
    assert t["top20_overlap"] < 0.32 and t["p_overlap"] > 0.05
    assert abs(t["median_rho"]) < 0.2


def test_matched_control_p_values_are_roughly_uniform_without_dif():
    """No DIF: over 10 seeds neither the blueprint nor the discrimination-matched p piles up near 0."""
    prim, matched = [], []
    for seed in range(10):
        sim = simulate(seed=100 + seed, dif_family=None, n_owners=70, n_items=160)
        res = run_audit(*sim, FAST)
        prim.append(res.summary["p"])
        matched.append(matched_controls(res, _inputs(res, *sim), 99)[0]["p"].iloc[0])
    for ps in (np.array(prim), np.array(matched)):
        assert 0.25 < ps.mean() < 0.75, ps
        assert (ps <= 0.05).sum() <= 2, ps


def test_matched_weights_keep_stratum_counts_and_cell_mass(dif_case):
    res, _ = dif_case
    f = res.fold_results[0]
    pur = f.purification
    g = np.random.default_rng(0).random(pur.cells.size)
    w = matched_weights(pur.cells, pur.selected, g, 20, 5)
    for c in np.unique(pur.cells):
        idx = np.flatnonzero(pur.cells == c)
        np.testing.assert_allclose(w[idx].sum(axis=0), idx.size)  # cell mass restored in every replicate
        assert ((w[idx] > 0).sum(axis=0) == pur.selected[idx].sum()).all()
        ordered = idx[np.argsort(g[idx], kind="stable")]
        for s in np.array_split(ordered, min(4, idx.size)):  # same count per discrimination stratum
            assert ((w[s] > 0).sum(axis=0) == pur.selected[s].sum()).all()


def test_eq72_group_contributions_sum_to_the_family_shift(dif_case):
    res, inputs = dif_case
    c = replication(res, inputs, permutations=9)["group_contributions"]
    total = c.groupby(["audit_half", "family"]).agg(s=("contribution_pp", "sum"), shift=("family_shift_pp", "first"))
    np.testing.assert_allclose(total["s"], total["shift"], atol=1e-9)


def test_perturbations_freeze_k_and_report_every_variant(dif_case):
    res, inputs = dif_case
    t = population_robustness(res, inputs, controls=49)
    assert len(t) == 10 and t["variant"].iloc[0] == "Baseline cap 5"
    assert t["excess_pp"].iloc[0] == res.summary["excess_pp"]
    omit = t.set_index("variant")
    assert omit.loc["Omit Gemma", "families"] == 2
    assert omit.loc["Omit Phi", "status"] == "not applicable"  # no phi models in this simulation
    assert omit.loc["Owner cap 1", "capped_models"] < res.summary["capped_models"]
    rule = pass_rule({"a": t, "b": t, "c": t})
    assert list(rule["G_dir"]) == [3 * int(x) for x in t["positive"]]


def test_family_shifts_and_exact_common_check(dif_case):
    res, _ = dif_case
    fs = family_shifts(res, b=200)
    assert (fs["ci_lo_score"] <= fs["score_shift_pp"]).all() and (fs["score_shift_pp"] <= fs["ci_hi_score"]).all()
    same = exact_common_shifts(res.population, res.population, b=50)  # a benchmark against itself: no change, CI [0, 0]
    np.testing.assert_allclose(same["diff_pp"], 0, atol=1e-12)


def test_per_pair_robustness_is_the_share_of_reversing_recompositions(dif_case):
    res, _ = dif_case
    f = res.fold_results[0]
    pairs = res.pairs[res.pairs["fold"] == 0].head(5)
    pos = {m: k for k, m in enumerate(res.population["model_id"].to_numpy()[f.rep_index])}
    for p in pairs.itertuples(index=False):
        i, j = pos[p.model_a], pos[p.model_b]
        d_full = f.full[i] - f.full[j]
        brute = np.mean([(d_full * (f.control_low[i, r] - f.control_low[j, r])) < 0 for r in range(FAST.controls)])
        assert p.random_reversal_fraction == pytest.approx(brute)


def test_direct_mirt_reselects_k_near_the_true_rank(dif_case):
    res, inputs = dif_case
    t = direct_mirt_audit(res, inputs, max_updates=1500).iloc[0]
    ks = [int(k) for k in t["k"].split("/")]
    assert all(2 <= k <= 4 for k in ks)  # the simulation's ability has 3 dimensions
    assert t["pairs"] > 0 and 0 <= t["p"] <= 1


def test_full_protocol_through_run_audit_and_report_sections():
    sim = simulate(seed=3, n_owners=60, n_items=120)
    cfg = replace(FAST, protocol="full", bootstrap=50)
    res = run_audit(*sim, cfg)
    assert {"table2_replication", "table4_direct_mirt", "table5_matched_controls",
            "table9_population_robustness", "table10_family_shifts"} <= set(res.protocol)
    assert {"within-family specificity", "gap-threshold curve", "composition bootstrap",
            "anchor-fraction sensitivity"} <= set(res.secondary)
    text = res.to_markdown("sim")
    for n in (1, 2, 4, 5, 6, 7, 8, 9, 10, 11):
        assert f"## Table {n}:" in text
    assert "Sensitivity analysis" in text
    # issue 22: the full protocol reruns the primary audit under 20 other owner splits by default
    assert len(res.tables["split_seeds"]) == 20 and res.summary["split_stability"]["splits"] == 20
    assert "## Split stability (beyond the paper)" in text


def test_direct_mirt_k_points_as_replicates_choose_the_sequential_k(dif_case):
    """Table 4's K curve runs one replicate per (fold, K) (issue 36); each fold's K is the one the sequential
    C.3 selection picks on the same split and seed."""
    from benchloupe.engine.neartie.direct_mirt import (
        _fold_matrices,
        nested_split,
        one_se_choice,
        validation_loss,
    )

    def select_dimension_direct(y, obs, owners, groups, grid, seed, validation_fraction, calibration_fraction,
                                max_updates):  # C.3's selection as one sequential loop, as the code before ran it
        split = nested_split(y, obs, owners, groups, seed, validation_fraction, calibration_fraction)
        return one_se_choice([validation_loss(split, k, seed, 2, max_updates) for k in grid
                              if k <= split.grid_limit])

    res, inputs = dif_case
    cfg = res.config
    ks = [int(k) for k in direct_mirt_audit(res, inputs, max_updates=300).iloc[0]["k"].split("/")]
    for fold, f in enumerate(res.fold_results):
        y, obs = _fold_matrices(inputs, f.audit_rows)
        k, curve = select_dimension_direct(y, obs, inputs.owner_arr[f.audit_rows], inputs.groups, cfg.dimensions,
                                           cfg.nested_seed + fold, cfg.validation_fraction,
                                           cfg.calibration_fraction, max_updates=300)
        assert k == ks[fold] and len(curve) == sum(d <= min(y.shape) for d in cfg.dimensions)


def test_direct_mirt_with_no_feasible_k_says_so():
    from benchloupe.engine.common import EngineError
    from benchloupe.engine.neartie.direct_mirt import one_se_choice

    with pytest.raises(EngineError, match="no dimension of the grid"):
        one_se_choice([])
