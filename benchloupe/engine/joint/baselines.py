"""Arena baselines of paper 000, Table 2: Bradley-Terry on the soft pairwise targets and the average reward."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from benchloupe.engine.common import EngineError
from benchloupe.engine.joint.inputs import (
    ArenaData,
    BaselineResult,
    JointConfig,
    PairSet,
    _expand,
    build_pairs,
    standardise_rewards,
)


# ------------------------------------------------------------------------------------------------------ baselines
def fit_bradley_terry(arena: ArenaData, config: JointConfig = JointConfig(mode="arena"), *,
                      pairs: PairSet | None = None) -> BaselineResult:
    """Arena Bradley-Terry on reward-derived soft pairs (A.3 fit_bt): BCE(s_i - s_j, sigmoid(z_i - z_j)) over all
    non-tie pairs (both-bad included) plus the L2 prior of the variant; centred scores."""
    pairs = pairs if pairs is not None else build_pairs(arena, config)
    use = ~pairs.tie
    if not use.any():
        raise EngineError("every arena pair is a tie; lower tie_pct")
    i, j, t = pairs.i[use], pairs.j[use], pairs.target[use]
    n = arena.shape[0]
    has = np.zeros(n, bool)
    has[i] = True
    has[j] = True
    models = np.flatnonzero(has)
    if len(models) < 2:
        raise EngineError("Bradley-Terry needs at least two arena models with pairs")
    pos = np.full(n, -1)
    pos[models] = np.arange(len(models))
    ii, jj = pos[i], pos[j]
    m = len(models)
    lam = config.lambda_reg / (m if config.reg_reduction == "mean" else 1.0)

    def fun(s):
        u = s[ii] - s[jj]
        f = float(np.mean(np.logaddexp(0.0, u) - t * u)) + lam * float(s @ s)
        r = (expit(u) - t) / len(u)
        gr = np.bincount(ii, r, m) - np.bincount(jj, r, m) + 2 * lam * s
        return f, gr - gr.mean()

    res = minimize(fun, np.zeros(m), jac=True, method="L-BFGS-B",
                   options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-9})
    s = res.x - res.x.mean()
    return BaselineResult("arena_bt", _expand(n, models, s), float(res.fun), int(res.nit), bool(res.success))


def average_reward(arena: ArenaData) -> BaselineResult:
    """Arena average-reward baseline: each model's mean standardised reward over the prompts it answered."""
    z = standardise_rewards(arena.rewards)
    cnt = np.isfinite(z).sum(axis=1)
    with np.errstate(invalid="ignore"):
        scores = np.where(cnt > 0, np.nansum(z, axis=1) / np.maximum(cnt, 1), np.nan)
    return BaselineResult("arena_avg_reward", scores)
