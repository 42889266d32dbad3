"""The speed-ups of ``estimate`` and ``compress --validate`` (issue 34) change no number: the engine's estimates,
misfit variance, replay scale, plain estimators, curve and anchor points and the cross-validated errors on seeded
simulations (3PL with chance levels on half the items, partial patterns of 10 and 150 items, design weights,
success/trial counts; a 2PL calibration of 3,000 items for the k-means) equal the values the code before them
recorded (tests/fixtures/estimate/before_speedups.json, from commit dab1ff8), to 1e-12.  The replay's stretch
changed on purpose later (the split-conformal ``level`` quantile on up to 1,000 models instead of a third of the
way to 1 on 400): the fields it moves (the scale, the plain estimate's lo and hi, the cross-validated coverage and
width) were re-recorded then, every other field checked unchanged (#34)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy.special import expit

from benchloupe.engine import estimate as E
from benchloupe.engine import estimate_validate as ev
from benchloupe.engine import kmeans

BEFORE = Path(__file__).resolve().parents[1] / "fixtures" / "estimate" / "before_speedups.json"


def _sim(seed: int = 34, n: int = 700, N: int = 400):  # noqa: N803 - items, as the engine names them
    rng = np.random.default_rng(seed)
    a, b, th = np.exp(rng.normal(0.2, 0.3, N)), rng.normal(0, 1, N), rng.normal(0, 1, n)
    c = np.where(np.arange(N) % 2 == 0, 0.25, 0.0)
    y = (rng.random((n, N)) < c + (1 - c) * expit(a * (th[:, None] - b))).astype(float)
    return rng, a, b, c, th, y


def _outputs() -> dict:
    out = {}
    rng, a, b, c, th, y = _sim()
    cal = E.calibration(a, b, c, th[:500])
    full = y[:500]
    cal.tau2 = E.misfit_variance(cal, full, np.ones_like(full, bool))
    mask = np.zeros((200, 400), bool)
    for i in range(200):
        mask[i, rng.choice(400, 10 if i % 2 else 150, replace=False)] = True
    scale = E.interval_scale(cal, full, np.ones_like(full, bool), mask)
    e = E.estimate(cal, y[500:], mask, scale=scale)
    sel = E.curve_points(cal, 20)
    w = E.full_weights(sel, 400)
    sub = np.zeros((200, 400), bool)
    sub[:, sel.items] = True
    ew = E.estimate(cal, y[500:], sub, weights=w, scale=1.3)
    trials = 1 + (np.arange(400) % 3)[None, :] * np.ones((200, 1), int)
    succ = rng.binomial(trials, np.clip(y[500:] * 0.8 + 0.1, 0, 1))
    et = E.estimate(cal, succ, mask, trials=trials)
    pe = E.plain_estimators(cal, y[500:], mask)
    fields = ("theta", "theta_sd", "accuracy", "lo", "hi", "sd", "shrink")
    out["estimate"] = {"tau2": cal.tau2, "scale": scale,
                       **{f"{n}_{f}": getattr(x, f).tolist() for n, x in (("plain", e), ("weighted", ew), ("trials", et))
                          for f in fields},
                       **{f"baseline_{k}": v.tolist() for k, v in pe.items()}}
    big = E.calibration(np.exp(rng.normal(0.2, 0.3, 3000)), rng.normal(0, 1, 3000), None, rng.normal(0, 1, 400))
    for k in (7, 50):
        for f in (E.curve_points, E.anchor_points):
            s = f(big, k, seed=3)
            out[f"{f.__name__}_{k}"] = {"items": s.items.tolist(), "weights": s.weights.tolist()}
    rng, a, b, c, th, y = _sim(seed=7, n=260, N=300)
    long = ev.cross_validate(y, np.ones_like(y, bool), [5, 20], chance=c)
    g = long.groupby(["k", "selection", "estimator"], sort=True)
    agg = g.agg(error=("error", "mean"), covered=("covered", "mean"), width=("width", "mean"),
                lam=("gp_lambda", "mean"), emax=("error", "max")).reset_index()
    out["cross_validate"] = agg.to_dict("records")
    return out


def _same(now, before, path=""):
    if isinstance(before, dict):
        assert set(now) == set(before), path
        for k in before:
            _same(now[k], before[k], f"{path}/{k}")
    elif isinstance(before, list):
        assert len(now) == len(before), path
        for i, (u, v) in enumerate(zip(now, before)):
            _same(u, v, f"{path}[{i}]")
    elif isinstance(before, float):
        assert (np.isnan(now) and np.isnan(before)) or abs(now - before) <= 1e-12 * max(1.0, abs(before)), \
            (path, now, before)
    else:
        assert now == before, (path, now, before)


def test_the_numbers_are_those_before_the_speed_ups():
    _same(json.loads(json.dumps(_outputs())), json.loads(BEFORE.read_text()))


def test_the_k_means_distances_are_numpys_sum_bit_for_bit():
    rng = np.random.default_rng(5)
    for d in (1, 2, 5, 8, 9, 12, 20):
        for scale in (1e-3, 1.0, 1e3):
            X, C = scale * rng.random((500, d)), scale * rng.random((30, d))
            np.testing.assert_array_equal(kmeans.squared_distances(X, C), ((X[:, None, :] - C[None]) ** 2).sum(axis=2))


def _plain_lloyd(X, k, seed, iterations=50):
    """Lloyd's k-means as the code before the bounds ran it (the same k-means++ seeding, then every distance every
    iteration): the bounds are what is checked, not the seeding."""
    n, rng = len(X), np.random.default_rng(seed)
    C = kmeans._seed_centres(X, k, rng)
    labels = np.zeros(n, int)
    for it in range(iterations):
        new = ((X[:, None, :] - C[None]) ** 2).sum(axis=2).argmin(axis=1)
        if it and np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            members = X[labels == j]
            C[j] = members.mean(axis=0) if len(members) else X[rng.integers(n)]
    return labels


def test_the_bounded_k_means_gives_plain_lloyds_labels():
    rng = np.random.default_rng(11)
    a, b = np.exp(rng.normal(0, 0.5, 2500)), rng.normal(0, 1.2, 2500)
    curves = E.curves(np.linspace(-1.5, 1.5, 9), a, b, np.zeros(2500)).T
    ab = np.column_stack([a, b])
    ab = (ab - ab.mean(axis=0)) / ab.std(axis=0)
    dup = np.repeat(rng.random((40, 3)), 30, axis=0)  # ties everywhere and clusters left empty
    grid = np.round(rng.random((600, 2)) * 4) / 4  # points equidistant from several centres
    for X in (curves, ab, dup, grid, 1e3 * curves[:800]):
        for k in (1, 2, 7, 40):
            for seed in (0, 3):
                np.testing.assert_array_equal(kmeans.lloyd(X, k, seed), _plain_lloyd(X, k, seed), err_msg=f"k={k}")


def test_the_validation_folds_give_the_same_table_on_two_processes():
    from benchloupe.engine import replicates

    rng, a, b, c, th, y = _sim(seed=9, n=200, N=150)
    mask = np.ones_like(y, bool)
    mask[:20, :30] = False  # partly answered models train the items but are never held out
    one = ev.cross_validate(y.astype(np.int8), mask, [5, 20], chance=c, max_test=30)
    with replicates.use(replicates.Workers(jobs=2)):
        two = ev.cross_validate(y.astype(np.int8), mask, [5, 20], chance=c, max_test=30)
    floats = ev.cross_validate(y, mask, [5, 20], chance=c, max_test=30)
    assert set(one["model"]) <= set(range(20, 200))
    for other in (two, floats):
        assert one.equals(other)


def test_the_mean_curves_table_gives_the_direct_values_to_1e_13():
    rng = np.random.default_rng(21)
    for N, spread, chance in ((14000, 0.3, 0.0), (300, 0.8, 0.25), (40, 1.2, 0.0)):
        a = np.exp(rng.normal(0, spread, N)) * np.where(rng.random(N) < 0.03, -1, 1)  # a few reversed items
        cal = E.calibration(a, rng.normal(0, 1.5, N), np.where(rng.random(N) < 0.5, chance, 0.0),
                            rng.normal(0, 1, 500))
        theta = np.concatenate([rng.uniform(cal.grid[0], cal.grid[-1], 1500), [cal.grid[0], cal.grid[-1]],
                                rng.normal(0, 10, 300)])  # some beyond the table: evaluated directly
        direct = E.curves(theta, cal.a, cal.b, cal.c).mean(axis=1)
        assert np.max(np.abs(E.mean_curve(cal, theta) - direct)) <= 1e-12 / 5
        assert cal._mean  # the table was used
