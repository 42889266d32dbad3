"""Same inputs as the public reference (REFERENCE-IMPLEMENTATIONS.md B.8/B.9): metabench ARC and GSM8K .npz.

Checks: same capped population and halves, same representatives, same K per fold, same near-tie pair set
(different owner, different family, |full gap| <= .01 in floating point), pooled reversal rate and random
median within 2 points, same verdict.  The full 1,000-control audit takes about a second per benchmark.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchloupe.engine.neartie import AuditConfig, make_pairs, run_audit

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
REF = SHARED / "reference" / "outputs" / "neartie"

pytestmark = [pytest.mark.shared_data,
              pytest.mark.skipif(not REF.exists(), reason=f"reference outputs not found under {REF}")]


def _load(name):
    d = np.load(REF / name / "input.npz")
    return d["responses"].T, list(d["model_id"]), list(d["family"]), list(d["owner"]), list(d["item_group"])


@pytest.fixture(scope="module", params=["arc", "gsm8k"])
def case(request):
    name = request.param
    return name, run_audit(*_load(name), AuditConfig())


def test_population_and_representatives(case):
    name, res = case
    ref = pd.read_csv(REF / name / "population.csv").set_index("dataset_model_index")
    pop = res.population
    assert set(np.flatnonzero(pop["kept"])) == set(ref.index)
    assert (pop.loc[ref.index, "half"].to_numpy() == ref["model_half"].to_numpy()).all()
    scored = pd.read_csv(REF / name / "scored_models.csv")
    assert set(np.flatnonzero(pop["representative"])) == set(scored["dataset_model_index"])
    full = pop.loc[scored["dataset_model_index"], "full_score"].to_numpy()
    np.testing.assert_array_equal(full, scored["full_score"].to_numpy())  # k/n exactly


def test_same_k_and_anchors_per_fold(case):
    name, res = case
    cv = pd.read_csv(REF / name / "dimension_cv.csv")
    for half in ("discovery", "validation"):
        ref_k = int(cv.loc[(cv["audit_half"] == half) & cv["selected"], "dimension"].item())
        assert res.folds.set_index("audit_half").loc[half, "k"] == ref_k
        ours = res.dimension_curves[res.dimension_curves["audit_half"] == half]
        theirs = cv[cv["audit_half"] == half]
        # same randomized SVD, same splits: the loss curve agrees to rounding (1e-9 relative)
        np.testing.assert_allclose(ours["mean_log_loss"].to_numpy(), theirs["mean_log_loss"].to_numpy(), rtol=1e-9)
    anchors = pd.read_csv(REF / name / "anchors.csv")
    for half in ("discovery", "validation"):
        theirs = anchors[anchors["audit_half"] == half].sort_values("item_index")
        ours = res.items[res.items["audit_half"] == half]
        assert (ours["anchor"].to_numpy() == theirs["selected"].to_numpy()).all()
        np.testing.assert_allclose(ours["weight"].to_numpy(), theirs["weight"].to_numpy())
        # same seeds and same Newton: the final-refit DIF range agrees to rounding
        np.testing.assert_allclose(ours["dif_range"].to_numpy(), theirs["final_refit_dif_range"].to_numpy(),
                                   atol=1e-9)


def test_same_near_tie_pairs_rates_and_verdict(case):
    name, res = case
    ref = pd.read_json(REF / name / "summary.json", typ="series")
    scored = pd.read_csv(REF / name / "scored_models.csv")
    pop = res.population
    # the reference's candidate near-tie pairs, rebuilt from its exported scores and anonymised labels
    n_close_ref = 0
    for half in ("discovery", "validation"):
        s = scored[scored["model_half"] == half]
        pairs = make_pairs(s["full_score"].to_numpy(), s["owner"].to_numpy(), s["family"].to_numpy(), 0.01, 0.0)
        n_close_ref += int((pairs.cross & pairs.close).sum())
    assert len(res.pairs) == n_close_ref
    ours = set(zip(res.pairs["model_a"], res.pairs["model_b"], strict=True))
    ids = pop["model_id"].to_numpy()
    ref_pairs = set()
    for half in ("discovery", "validation"):
        s = scored[scored["model_half"] == half]
        pairs = make_pairs(s["full_score"].to_numpy(), s["owner"].to_numpy(), s["family"].to_numpy(), 0.01, 0.0)
        m = pairs.cross & pairs.close
        idx = s["dataset_model_index"].to_numpy()
        ref_pairs |= {tuple(sorted((ids[idx[a]], ids[idx[b]]))) for a, b in zip(pairs.i[m], pairs.j[m], strict=True)}
    assert {tuple(sorted(p)) for p in ours} == ref_pairs
    s = res.summary
    # ties under the anchor score: we count exact rational ties, the reference float noise (see NEARTIE.md)
    assert abs(s["eligible_pairs"] - ref["eligible_pairs"]) <= 0.05 * ref["eligible_pairs"]
    assert abs(100 * s["rate"] - 100 * ref["low_dif_reversal_rate"]) <= 2.0
    assert abs(100 * s["random_median"] - 100 * ref["matched_random_median_rate"]) <= 2.0
    assert s["status"] == ref["status"]
    assert [s["k_discovery"], s["k_validation"]] == [f["selected_dimension"] for f in ref["folds"]]


def test_float_tie_variant_matches_gsm8k_exactly():
    """With the reference's float arithmetic GSM8K (weights 2 and 63/32, exact in binary) reproduces every count."""
    res = run_audit(*_load("gsm8k"), AuditConfig(anchor_ties="float"))
    ref = pd.read_json(REF / "gsm8k" / "summary.json", typ="series")
    assert res.summary["eligible_pairs"] == ref["eligible_pairs"]
    assert res.summary["reversals"] == ref["reversals"]
    assert res.summary["random_median"] == pytest.approx(ref["matched_random_median_rate"], abs=1e-12)
    assert res.summary["p"] == pytest.approx(ref["one_sided_randomization_p"], abs=1e-12)
    observed = pd.read_csv(REF / "gsm8k" / "observed_by_fold.csv")
    assert res.folds["tau_b"].to_numpy() == pytest.approx(observed["kendall_tau_b"].to_numpy(), abs=1e-12)
