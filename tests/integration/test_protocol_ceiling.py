"""The anomaly protocol's oracle ceiling is a bound the detector does not beat (issue 32 point 3).

Before, the ceiling was the protocol on data simulated from the run's fit, scored with its probabilities alone: under
a stated chance the data reject (simulated c = .08, stated .25) it was simulated with a floor of .25 the data do not
show, and the detector sat .03 above it (``protocol_ceiling_holds: false``, a label); with ``--chance estimate`` on
32 items the detector still sat .007 above it, since a clean fit has seen the injected cells as failures (its p
there is below the truth). Now the ceiling is simulated from a model that fits the data (the estimated asymptote
where the stated one is rejected) and scored with the true probabilities and with the detector's own fit redone on
the simulated data; the paper's detector (clean reference, guessing-aware residual) stays at or under it within
two Monte Carlo standard errors (``ceiling_noise``) at every rate."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchloupe.cli.main import main


def _workspace(d, c: float, stated: float, n_models: int, n_items: int, seed: int = 5) -> str:
    """Multiple-choice results simulated with lower asymptote *c* (3PL), the item file stating *stated*."""
    rng = np.random.default_rng(seed)
    theta, b, a = rng.normal(size=n_models), rng.normal(0.3, 1, n_items), np.exp(rng.normal(0.3, 0.3, n_items))
    y = (rng.random((n_models, n_items)) < c + (1 - c) / (1 + np.exp(-a * (theta[:, None] - b)))).astype(int)
    pd.DataFrame({"model": np.repeat([f"org/m{i}" for i in range(n_models)], n_items),
                  "item": np.tile([f"q{q}" for q in range(n_items)], n_models),
                  "correct": y.ravel()}).to_csv(d / "mc.csv", index=False)
    pd.DataFrame({"key": [f"q{q}" for q in range(n_items)], "chance": stated}).to_csv(d / "items.csv", index=False)
    db = str(d / "mc.db")
    assert main(["import", "long", str(d / "mc.csv"), "--db", db, "--benchmark", "mc"]) == 0
    assert main(["import", "items", str(d / "items.csv"), "--db", db, "--benchmark", "mc"]) == 0
    return db


def _protocol(db: str, capsys, *extra: str) -> tuple[dict, pd.DataFrame]:
    capsys.readouterr()
    assert main(["anomalies", "mc", "--db", db, "--protocol", "yes", "--json", *extra]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = pd.DataFrame(out["protocol"])
    return out["metrics"], rows[(rows.target == "static") & (rows.p_model == "guessing")
                                & (rows.detector == "clean_reference")]


def _under_the_ceiling(primary: pd.DataFrame) -> None:
    assert len(primary) == 4
    for r in primary.itertuples():
        noise = getattr(r, "ceiling_noise", 0.0)  # (the old table had no noise column)
        assert r.auroc <= r.ceiling_auroc + max(noise, 0.002), (r.rate, r.auroc, r.ceiling_auroc, noise)
        assert noise < 0.01, r  # five seeds pin the difference to a few thousandths


def test_under_a_rejected_stated_chance_the_ceiling_is_simulated_with_the_estimate(tmp_path, capsys):
    db = _workspace(tmp_path, c=0.08, stated=0.25, n_models=150, n_items=60)
    m, primary = _protocol(db, capsys)
    assert m["chance_test_rejected"] is True and m["chance_test_estimate"] < 0.15
    _under_the_ceiling(primary)
    assert m["protocol_ceiling_chance"].startswith("estimated asymptote 0.0")
    assert "stated 0.250" in m["protocol_ceiling_chance"]
    assert m["protocol_ceiling_holds"] is True and m["protocol_ceiling_auroc_min"] > 0.95  # not .94 under c = .25
    assert not any("not a ceiling" in w or "beats the oracle ceiling" in w for w in m["warnings"])
    chance = [w for w in m["warnings"] if w.startswith("the data reject the stated chance")]
    assert len(chance) == 1 and "simulated with the estimate" in chance[0]


@pytest.mark.parametrize("mode", ["stated", "estimate"])
def test_on_few_items_the_clean_fit_does_not_beat_its_ceiling(tmp_path, capsys, mode):
    """32 items (SAT12's shape): each model's ability rests on 32 cells, so the clean fit's p at a failed cell
    sits well below the truth; the ceiling scores with that fit redone on the simulated data too."""
    db = _workspace(tmp_path, c=0.1, stated=0.25, n_models=600, n_items=32)
    m, primary = _protocol(db, capsys, "--chance", mode)
    _under_the_ceiling(primary)
    assert m["protocol_ceiling_holds"] is True
    assert ("protocol_ceiling_chance" in m) == (mode == "stated")
