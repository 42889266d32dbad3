"""Spectral MIRT, dimension selection, residual family DIF, cells and anchor weights (paper 002, C.2-C.5)."""

import numpy as np
import pytest

from benchloupe.engine.common import EngineError, thread_pool
from benchloupe.engine.dif import (
    anchor_weights,
    difficulty_cells,
    fit_family_dif,
    fit_offsets,
    purify,
    randomized_svd,
    select_dimension,
)


def simulate(n_items=400, n_per_family=40, n_families=3, k=3, dif_sd=0.8, seed=0):
    """Items x models 0/1 data from b + a.theta + delta[item, family] with known delta (rows sum to zero)."""
    rng = np.random.default_rng(seed)
    n_models = n_per_family * n_families
    codes = np.repeat(np.arange(n_families), n_per_family)
    b = rng.normal(0.3, 1.0, n_items)
    a = rng.normal(0, 0.8, (n_items, k))
    theta = rng.normal(0, 1, (n_models, k))
    delta = rng.normal(0, dif_sd, (n_items, n_families))
    delta -= delta.mean(axis=1, keepdims=True)
    logits = b[:, None] + a @ theta.T + delta[:, codes]
    y = (rng.random(logits.shape) < 1 / (1 + np.exp(-logits))).astype(float)
    owners = np.array([f"owner{m // 2}" for m in range(n_models)])
    return y, codes, delta, owners


def test_randomized_svd_matches_exact_svd_on_low_rank_matrix():
    rng = np.random.default_rng(1)
    m = rng.normal(size=(300, 5)) @ rng.normal(size=(5, 120))
    for mat in (m, m.T):  # both orientations (the transposed path too)
        u, s, vt = randomized_svd(mat, 5, seed=3)
        exact = np.linalg.svd(mat, compute_uv=False)[:5]
        np.testing.assert_allclose(s, exact, rtol=1e-10)  # rank 5 < 15 samples: exact up to rounding
        np.testing.assert_allclose(u @ np.diag(s) @ vt, mat, atol=1e-8)
        # sign convention: largest-|.| entry of each U column is positive (svd_flip)
        assert (u[np.abs(u).argmax(axis=0), np.arange(5)] > 0).all()
    a, _, _ = randomized_svd(m, 3, seed=7)
    b, _, _ = randomized_svd(m, 3, seed=7)
    assert np.array_equal(a, b)


def _lu_normalised_svd(matrix, k, seed, n_iter=5, oversamples=10):
    """The reference's randomized SVD (scikit-learn 1.6: LU-normalised power iterations, scipy.linalg)."""
    import scipy.linalg

    a = matrix.T if matrix.shape[0] < matrix.shape[1] else matrix
    q = np.random.RandomState(seed).normal(size=(a.shape[1], k + oversamples))
    for _ in range(n_iter):
        q, _ = scipy.linalg.lu(a @ q, permute_l=True)
        q, _ = scipy.linalg.lu(a.T @ q, permute_l=True)
    q, _ = scipy.linalg.qr(a @ q, mode="economic")
    u_hat, s, vt = scipy.linalg.svd(q.T @ a, full_matrices=False, lapack_driver="gesdd")
    u = q @ u_hat
    if a is matrix:  # svd_flip: U-based signs, on the transposed problem V-based (the original's U)
        signs = np.sign(u[np.argmax(np.abs(u), axis=0), np.arange(u.shape[1])])
    else:
        signs = np.sign(vt[np.arange(vt.shape[0]), np.argmax(np.abs(vt), axis=1)])
    u, vt = u * signs, vt * signs[:, None]
    return (vt[:k].T, s[:k], u[:, :k].T) if a is not matrix else (u[:, :k], s[:k], vt[:k])


@pytest.mark.parametrize("shape", [(400, 120), (90, 300)])
def test_qr_normalised_power_iterations_give_the_reference_lu_result(shape):
    """Our power iterations normalise by QR (numpy) where the reference uses LU (scipy): both span the same
    column space, so on a full-rank noisy matrix (not exactly low rank: the iterations matter) U, S, V agree up
    to rounding, signs included."""
    rng = np.random.default_rng(4)
    m = rng.normal(size=(shape[0], 8)) @ rng.normal(size=(8, shape[1])) + 0.3 * rng.normal(size=shape)
    u, s, vt = randomized_svd(m, 6, seed=12)
    u_ref, s_ref, vt_ref = _lu_normalised_svd(m, 6, seed=12)
    np.testing.assert_allclose(s, s_ref, rtol=1e-10)
    np.testing.assert_allclose(u, u_ref, atol=1e-8)
    np.testing.assert_allclose(vt, vt_ref, atol=1e-8)


def test_residual_dif_recovers_injected_effects():
    y, codes, delta, owners = simulate()
    offsets = fit_offsets(y, None, np.ones(y.shape[0], dtype=bool), 3, seed=11)
    fit = fit_family_dif(y, None, offsets, codes, 3)
    np.testing.assert_allclose(fit.effects.sum(axis=1), 0, atol=1e-10)  # sum-to-zero per item
    np.testing.assert_allclose(fit.dif_range, fit.effects.max(axis=1) - fit.effects.min(axis=1))
    corr = [np.corrcoef(fit.effects[:, f], delta[:, f])[0, 1] for f in range(3)]
    # The reference's test asks for mean r > .45 (500 items, 3 x 30 models, penalty 3); with 40 models
    # per family and sd .8 effects we expect well above that; .6 leaves room for Monte Carlo noise.
    assert np.mean(corr) > 0.6, corr
    assert fit.converged or fit.cycles == 5


def test_dif_is_zero_without_family_signal():
    y, codes, _, _ = simulate(dif_sd=0.0, seed=4)
    offsets = fit_offsets(y, None, np.ones(y.shape[0], dtype=bool), 3, seed=1)
    noise = fit_family_dif(y, None, offsets, codes, 3).dif_range
    y2, codes2, _, _ = simulate(dif_sd=1.0, seed=4)
    offsets2 = fit_offsets(y2, None, np.ones(y2.shape[0], dtype=bool), 3, seed=1)
    signal = fit_family_dif(y2, None, offsets2, codes2, 3).dif_range
    assert np.median(signal) > 1.5 * np.median(noise)


def test_winogrande_shaped_anchor_counts():
    """Reference check (B.5): 1,267 items in one group -> cells 317/317/317/316 -> 632 / 380 / 887 anchors."""
    rng = np.random.default_rng(0)
    cells = difficulty_cells(rng.normal(size=1267), np.array(["wino"] * 1267))
    sizes = sorted(np.unique(cells, return_counts=True)[1].tolist())
    assert sizes == [316, 317, 317, 317]
    dif = rng.random(1267)
    for fraction, expected in ((0.5, 632), (0.3, 380), (0.7, 887)):
        selected, weights = anchor_weights(dif, cells, fraction)
        assert selected.sum() == expected  # 158.5 -> 158 (half to even) in the three 317-item cells at 0.5
        assert weights.sum() == pytest.approx(1267)
        for cell in np.unique(cells):
            in_cell = cells == cell
            assert weights[in_cell].sum() == pytest.approx(in_cell.sum())  # every cell keeps its mass


def test_anchor_weights_keep_lowest_dif_and_cells_nest_in_groups():
    dif = np.array([0.9, 0.1, 0.5, 0.2, 0.8, 0.3])
    cells = np.array(["g|difficulty_0"] * 3 + ["g|difficulty_1"] * 3)
    selected, weights = anchor_weights(dif, cells, 2 / 3)
    assert selected.tolist() == [False, True, True, True, False, True]
    assert weights.tolist() == [0, 1.5, 1.5, 1.5, 0, 1.5]
    groups = np.array(["a"] * 5 + ["b"] * 3)
    labels = difficulty_cells(np.arange(8.0)[::-1], groups, strata=4)
    assert all(label.startswith(g + "|") for label, g in zip(labels, groups, strict=True))
    assert len(set(labels[:5])) == 4 and len(set(labels[5:])) == 3  # min(4, n) strata per group
    assert labels[4] == "a|difficulty_0"  # lowest intercept (hardest) first


def test_dimension_selection_one_se_rule_and_true_rank():
    y, codes, _, owners = simulate(n_items=300, n_per_family=60, dif_sd=0.0, k=4, seed=2)
    groups = np.array([f"g{i % 3}" for i in range(y.shape[0])])
    sel = select_dimension(y, None, owners, groups, (1, 2, 4, 8, 16, 32), owner_seed=5, svd_seed=5)
    curve = sel.curve.frame()
    threshold = curve["mean_log_loss"].min() + curve.loc[curve["mean_log_loss"].idxmin(), "se"]
    assert sel.threshold == pytest.approx(threshold)
    assert sel.k == curve.loc[curve["mean_log_loss"] <= threshold, "dimension"].min()
    assert sel.k in (2, 4)  # true rank 4; one-SE may prefer the smaller neighbour
    assert curve["n_calibration_items"].iloc[0] == 150


def test_purify_runs_three_rounds_and_refuses_infeasible_k():
    y, codes, _, _ = simulate(n_items=120, n_per_family=20, seed=3)
    groups = np.array(["a", "b"] * 60)
    pur = purify(y, None, codes, 3, groups, 2, seed0=9, fraction=0.5)
    # 2 groups x 4 cells of 15 items; round(7.5) = 8 (half to even) -> 64 anchors
    assert len(pur.rounds) == 3 and pur.selected.sum() == 64
    assert pur.weights.sum() == pytest.approx(120)
    with pytest.raises(EngineError, match="K=64"):
        fit_offsets(y, None, pur.selected, 64, seed=1)


def _naive_family_dif(y, offsets, codes, n_families, penalty=1.0, cycles=5, newton_iters=30, tol=1e-8):
    """The block-coordinate Newton of B.4 on whole matrices, as the reference runs it (REFERENCE-IMPLEMENTATIONS.md
    B.4): intercepts once without effects, then per cycle the intercepts and each family in turn, and the cycles
    stop once every family's Newton loop ended below tol (the intercepts' own convergence does not count)."""
    from scipy.special import expit

    n_items = y.shape[0]

    def intercepts(b, e):
        for _ in range(newton_iters):
            p = expit(offsets + b[:, None] + e[:, codes])
            step = np.clip((y.sum(axis=1) - p.sum(axis=1)) / ((p * (1 - p)).sum(axis=1) + 1e-9), -2, 2)
            b += step
            if np.abs(step).max() < tol:
                break

    mean = y.mean(axis=1)
    b = np.log(np.clip(mean, 1e-4, 1 - 1e-4) / (1 - np.clip(mean, 1e-4, 1 - 1e-4))) - offsets.mean(axis=1)
    e = np.zeros((n_items, n_families))
    intercepts(b, e)  # once without family effects, then the cycles
    for _ in range(cycles):
        intercepts(b, e)
        largest = 0.0
        for f in range(n_families):  # one family at a time, each to its own stop
            cols = codes == f
            for _ in range(newton_iters):
                p = expit(offsets[:, cols] + b[:, None] + e[:, f][:, None])
                step = np.clip(((y[:, cols] - p).sum(axis=1) - penalty * e[:, f])
                               / ((p * (1 - p)).sum(axis=1) + penalty), -2, 2)
                e[:, f] += step
                if np.abs(step).max() < tol:
                    break
            largest = max(largest, np.abs(step).max())
        c = e.mean(axis=1)
        e -= c[:, None]
        b += c
        if largest < tol:  # the reference's early stop: the family loops' last steps only
            break
    return b, e


def test_fused_newton_matches_whole_matrix_newton_and_threads_do_not_change_it(monkeypatch):
    """The fused, blocked, threaded Newton pass (issue 16) solves the same B.4 problem as the whole-matrix code,
    and splitting the pass into blocks on threads gives the same numbers bit for bit."""
    from benchloupe.engine import dif

    y, codes, _, _ = simulate(n_items=300, n_per_family=50)
    offsets = fit_offsets(y, None, np.ones(y.shape[0], dtype=bool), 3, seed=5)
    single = fit_family_dif(y, None, offsets, codes, 3)
    b, e = _naive_family_dif(y, offsets, codes, 3)
    np.testing.assert_allclose(single.intercept, b, atol=1e-7)
    np.testing.assert_allclose(single.effects, e, atol=1e-7)
    monkeypatch.setattr(dif, "_THREADED_CELLS", 1)  # every pass on threads, in small blocks
    monkeypatch.setattr(dif, "_BLOCK_CELLS", 1000)
    monkeypatch.setattr(dif, "usable_cores", lambda cap=8: 2)
    thread_pool.cache_clear()
    threaded = fit_family_dif(y, None, offsets, codes, 3)
    thread_pool.cache_clear()
    assert np.array_equal(threaded.intercept, single.intercept)
    assert np.array_equal(threaded.effects, single.effects)


def test_an_item_nobody_answers_does_not_keep_the_cycles_going():
    """Issue 22 (found by the differential test against the reference): an item no model answers correctly has
    an intercept that never converges (every Newton step is clipped toward minus infinity), so the fit used to
    run all 5 cycles where the reference stops once its family loops converge, and it skipped the reference's
    first intercept fit; with a family that never answers some items, the effects then differed by 0.04 and
    the anchors by several items.  Now both follow the reference's order and stop, to rounding."""
    y, codes, _, _ = simulate(n_items=120, n_per_family=30)
    y[0] = 0.0  # nobody answers item 0
    y[1] = 1.0  # everybody answers item 1
    y[2:40, codes == 1] = 0.0  # family 1 never answers items 2..39
    offsets = fit_offsets(y, None, np.ones(y.shape[0], dtype=bool), 2, seed=7)
    fit = fit_family_dif(y, None, offsets, codes, 3)
    b, e = _naive_family_dif(y, offsets, codes, 3)
    np.testing.assert_allclose(fit.effects, e, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fit.intercept[2:], b[2:], rtol=0, atol=1e-9)
    # items 0 and 1 diverge: their p is 1e-13 from 0 or 1, where our sigmoid and scipy's expit differ in the
    # last bits, so only their direction and size are compared (they sort first and last either way)
    assert fit.intercept[0] < -25 and b[0] < -25 and fit.intercept[1] > 25 and b[1] > 25
    assert fit.cycles < 5


def test_threaded_product_and_float32_range_finder(monkeypatch):
    from benchloupe.engine import dif

    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(301, 57)), rng.normal(size=(57, 13))
    monkeypatch.setattr(dif, "_THREADED_FLOPS", 1)
    monkeypatch.setattr(dif, "usable_cores", lambda cap=8: 2)
    thread_pool.cache_clear()
    np.testing.assert_allclose(dif.threaded_matmul(a, b), a @ b, rtol=1e-13)
    np.testing.assert_allclose(dif.threaded_matmul(a.T, a[:, :5]), a.T @ a[:, :5], rtol=1e-12, atol=1e-12)
    thread_pool.cache_clear()
    m = rng.normal(size=(400, 6)) @ rng.normal(size=(6, 150)) + 0.01 * rng.normal(size=(400, 150))
    _, s64, _ = randomized_svd(m, 6, seed=2)
    monkeypatch.setattr(dif, "F32_SVD_CELLS", 1)  # power iterations in float32, projection and SVD in float64
    u, s32, vt = randomized_svd(m, 6, seed=2)
    assert u.dtype == np.float64 and vt.dtype == np.float64
    np.testing.assert_allclose(s32, s64, rtol=1e-6)
