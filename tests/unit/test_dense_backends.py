"""The near-tie audit and the coverage draws on every backend this machine has (issue 16): numpy (the default,
unchanged), torch on the CPU (forced with a ``Backend``, as a GPU machine runs the same code on CUDA) and CUDA
(skips without a GPU).

Stated tolerances of the torch path against numpy (engine/dense.py): DIF intercepts/effects/ranges within 1e-9
absolute; the same K, anchors, pair sets and reversal counts; exact-mode anchor and control scores identical
(integer weights: exact float64 sums); spectral factors within 1e-9; C.6 draws identical (same CPU generator),
their metrics within 1e-12 relative.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchloupe.engine import dense
from benchloupe.engine.backend import Backend, cuda_available
from benchloupe.engine.common import EngineError
from benchloupe.engine.dif import fit_family_dif, randomized_svd
from benchloupe.engine.neartie import AuditConfig, run_audit
from benchloupe.engine.neartie.scoring import _scores
from tests.unit.test_dif import simulate as simulate_dif
from tests.unit.test_neartie import simulate as simulate_audit

ROOT = Path(__file__).resolve().parents[2]
_HAS_TORCH = importlib.util.find_spec("torch") is not None
NUMPY = Backend("numpy", "cpu", "float64")
TORCH_BACKENDS = [
    pytest.param(Backend("torch", "cpu", "float64"), id="torch-cpu",
                 marks=pytest.mark.skipif(not _HAS_TORCH, reason="torch not installed")),
    pytest.param(Backend("torch", "cuda", "float64"), id="cuda",
                 marks=pytest.mark.skipif(not cuda_available(), reason="no CUDA device")),
]
BACKENDS = [pytest.param(NUMPY, id="numpy"), *TORCH_BACKENDS]


def _dif_case(missing: float):
    y, codes, dif, _ = simulate_dif(seed=3)
    rng = np.random.default_rng(4)
    offsets = rng.normal(0, 0.8, y.shape)
    obs = None if not missing else (rng.random(y.shape) >= missing).astype(float)
    return y, obs, offsets, codes, dif.shape[1]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("missing", [0.0, 0.15])
def test_dif_newton_agrees_with_numpy(backend, missing):
    y, obs, offsets, codes, n_fam = _dif_case(missing)
    base = fit_family_dif(y, obs, offsets, codes, n_fam)
    with dense.use(backend):
        got = fit_family_dif(y, obs, offsets, codes, n_fam)
    for a, b in ((got.intercept, base.intercept), (got.effects, base.effects), (got.dif_range, base.dif_range)):
        assert np.max(np.abs(a - b)) <= 1e-9
    assert (got.cycles, got.converged) == (base.cycles, base.converged)
    if backend is NUMPY:  # the default path is the same arithmetic as before: bit for bit
        assert np.array_equal(got.effects, base.effects)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("float32", [False, True])
def test_spectral_step_agrees_with_numpy(backend, float32, monkeypatch):
    rng = np.random.default_rng(6)
    m = rng.normal(size=(300, 4)) @ rng.normal(size=(4, 180)) + 0.01 * rng.normal(size=(300, 180))
    if float32:  # the float32 range finder of large matrices, forced on a small one
        monkeypatch.setattr("benchloupe.engine.dif.F32_SVD_CELLS", 1)
    u0, s0, vt0 = randomized_svd(m, 4, seed=11)
    with dense.use(backend):
        u, s, vt = randomized_svd(m, 4, seed=11)
    tol = 1e-5 if float32 else 1e-9  # float32 power iterations: the subspace to float32's resolution
    np.testing.assert_allclose(s, s0, rtol=tol)
    assert np.max(np.abs(u - u0)) <= tol and np.max(np.abs(vt - vt0)) <= tol


@pytest.mark.parametrize("backend", TORCH_BACKENDS)
def test_control_scoring_is_exact_on_the_device(backend):
    rng = np.random.default_rng(8)
    y = (rng.random((40, 500)) < 0.6).astype(float)
    w = rng.integers(0, 4, size=(500, 300)).astype(float) / 3.0  # n_cell / n_sel style weights, scale 3
    obs = (rng.random(y.shape) >= 0.1).astype(float)
    base_exact, base_obs = _scores(y, None, w, 3), _scores(y, obs, w)
    with dense.use(backend):
        exact, with_obs = _scores(y, None, w, 3), _scores(y, obs, w)
    assert np.array_equal(exact, base_exact)
    np.testing.assert_allclose(with_obs, base_obs, rtol=1e-12)


@pytest.fixture(scope="module")
def audit_sim():
    return simulate_audit(seed=2)


def _same_audit(a, b):
    assert a.summary == b.summary
    assert a.pairs.equals(b.pairs)
    for fa, fb in zip(a.fold_results, b.fold_results, strict=True):
        assert fa.selection.k == fb.selection.k
        assert np.array_equal(fa.purification.selected, fb.purification.selected)
        assert np.array_equal(fa.purification.cells, fb.purification.cells)
        fin_a, fin_b = fa.purification.final, fb.purification.final
        assert np.max(np.abs(fin_a.dif_range - fin_b.dif_range)) <= 1e-9
        assert np.max(np.abs(fin_a.effects - fin_b.effects)) <= 1e-9
        assert np.array_equal(fa.control_counts, fb.control_counts)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("missing", [False, True])
def test_audit_on_simulated_data_agrees(backend, missing, audit_sim):
    y, ids, fams, owners, groups = audit_sim
    cfg = AuditConfig(dimensions=(1, 2, 4, 8), controls=99)
    mask = None
    if missing:
        mask = np.random.default_rng(9).random(y.shape) >= 0.05
    base = run_audit(y, ids, fams, owners, groups, cfg, mask=mask)
    got = run_audit(y, ids, fams, owners, groups, cfg, mask=mask, device=backend)
    _same_audit(got, base)
    if not missing:  # exact mode: the anchor and control scores are the same numbers
        for fa, fb in zip(got.fold_results, base.fold_results, strict=True):
            assert np.array_equal(fa.low, fb.low) and np.array_equal(fa.control_low, fb.control_low)
    assert dense.active() == NUMPY  # the context ends with the call


@pytest.mark.shared_data
@pytest.mark.slow
@pytest.mark.parametrize("backend", TORCH_BACKENDS)
@pytest.mark.parametrize("name", ["arc", "gsm8k"])
def test_reference_sets_agree_on_the_device(backend, name):
    """test_neartie_reference's inputs: the torch path gives the same K, anchors, pair sets and counts as numpy
    (whose agreement with the reference outputs that module checks)."""
    from tests.unit.test_neartie_reference import REF, _load

    if not REF.exists():
        pytest.skip(f"reference outputs not found under {REF}")
    args = _load(name)
    _same_audit(run_audit(*args, AuditConfig(), device=backend), run_audit(*args, AuditConfig()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_coverage_draws_agree(backend):
    from benchloupe.engine.coverage import UncertaintyConfig, metric_uncertainty
    from benchloupe.engine.irt import fit_1pl

    rng = np.random.default_rng(12)
    theta, b = rng.normal(size=30), rng.normal(size=400)
    y = (rng.random((30, 400)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    fit = fit_1pl(y)
    cfg = UncertaintyConfig(n_draws=250, chunk=100, seed=3)
    loc = np.r_[np.quantile(fit.b, [0.1, 0.5, 0.9]), fit.b.max() + 5.0]  # the last one outside [0, 1]
    base = metric_uncertainty(fit, config=cfg, locations=loc)
    got = metric_uncertainty(fit, config=cfg, locations=loc, device=backend)
    for col in ("ddm", "max_gap", "topk_sum", "baseline_max_gap"):
        np.testing.assert_allclose(got.draws[col], base.draws[col], rtol=1e-12, atol=0)
    np.testing.assert_allclose(got.location_widths, base.location_widths, rtol=1e-12, atol=0)
    assert got.max_gap_ci == pytest.approx(base.max_gap_ci, rel=1e-12)


def test_device_choice_for_audit_and_coverage():
    assert dense.resolve("cpu", 10**9) == NUMPY  # float64 passes whatever the size
    with pytest.raises(EngineError, match="device must be"):
        dense.resolve("tpu")
    if not cuda_available():
        assert dense.resolve("auto", 10**9) == NUMPY
        with pytest.raises(EngineError, match="--device cuda"):
            dense.resolve("cuda")


_NO_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch'", name=name)
sys.meta_path.insert(0, _NoTorch())
from benchloupe.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _cli(*args, no_torch=False):
    cmd = [sys.executable, "-c", _NO_TORCH] if no_torch else [sys.executable, "-m", "benchloupe"]
    return subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, cwd=ROOT)


def _runs(db):
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.skipif(cuda_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("command", [("audit", "neartie", "demo-chem"), ("coverage", "demo-chem")])
@pytest.mark.parametrize("no_torch", [False, True])
def test_device_cuda_without_cuda_is_one_line_and_exit_1(demo_db, command, no_torch):
    before = _runs(demo_db)
    r = _cli("--db", demo_db, *command, "--device", "cuda", no_torch=no_torch)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr and "--device cuda" in lines[0]
    assert ("pip install -e '.[gpu]'" in lines[0]) if no_torch else ("no CUDA device" in lines[0])
    assert _runs(demo_db) == before  # refused before the run exists


@pytest.mark.parametrize("command", [("audit", "neartie", "demo-chem"), ("coverage", "demo-chem")])
def test_device_auto_without_torch_runs_on_numpy_and_records_it(demo_db, command):
    import json

    r = _cli("--db", demo_db, "--json", *command, "--device", "auto", no_torch=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    compute = (out["summary"] if command[0] == "audit" else out["metrics"])["compute"]
    assert compute["backend"] == "numpy" and compute["device"] == "cpu" and compute["dtype"] == "float64"


def test_numpy_path_does_not_import_torch():
    """The default path of the audit and the coverage draws never imports torch (seconds of start-up, and an
    optional extra): checked in a fresh interpreter."""
    code = """
import sys
import numpy as np
from tests.unit.test_neartie import simulate
from benchloupe.engine.neartie import AuditConfig, run_audit
from benchloupe.engine.coverage import UncertaintyConfig, metric_uncertainty
from benchloupe.engine.irt import fit_1pl
y, ids, fams, owners, groups = simulate(n_owners=40, n_items=120)
run_audit(y, ids, fams, owners, groups, AuditConfig(dimensions=(1, 2), controls=19), device="auto")
metric_uncertainty(fit_1pl(y[:, :60].astype(float)), config=UncertaintyConfig(n_draws=20), device="auto")
assert "torch" not in sys.modules, "torch was imported"
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
