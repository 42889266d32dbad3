"""Block-coordinate Newton for static-only DualEval fits too large for the Newton system (issue 3: 5,000 x 14,000):
same objective as the damped Newton solver, reached from the same start."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from benchloupe.engine.common import EngineError, no_progress
from benchloupe.engine.joint import JointConfig, StaticData, fit_joint
from benchloupe.engine.joint.objective import _Problem
from benchloupe.engine.joint.optimise import _initial_vector, _run_newton
from benchloupe.engine.stats import spearman
from tests.unit._joint_sim import simulate


@pytest.mark.parametrize("missing", [0.0, 0.15])
def test_block_newton_reaches_the_newton_optimum(missing):
    truth, S, _ = simulate(150, 200, 1, seed=11, missing=missing)
    newton = _dense_newton(S)
    block = fit_joint(S, None, JointConfig(mode="static", optimizer="block"))
    assert newton.converged and block.converged
    assert block.provenance["optimizer"] == "block"
    # same objective, same optimum: equal up to the stopping tolerances (1e-12 / 1e-10 relative decrease; measured
    # gap ~1e-13 on an objective of ~0.5)
    assert abs(block.objective - newton.objective) <= 1e-10
    assert spearman(block.theta, newton.theta) > 0.999
    assert spearman(block.theta, truth["theta"]) > 0.97
    np.testing.assert_allclose(block.b_static, newton.b_static, atol=1e-3)
    np.testing.assert_allclose(block.theta, newton.theta, atol=1e-3)


def _dense_newton(S):
    """The full Newton solver (Schur complement) on a static-only problem, as a reference optimum."""
    cfg = JointConfig(mode="static")
    pr = _Problem(S, None, S.shape[0], cfg)
    x, f, _, conv = _run_newton(pr, _initial_vector(pr, None), cfg, no_progress, None)
    M, n = pr.M, pr.Ns
    return SimpleNamespace(objective=f, converged=conv, theta=x[:M] - x[:M].mean(),
                           b_static=x[M:M + n] - x[:M].mean())


def test_block_newton_is_static_only():
    with pytest.raises(EngineError):
        JointConfig(mode="joint", optimizer="block")


def test_block_newton_handles_a_model_without_cells():
    _, S, _ = simulate(30, 40, 1, seed=2)
    mask = S.mask.copy()
    mask[3] = False
    res = fit_joint(StaticData(S.correct, mask), None, JointConfig(mode="static", optimizer="block"))
    assert np.isnan(res.theta[3]) and np.isfinite(np.delete(res.theta, 3)).all()
