"""Item health engine (issue 33): planted broken items are found, clean classic data sets are not flagged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchloupe.engine.itemhealth import ItemAuditConfig, ItemAuditInputs, run_item_audit
from benchloupe.engine.itemhealth import association as assoc
from benchloupe.engine.itemhealth.dupes import near_duplicates
from benchloupe.engine.itemhealth.irt import fit_2pl

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "classic_irt"
SAT12_KEY = [1, 4, 5, 2, 3, 1, 2, 1, 3, 1, 2, 4, 2, 1, 5, 3, 4, 4, 1, 4, 3, 3, 4, 1, 3, 5, 1, 3, 1, 5, 4, 5]


def _need(name: str) -> Path:
    path = DATA / name
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared real-data folder is not on this machine)")
    return path


def simulate(seed: int, m: int = 300, n: int = 40, k: int = 4):
    """A 2PL benchmark with options: item 0 (a sharp one) mis-keyed (key moved to a distractor), 1 dead, 2 solved."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=m)
    a, b = rng.uniform(0.8, 2.0, n), rng.normal(0, 1, n)
    a[0], b[0] = 2.0, -0.5  # the item that gets mis-keyed: a good one
    p = 0.25 + 0.75 / (1 + np.exp(-a * (theta[:, None] - b)))
    right = rng.random((m, n)) < p
    key = rng.integers(0, k, n)
    wrong = (key[None, :] + rng.integers(1, k, (m, n))) % k
    options = np.where(right, key[None, :], wrong)
    options[:, 1] = (key[1] + 1) % k  # dead: everyone picks the same distractor
    options[:, 2] = key[2]  # solved
    true_key = key.copy()
    key[0] = (key[0] + 1) % k  # mis-keyed
    y = (options == key[None, :]).astype(float)
    return y, options, key, true_key


def test_planted_broken_items_are_flagged_with_the_true_key_suggested():
    y, options, key, true_key = simulate(1)
    res = run_item_audit(ItemAuditInputs(y, np.full(y.shape[1], .25), options, key, np.full(y.shape[1], 4)),
                         ItemAuditConfig(n_perm=199))
    reasons = {f["item"]: f["reasons"] for f in res.flags}
    assert "miskeyed" in reasons[0] and res.table["suggested"][0] == true_key[0]
    assert reasons[1] == ["dead"] and reasons[2] == ["solved"]
    assert res.table["slope_hi"][0] < 0  # the sign-free slope of a mis-keyed item is negative, interval too
    assert len(reasons) <= 4  # at most one false flag on 37 good items at q = .05 in this seed


def test_without_options_a_miskeyed_item_is_backwards():
    y, _options, _key, _ = simulate(2)
    res = run_item_audit(ItemAuditInputs(y, np.full(y.shape[1], .25)), ItemAuditConfig(n_perm=199))
    reasons = {f["item"]: f["reasons"] for f in res.flags}
    assert "backwards" in reasons[0]
    assert res.table["q_backwards"][0] <= .05 and res.table["r_rest"][0] < 0


def test_permutation_pvalues_are_uniform_under_the_null_and_handle_missing_cells():
    rng = np.random.default_rng(3)
    x = (rng.random((200, 400)) < .5).astype(float)
    rest = rng.normal(size=(200, 400))
    x[rng.random(x.shape) < .1] = np.nan
    p, _ = assoc.permutation_pvalues(x, rest, alternative="greater", n_perm=199, rng=rng)
    assert abs(np.mean(p <= .05) - .05) < .03 and abs(np.mean(p <= .5) - .5) < .08


def test_bh_qvalues_match_the_step_up_rule():
    p = np.array([.01, .04, .03, .5, np.nan])
    q = assoc.bh_qvalues(p)
    assert np.allclose(q[:4], [.04, .16 / 3, .16 / 3, .5]) and np.isnan(q[4])


def test_sat12_item_32_is_miskeyed_with_key_3_suggested():
    import pandas as pd

    raw = pd.read_csv(_need("SAT12_raw.csv")).iloc[:, 1:].to_numpy()
    key = np.array(SAT12_KEY)
    y = np.where(raw == 8, 0.0, (raw == key).astype(float))
    res = run_item_audit(ItemAuditInputs(y, np.zeros(32), np.where(raw == 8, -1, raw - 1), key - 1,
                                         np.full(32, 5)), ItemAuditConfig(n_perm=999))
    assert [f["item"] for f in res.flags] == [31]
    assert res.table["q_miskey"][31] <= .05 and res.table["suggested"][31] == 2  # option "3"


@pytest.mark.parametrize("name", ["LSAT6_expanded.csv", "LSAT7_expanded.csv"])
def test_no_false_flag_on_lsat(name):
    import pandas as pd

    y = pd.read_csv(_need(name)).to_numpy(float)
    res = run_item_audit(ItemAuditInputs(y, np.full(5, np.nan)), ItemAuditConfig(n_perm=999))
    assert res.flags == []


def test_lsat7_slopes_match_mirt_within_its_tolerance():
    import pandas as pd

    y = pd.read_csv(_need("LSAT7_expanded.csv")).to_numpy(float)
    fit = fit_2pl(y, np.zeros(5))
    assert np.allclose(fit.a, [.9875, 1.0808, 1.7075, .765, .7357], atol=.03)


def test_near_duplicates_within_and_against_reference_texts():
    texts = ["What is the capital of France?", "what is the capital of  France", "Name a prime number above 10.",
             "Completely different question about chemistry."]
    pairs = near_duplicates(["Name a prime number above 10!"] + texts, n_ref=1)
    found = {(i, j) for i, j, _ in pairs}
    assert (1, 2) in found and (0, 3) in found and len(found) == 2


def test_seeded_study_power_and_false_flags_over_ten_benchmarks():
    """The small seeded version of bench/bench_items.py: 10 benchmarks of 300 x 40 with one planted mis-keyed
    item each; with the options every planted item is found with its true key, and the 39 x 10 clean items get
    few key flags (the study over 200 benchmarks: FDR 0.000, docs/ITEMS.md)."""
    found = right_key = false_key = 0
    for seed in range(10):
        y, options, key, true_key = simulate(100 + seed)
        res = run_item_audit(ItemAuditInputs(y, np.full(40, .25), options, key, np.full(40, 4)),
                             ItemAuditConfig(n_perm=99, sx2=False, seed=seed))
        flagged = {f["item"] for f in res.flags if {"miskeyed", "ambiguous", "backwards"} & set(f["reasons"])}
        found += 0 in flagged
        right_key += int(res.table["suggested"][0] == true_key[0])
        false_key += len(flagged - {0})
    assert found == 10 and right_key == 10
    assert false_key <= 2
