"""The compute backend of the dense static passes (issue 16): every backend this machine has gives the same fused
pass and the same fits (CUDA cases skip without a GPU); float32 passes with the float64 polish match float64."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from benchloupe.engine.backend import Backend, cuda_available, fused_pass, resolve
from benchloupe.engine.common import EngineError
from benchloupe.engine.joint import JointConfig, StaticData, fit_joint
from benchloupe.engine.joint.objective import _Problem
from benchloupe.engine.stats import spearman
from tests.unit._joint_sim import simulate

_HAS_TORCH = importlib.util.find_spec("torch") is not None
BACKENDS = [
    pytest.param(Backend("numpy", "cpu", "float64"), id="numpy-f64"),
    pytest.param(Backend("numpy", "cpu", "float32"), id="numpy-f32"),
    pytest.param(Backend("torch", "cpu", "float64"), id="torch-cpu-f64",
                 marks=pytest.mark.skipif(not _HAS_TORCH, reason="torch not installed")),
    pytest.param(Backend("torch", "cuda", "float32"), id="torch-cuda-f32",
                 marks=pytest.mark.skipif(not cuda_available(), reason="no CUDA device")),
]


def _reference_sums(pr, th, b, k):
    """The sums of one pass from the float64 per-cell terms over the whole matrix."""
    a = np.exp(k)
    _, X, E = pr._logits(th, b, k)
    L, R, V = pr._cell_terms(X, E, pr.Y, pr.N, pr.c, 1)
    return [R @ a, V @ (a * a), L.sum(0), R.sum(0), th @ R, V.sum(0), th @ V, (th * th) @ V]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("missing,trials", [(0.0, None), (0.2, None), (0.1, 4)])
def test_fused_pass_matches_the_cell_terms(backend, missing, trials):
    rng = np.random.default_rng(5)
    M, n = 300, 700  # several row blocks and both threads
    th, b, k = rng.normal(size=M), rng.normal(size=n), rng.normal(0, 0.5, n)
    k[:5] = 4.0  # sharp items: |X| far beyond float32's exp range
    mask = rng.random((M, n)) >= missing
    if trials is None:
        y = (rng.random((M, n)) < 0.5).astype(np.int8)
        S = StaticData(y, mask)
    else:
        N = rng.integers(1, trials + 1, size=(M, n))
        S = StaticData(rng.binomial(N, 0.4), mask, trials=N)
    pr = _Problem(S, None, M, JointConfig(mode="static"))
    r = fused_pass(pr.Y, pr.N, th, b, np.exp(k), backend=backend)
    got = [r.g_theta, r.h_theta, r.loss, r.s0R, r.s1R, r.s0V, r.s1V, r.s2V]
    # float64: rounding only; float32: ~1e-7 per cell, the theta gradient (a difference of two sums) ~1e-5
    tol = 1e-10 if backend.dtype == "float64" else 3e-5
    for g, ref in zip(got, _reference_sums(pr, th, b, k)):
        assert np.max(np.abs(g - ref)) <= tol * max(1.0, np.max(np.abs(ref)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_recovery_on_every_backend(backend):
    truth, S, _ = simulate(300, 400, 1, seed=7, missing=0.1)
    base = fit_joint(S, None, JointConfig(mode="static"), device=Backend("numpy", "cpu", "float64"))
    res = fit_joint(S, None, JointConfig(mode="static"), device=backend)
    assert res.converged
    assert spearman(res.theta, truth["theta"]) > 0.97
    # float32 sweeps end with the float64 polish: objective relative difference <= 1e-6, identical ranking
    assert abs(res.objective - base.objective) <= 1e-6 * abs(base.objective)
    assert np.array_equal(res.ranking(), base.ranking())
    assert res.provenance["backend"] == backend.kind and res.provenance["dtype"] == backend.dtype
    assert res.provenance["passes_equivalent"] > 0


def test_float32_passes_match_float64_within_tolerance():
    """A fit large enough to run float32 sweeps (the auto choice) against float64 throughout."""
    truth, S, _ = simulate(1200, 1800, 1, seed=8)
    f64 = fit_joint(S, None, JointConfig(mode="static"), device=Backend("numpy", "cpu", "float64"))
    f32 = fit_joint(S, None, JointConfig(mode="static"), device="cpu")
    assert f32.provenance["dtype"] == "float32"
    assert abs(f32.objective - f64.objective) <= 1e-6 * abs(f64.objective)
    assert np.array_equal(f32.ranking(), f64.ranking())
    np.testing.assert_allclose(f32.theta, f64.theta, atol=1e-4)


def test_device_choice():
    assert resolve("cpu", 10).as_dict() == {"backend": "numpy", "device": "cpu", "dtype": "float64"}
    assert resolve("cpu", 10**8).dtype == "float32"
    with pytest.raises(EngineError, match="device must be"):
        resolve("tpu")
    if not cuda_available():
        with pytest.raises(EngineError, match="no CUDA device"):
            resolve("cuda")
        assert resolve("auto", 10**9).kind == "numpy"


@pytest.mark.shared_data
@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_chembench_reference_agreement_on_every_backend(backend):
    """test_joint_reference's ChemBench static check (Spearman >= .99 with the reference's ranking, objective no
    higher than the reference's published parameters) on each backend, and the same ranking as numpy float64."""
    from benchloupe.engine.joint import objective
    from tests.unit.test_joint_reference import _as_result, _load

    S, _, theirs, _ = _load("chembench_static")
    cfg = JointConfig.reference(mode="static")
    base = fit_joint(S, None, cfg, device=Backend("numpy", "cpu", "float64"))
    ours = fit_joint(S, None, cfg, device=backend)
    assert spearman(ours.theta, theirs["theta"]) >= 0.99
    assert ours.objective <= objective(_as_result(theirs, cfg), S, None, cfg)
    assert abs(ours.objective - base.objective) <= 1e-6 * abs(base.objective)
    assert np.array_equal(ours.ranking(), base.ranking())


def test_float32_pass_with_item_weights_and_extreme_logits_matches_float64():
    """The float32 pass through tanh (backend._numpy_pass_tanh) with bootstrap item weights and logits far beyond
    float32's exp range (a = 30, |theta - b| up to 8): the same sums as float64 within float32's resolution, and no
    floating-point warning (tanh saturates where exp overflowed)."""
    rng = np.random.default_rng(11)
    M, n = 400, 900
    th, b, a = rng.normal(0, 2, M), rng.normal(0, 2, n), np.exp(rng.normal(0, 0.8, n))
    a[:20] = 30.0
    y = (rng.random((M, n)) < 1 / (1 + np.exp(-a * (th[:, None] - b)))).astype(np.int8)
    w = rng.integers(0, 4, n).astype(float)
    for weights in (None, w):
        ref = fused_pass(y, None, th, b, a, backend=Backend("numpy", "cpu", "float64"), weights=weights)
        with np.errstate(all="raise"):
            got = fused_pass(y, None, th, b, a, backend=Backend("numpy", "cpu", "float32"), weights=weights)
        for name in ("g_theta", "h_theta", "loss", "s0R", "s1R", "s0V", "s1V", "s2V"):
            g, r = getattr(got, name), getattr(ref, name)
            assert np.max(np.abs(g - r)) <= 3e-5 * max(1.0, np.max(np.abs(r))), name


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("trials", [None, 3])
def test_a_pass_without_losses_gives_the_same_gradients_bit_for_bit(dtype, trials):
    """``loss=False`` (the frozen-item ability Newton, the block sweeps' correction passes) skips the per-cell log:
    the theta gradient and curvature are those of the full pass exactly, and no loss is returned."""
    rng = np.random.default_rng(12)
    M, n = 300, 700
    th, b, a = rng.normal(size=M), rng.normal(size=n), np.exp(rng.normal(0, 0.5, n))
    if trials is None:
        Y, N = (rng.random((M, n)) < 0.5).astype(np.int8), None
    else:
        N = rng.integers(1, trials + 1, size=(M, n)).astype(np.int8)
        Y = rng.binomial(N, 0.4).astype(np.int8)
    bk = Backend("numpy", "cpu", dtype)
    full = fused_pass(Y, N, th, b, a, cols=False, backend=bk)
    lean = fused_pass(Y, N, th, b, a, cols=False, backend=bk, loss=False)
    assert lean.loss is None
    assert np.array_equal(lean.g_theta, full.g_theta) and np.array_equal(lean.h_theta, full.h_theta)
    both = fused_pass(Y, N, th, b, a, backend=bk, loss=False)  # per-item sums are kept too
    ref = fused_pass(Y, N, th, b, a, backend=bk)
    for name in ("s0R", "s1R", "s0V", "s1V", "s2V"):
        assert np.array_equal(getattr(both, name), getattr(ref, name))


@pytest.mark.parametrize("missing", [0.0, 0.3])
@pytest.mark.parametrize("weighted", [False, True])
def test_float32_pass_over_a_mask_of_one_trial_cells_matches_float64(missing, weighted):
    """Held-out refits and benchmarks with missing cells pass the observed mask as 0/1 trials (``trials_01``):
    the float32 tanh route zeroes the unobserved logits and gives the float64 pass's sums to float32's
    resolution, over every block and thread, with item weights too; the float64 pass ignores the flag."""
    rng = np.random.default_rng(13)
    M, n = 400, 900
    th, b, a = rng.normal(0, 2, M), rng.normal(0, 2, n), np.exp(rng.normal(0, 0.8, n))
    a[:20] = 30.0
    y = (rng.random((M, n)) < 1 / (1 + np.exp(-a * (th[:, None] - b)))).astype(np.int8)
    mask = (rng.random((M, n)) >= missing).astype(np.int8)
    y *= mask
    w = rng.integers(0, 4, n).astype(float) if weighted else None
    ref = fused_pass(y, mask, th, b, a, backend=Backend("numpy", "cpu", "float64"), weights=w)
    same = fused_pass(y, mask, th, b, a, backend=Backend("numpy", "cpu", "float64"), weights=w, trials_01=True)
    got = fused_pass(y, mask, th, b, a, backend=Backend("numpy", "cpu", "float32"), weights=w, trials_01=True)
    for name in ("g_theta", "h_theta", "loss", "s0R", "s1R", "s0V", "s1V", "s2V"):
        g, r = getattr(got, name), getattr(ref, name)
        assert np.array_equal(getattr(same, name), r)
        assert np.max(np.abs(g - r)) <= 3e-5 * max(1.0, np.max(np.abs(r))), name
    lean = fused_pass(y, mask, th, b, a, backend=Backend("numpy", "cpu", "float32"), weights=w, trials_01=True,
                      cols=False, loss=False)
    full = fused_pass(y, mask, th, b, a, backend=Backend("numpy", "cpu", "float32"), weights=w, trials_01=True,
                      cols=False)
    assert lean.loss is None and np.array_equal(lean.g_theta, full.g_theta)
