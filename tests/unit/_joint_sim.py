"""Simulated DualEval data with known parameters, shared by the joint-model tests."""

from __future__ import annotations

import numpy as np

from benchloupe.engine.joint import ArenaData, StaticData


def simulate(n_models=40, n_static=400, n_arena=200, seed=0, missing=0.0, reward_noise=0.3):
    """2PL static labels and arena rewards ``3 p_iq + noise`` from theta ~ N(0,1), b ~ N(0,1), a ~ logN(0.5, 0.3)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    b_s, b_a = rng.normal(size=n_static), rng.normal(size=n_arena)
    a_s, a_a = np.exp(rng.normal(0.5, 0.3, n_static)), np.exp(rng.normal(0.5, 0.3, n_arena))
    p = 1 / (1 + np.exp(-a_s * (theta[:, None] - b_s)))
    y = (rng.random(p.shape) < p).astype(float)
    mask = rng.random(p.shape) >= missing
    pa = 1 / (1 + np.exp(-a_a * (theta[:, None] - b_a)))
    r = 3 * pa + rng.normal(0, reward_noise, pa.shape)
    truth = {"theta": theta, "b_static": b_s, "b_arena": b_a, "a_static": a_s, "a_arena": a_a}
    return truth, StaticData(y, mask), ArenaData(r)
