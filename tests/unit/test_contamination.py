"""Contamination windows (issue 14, beyond the paper): a simulated pre-cutoff shift is found with the right sign and
a small p, and nothing is found without it."""

import numpy as np
import pytest

from benchloupe.engine.common import EngineError
from benchloupe.engine.contamination import (
    WindowTest,
    binned_series,
    contamination_windows,
    holm,
    leave_one_out_p,
    residual_matrix,
    to_days,
    window_test,
    window_tests,
)
from benchloupe.engine.joint import JointConfig, StaticData, fit_joint


def _world(contaminated=(), boost=0.35, seed=0, n_models=24, n_items=300):
    """2PL data; items dated uniformly over 1000 days, every model a cutoff at day 300-700; a contaminated model
    solves a ``boost`` share of its failed pre-cutoff items (a broad shift, not a few cells).  Models are sorted by
    ability, so low indices have many failures to contaminate."""
    rng = np.random.default_rng(seed)
    theta, b = np.sort(rng.normal(size=n_models)), rng.normal(size=n_items)  # model 0 the weakest
    a = np.exp(rng.normal(0.3, 0.3, n_items))
    p = 1 / (1 + np.exp(-a * (theta[:, None] - b)))
    y = (rng.random(p.shape) < p).astype(float)
    days = rng.uniform(0, 1000, n_items)
    cut = rng.uniform(300, 700, n_models)
    for m in contaminated:
        pre = days <= cut[m]
        flip = pre & (y[m] == 0) & (rng.random(n_items) < boost)
        y[m, flip] = 1
    return StaticData(y, np.ones_like(y, bool)), days, cut


def _run(static, days, cut, **kw):
    res = fit_joint(static, None, JointConfig(mode="static"))
    e = residual_matrix(res.p_static(), static.correct.astype(float), static.mask)
    return contamination_windows(e, static.mask.astype(float), days, cut, n_boot=300, n_perm=2000, **kw)


def test_a_simulated_window_is_found_with_the_right_sign():
    static, days, cut = _world(contaminated=(2, 7))
    out = _run(static, days, cut).set_index("model_idx")
    assert set(out.index[out.flagged]) == {2, 7}
    for m in (2, 7):
        assert out.loc[m, "shift"] > 0.05 and out.loc[m, "ci_low"] > 0
        assert out.loc[m, "p_perm"] < 0.01


def test_no_window_without_contamination():
    static, days, cut = _world(contaminated=())
    out = _run(static, days, cut)
    assert len(out) == 24 and not out.flagged.any()
    assert out.p_perm.min() > 0.001  # permutation p is not degenerate


def test_leave_one_out_item_parameters_reveal_more_of_the_shift():
    static, days, cut = _world(contaminated=(2,), seed=1)
    res = fit_joint(static, None, JointConfig(mode="static"))
    e = residual_matrix(res.p_static(), static.correct.astype(float), static.mask)
    p_loo = leave_one_out_p(static, None, JointConfig(mode="static"), [2, 5])
    assert np.isnan(p_loo[0]).all() and np.isfinite(p_loo[2]).all()
    e_loo = residual_matrix(p_loo, static.correct.astype(float), static.mask)
    out = contamination_windows(e, np.ones(e.shape), days, cut, resid_loo=e_loo, n_boot=200, n_perm=400)
    row = out.set_index("model_idx").loc[2]
    assert row["shift_loo"] >= row["shift"] > 0
    assert row["p_perm_loo"] < 0.01


def test_window_test_permutation_and_bootstrap_shapes():
    rng = np.random.default_rng(0)
    e = rng.normal(size=200)
    pre = np.arange(200) < 80
    t = window_test(e, np.ones(200), pre, n_boot=200, n_perm=999)
    assert t.ci_low < t.shift < t.ci_high and 0 < t.p_perm <= 1 and (t.n_pre, t.n_post) == (80, 120)
    e[pre] += 1.0
    assert window_test(e, np.ones(200), pre, n_perm=999).p_perm == pytest.approx(1 / 1000)
    with pytest.raises(EngineError):
        window_test(e[:3], np.ones(3), np.array([True, False, False]))


def test_helpers():
    d = to_days(["1970-01-02", "2023", None, "garbage", 5, "2024-03-01T12:00:00Z"])
    assert d[0] == 1.0 and d[1] == pytest.approx(19358.0) and np.isnan(d[2]) and np.isnan(d[3]) and d[4] == 5
    assert d[5] == pytest.approx(19783.5)
    np.testing.assert_allclose(holm(np.array([0.01, 0.04, np.nan, 0.03])), [0.03, 0.06, np.nan, 0.06])
    s = binned_series(np.arange(10.0), np.arange(10.0), bins=5)
    assert s["n"] == [2] * 5 and s["mean_residual"][0] == 0.5


def test_leave_one_out_in_a_joint_fit_drops_the_models_pairs():
    from tests.unit._joint_sim import simulate

    _, S, A = simulate(n_models=12, n_static=60, n_arena=30, seed=2)
    p = leave_one_out_p(S, A, JointConfig(), [1, 4])
    assert np.isfinite(p[[1, 4]]).all() and np.isnan(p[[0, 2, 3]]).all()
    full = fit_joint(S, A, JointConfig()).p_static()
    d = np.abs(p[1] - full[1])  # its own cells no longer shape the items: most move a little, a few a lot
    assert d.max() > 0 and np.median(d) < 0.1


def test_permutation_labels_are_the_argsort_subset_bit_for_bit():
    """The permutation test's labels (a sort of integer keys, issue 26) are the old ``argsort(u) < n_pre`` labels
    for the same draws, so every permutation p stays the same."""
    from benchloupe.engine.contamination import _first_of_sorted

    for n, n_pre, seed in ((200, 80, 0), (14000, 6000, 1), (7, 2, 2)):
        u = np.random.default_rng(seed).random((64, n))
        first = np.zeros(n, np.uint64)
        first[:n_pre] = 1
        want = np.argsort(u, axis=1) < n_pre
        got = _first_of_sorted(u.copy(), first)
        assert got.dtype == bool and np.array_equal(got, want) and (got.sum(1) == n_pre).all()
    # and whole tests of fixed cases, computed by the code as it was before the change
    rng = np.random.default_rng(3)
    e, w = rng.normal(size=500), rng.uniform(1, 3, 500)
    pre = rng.random(500) < 0.4
    e[pre] += 0.12
    t = window_test(e, w, pre, n_boot=100, n_perm=1500, seed=4)
    assert t == _old_window_test(e, w, pre, 100, 1500, 4) and 0.001 < t.p_perm < 0.05
    # several residual vectors share one set of draws (the leave-one-out test's): each as if alone
    e2 = e + rng.normal(0, 0.3, 500)
    both = window_tests([e, e2], w, pre, n_boot=100, n_perm=1500, seed=4)
    assert both == [t, _old_window_test(e2, w, pre, 100, 1500, 4)]
    # unit weights (0/1 cells) skip the weighted sums: the same bits
    ones = np.ones(500)
    assert window_tests([e, e2], ones, pre, n_boot=100, n_perm=1500, seed=4) == [
        _old_window_test(x, ones, pre, 100, 1500, 4) for x in (e, e2)]


def _old_window_test(e, w, pre, n_boot, n_perm, seed):
    """window_test as it was written before issue 26 (argsort labels, one vector), the reference."""
    n_pre, n_post = int(pre.sum()), int((~pre).sum())
    e_pre, w_pre, e_post, w_post = e[pre], w[pre], e[~pre], w[~pre]
    m_pre, m_post = float(np.sum(e_pre * w_pre) / np.sum(w_pre)), float(np.sum(e_post * w_post) / np.sum(w_post))
    shift = m_pre - m_post
    rng = np.random.default_rng(seed)
    ip = rng.integers(0, n_pre, (n_boot, n_pre))
    iq = rng.integers(0, n_post, (n_boot, n_post))
    boot = ((e_pre[ip] * w_pre[ip]).sum(1) / w_pre[ip].sum(1)) - ((e_post[iq] * w_post[iq]).sum(1) / w_post[iq].sum(1))
    ew, tot_ew, tot_w, exceed = e * w, np.sum(e * w), w.sum(), 0
    for start in range(0, n_perm, 256):
        k = min(256, n_perm - start)
        lab = np.argsort(rng.random((k, len(e))), axis=1) < n_pre
        s_ew, s_w = (lab * ew).sum(1), (lab * w).sum(1)
        perm = s_ew / s_w - (tot_ew - s_ew) / (tot_w - s_w)
        exceed += int(np.sum(np.abs(perm) >= abs(shift) - 1e-15))
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return WindowTest(float(shift), float(lo), float(hi), (1 + exceed) / (1 + n_perm), n_pre, n_post, m_pre, m_post)


def test_metadata_keys_read_each_keys_dates_once_with_the_same_verdicts():
    """Which metadata keys hold dates: one to_days per key over its distinct texts (issue 26: one per value was
    14,022 pandas calls, ~40 s of the command at 14,000 items), the verdict of reading each value alone."""
    import json

    import pandas as pd

    from benchloupe.jobs.diagnostics import DATE_TEXT, metadata_keys

    values = ["2024-03-01", "2024", "2024-03", "2024/3/1", "3/1/2024", " 2023-12-31T10:00:00Z ", "2024-13-45",
              "2024-02-30", "12", "1/1/10000", "2024-03-01T25:00", None, 5, "garbage", "", "\x00", "2024-3-1"]
    rng = np.random.default_rng(0)
    for trial in range(60):
        rows = []
        for _ in range(int(rng.integers(1, 12))):
            meta = {k: values[int(rng.integers(len(values)))] for k in ("date", "cutoff", "other")
                    if rng.random() < 0.8}
            meta["good"] = values[int(rng.integers(6))]
            rows.append(json.dumps(meta) if rng.random() < 0.9 else "not json")
        frame = pd.DataFrame({"metadata": rows})
        want: dict = {}
        for raw in rows:  # the verdict value by value, as before
            try:
                meta = json.loads(raw)
            except json.JSONDecodeError:
                continue
            for k, v in meta.items():
                if v is None:
                    want.setdefault(k, True)
                    continue
                ok = isinstance(v, str) and DATE_TEXT.fullmatch(v.strip()) is not None \
                    and np.isfinite(to_days([v.strip()])[0])
                want[k] = want.get(k, True) and ok
        got = metadata_keys(frame)
        assert got == want and list(got) == list(want), (trial, rows)
        assert got["good"]
