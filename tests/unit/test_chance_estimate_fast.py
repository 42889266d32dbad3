"""``--chance estimate`` is fast and says what it does (issue 36, point 3).

The shared lower asymptote's marginal-ML estimate merges identical response rows, needs fewer matrix products per
evaluation and warm-starts its profile-likelihood fits; its answer is the one the old code gave (values recorded
from it on seeded simulations with missing cells and binomial counts, within the old code's own tolerances: the
interior interval from the same two fits, a boundary bound by a root search instead of an eight-step bisection
whose own resolution was (c_max - c) / 512).  Its progress reaches the job's callback (the workbench's job line)
and stderr; events are checked for order and content, never for time."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from benchloupe.cli.main import main
from benchloupe.cli.options import StderrProgress
from benchloupe.engine.irt.asymptote import estimate_lower_asymptote

# (true c) -> (c, 95 % interval, loglik, loglik at c = 0) of the code before issue 36 on _sim(c)
BEFORE = {0.0: (0.00259, (0.00042, 0.01601), -48489.770, -48490.494),
          0.15: (0.14887, (0.13712, 0.16144), -52011.870, -52069.307),
          0.3: (0.28898, (0.26481, 0.31441), -51860.284, -51917.057)}


def _sim(c: float, n_models: int = 1500, n_items: int = 50, seed: int = 36):
    """0/1 responses with a known lower asymptote; every fifth model misses every fourth item, every seventh model
    has three trials a cell (binomial counts)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_models)
    b, a = rng.normal(0, 1, n_items), np.exp(rng.normal(0.2, 0.3, n_items))
    y = (rng.random((n_models, n_items)) < c + (1 - c) * expit(a * (theta[:, None] - b))).astype(float)
    k = np.ones_like(y)
    k[::5, ::4] = 0
    k[1::7] *= 3
    return np.where(k > 0, (y > 0) * k, 0), k


@pytest.mark.parametrize("c", sorted(BEFORE))
def test_the_estimate_is_the_one_before(c):
    events = []
    est = estimate_lower_asymptote(*_sim(c), progress=lambda *e: events.append(e))
    c0, (lo0, hi0), ll0, ll00 = BEFORE[c]
    assert est.c == pytest.approx(c0, abs=1e-4) and abs(est.c - c) < 0.03
    # the lower bound near 0 from a finer search; the upper from a bisection whose resolution was .0018
    assert est.ci[0] == pytest.approx(lo0, abs=1e-4) and est.ci[1] == pytest.approx(hi0, abs=2e-3)
    assert est.ci[0] - 0.005 <= c <= est.ci[1] + 0.005
    assert est.loglik == pytest.approx(ll0, abs=0.05) and est.loglik_c0 == pytest.approx(ll00, abs=0.05)
    fr = [d / t for d, t, _ in events]
    said = [m for _, _, m in events]
    assert all(b >= a for a, b in zip(fr, fr[1:])) and 0.9 <= fr[-1] <= 1.0
    assert any("iteration" in m for m in said) and any("profile likelihood" in m for m in said)


def test_identical_rows_are_merged_without_changing_the_likelihood():
    y, k = _sim(0.2, n_models=400, n_items=8, seed=3)  # 8 items: many models share a response row
    once = estimate_lower_asymptote(y, k)
    twice = estimate_lower_asymptote(np.vstack([y, y]), np.vstack([k, k]))
    assert len(np.unique(np.hstack([y, k]), axis=0)) < 400
    assert twice.c == pytest.approx(once.c, abs=2e-3)
    assert twice.loglik == pytest.approx(2 * once.loglik, rel=1e-6)


@pytest.fixture
def guessing_db(tmp_path):
    rng = np.random.default_rng(7)
    theta, b = rng.normal(size=300), rng.normal(size=40)
    y = (rng.random((300, 40)) < 0.2 + 0.8 * expit(theta[:, None] - b)).astype(int)
    pd.DataFrame([{"model": f"m{i}", "item": f"q{q}", "correct": y[i, q]} for i in range(300) for q in range(40)]) \
        .to_csv(tmp_path / "r.csv", index=False)
    db = tmp_path / "w.db"
    assert main(["import", "long", str(tmp_path / "r.csv"), "--db", str(db), "--benchmark", "b"]) == 0
    return db


def test_the_job_reports_the_estimate_as_it_goes(guessing_db):
    """What the workbench's job line shows: the job's own progress events, from the estimate's iterations to its
    interval fits, in order."""
    from benchloupe import jobs
    from benchloupe.jobs.diagnostics import CompressConfig

    events = []
    jobs.analysis("compress").run(guessing_db, "b", CompressConfig(chance="estimate", recovery=False),
                                  progress=lambda *e: events.append(e))
    said = [m for _, _, m in events]
    first = next(i for i, m in enumerate(said) if "shared lower asymptote: iteration" in m)
    fits = [i for i, m in enumerate(said) if "profile likelihood of the shared lower asymptote" in m]
    assert said[0].startswith("estimating a shared lower asymptote") and fits and first < fits[0]
    est = [d / t for d, t, m in events if "shared lower asymptote" in m]
    assert len(est) >= 5 and all(b >= a for a, b in zip(est, est[1:]))


def test_stderr_shows_the_estimate(guessing_db, capsys, monkeypatch):
    monkeypatch.setattr(StderrProgress, "FIRST", 0.0)  # the first second up at once: no wall clock in the test
    assert main(["compress", "b", "--db", str(guessing_db), "--chance", "estimate", "--recovery", "no",
                 "--json"]) == 0
    out, err = capsys.readouterr()
    # the first event at once; the iterations after it are shown at most 4 a second (how many: a matter of time)
    assert "estimating a shared lower asymptote" in err
    assert abs(json.loads(out)["metrics"]["chance_estimated"] - 0.2) < 0.08
