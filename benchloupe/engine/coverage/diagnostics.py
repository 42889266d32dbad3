"""Response-matrix diagnostics of paper 003 Appendix C.3: model / item information and inversion rates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from benchloupe.engine.common import EngineError

__all__ = ["Diagnostics", "DiagnosticsConfig", "diagnostics"]

_BLOCK_CELLS = 1 << 21  # cells per block of rows or contexts (no float64 copy of a whole 70 M-cell matrix)


@dataclass(frozen=True)
class DiagnosticsConfig:
    """Thresholds of Appendix C.3: information >= 0.3, inversion rates <= 0.3.

    ``ordering="rates"`` ranks models and items by their overall success rates (the paper); ``"irt"`` ranks
    them by fitted ``theta`` and ``-b`` instead (needs both).
    """

    min_model_information: float = 0.3
    min_item_information: float = 0.3
    max_model_inversion: float = 0.3
    max_item_inversion: float = 0.3
    ordering: Literal["rates", "irt"] = "rates"


@dataclass(frozen=True)
class Diagnostics:
    """C.3 response-matrix diagnostics with per-check pass flags and the overall verdict ``passed``."""

    model_information: float
    item_information: float
    model_inversion_rate: float
    item_inversion_rate: float
    checks: dict[str, bool]
    passed: bool
    n_models: int
    n_items: int
    ordering: str


def _inversion_rate(blocks, n_ctx: int, strength: np.ndarray, block: int, binary: bool) -> float:
    """Fraction of (context, ordered unit pair) with the stronger unit's value below the weaker one's.

    ``blocks(c0, c1)`` gives the values and the observed flags of contexts ``c0:c1`` (units x contexts, units in
    the order of ``strength``). Pairs with equal ``strength`` are unordered and skipped; pairs need both cells
    observed. Counting uses cumulative sums per distinct value level: O(levels * size), a block of contexts at a
    time; a context lies in one block, so each block's own levels suffice (``binary``: 0/1 values, level 0 only).
    Every count is a whole number: the sums are exact, and the rate the same in any blocking."""
    order = np.argsort(strength, kind="stable")
    s = strength[order]
    group_start = np.searchsorted(s, s, side="left")  # first position with the same strength
    pairs = inversions = 0.0
    for c0 in range(0, n_ctx, block):
        v, o = blocks(c0, min(n_ctx, c0 + block))
        v, o = v[order], o[order]
        zeros = np.zeros((1, v.shape[1]))
        cum_obs = np.concatenate([zeros, np.cumsum(o, axis=0, dtype=float)])
        pairs += float(np.sum(o * cum_obs[group_start]))
        levels = [0.0] if binary else np.unique(v[o])[:-1]
        for level in levels:  # the top level has nothing above it
            above = np.concatenate([zeros, np.cumsum(o & (v > level), axis=0, dtype=float)])
            inversions += float(np.sum((o & (v == level)) * above[group_start]))
    if pairs == 0:
        return 0.0
    return inversions / pairs


def diagnostics(
    correct: np.ndarray | None,
    mask: np.ndarray | None = None,
    theta: np.ndarray | None = None,
    b: np.ndarray | None = None,
    *,
    successes: np.ndarray | None = None,
    trials: np.ndarray | None = None,
    config: DiagnosticsConfig = DiagnosticsConfig(),
) -> Diagnostics:
    """Response-matrix diagnostics of Appendix C.3 on a models x items matrix (0/1 or successes/trials).

    ``p_ij = successes / trials`` per observed cell; ``p_j`` / ``p_i`` are means over the observed cells of a
    model / an item; information is the mean of ``4 p (1 - p)``. The cells are read in their own (integer)
    dtype, a block of rows or columns at a time: no float64 copy of the matrix (issue 26).
    """
    if successes is not None or trials is not None:
        if successes is None or trials is None:
            raise EngineError("successes and trials must be given together")
        c, t = np.asarray(successes), np.asarray(trials)
    else:
        if correct is None:
            raise EngineError("give either correct (0/1) or successes and trials")
        c, t = np.asarray(correct), None
    if c.ndim != 2 or (t is not None and c.shape != t.shape):
        raise EngineError("responses must be a models x items matrix")
    m_all, n_all = c.shape
    step_r = max(1, _BLOCK_CELLS // max(1, n_all))

    mk = None if mask is None else np.asarray(mask, dtype=bool)

    def cells(rows, cols=slice(None)):
        """p (float64) and observed of a block of the matrix (``rows``/``cols``: slices or index arrays)."""
        at = (rows, cols) if isinstance(rows, slice) or isinstance(cols, slice) else np.ix_(rows, cols)
        cf = c[at].astype(float)
        obs = np.isfinite(cf)
        if t is not None:
            tb = t[at].astype(float)
            obs &= np.isfinite(tb) & (tb > 0)
        if mk is not None:
            obs &= mk[at]
        if t is None:
            return np.where(obs, cf, 0.0), obs
        return np.where(obs, cf / np.where(obs, tb, 1.0), 0.0), obs

    n_obs_model, n_obs_item = np.zeros(m_all), np.zeros(n_all)
    p_model, p_item = np.zeros(m_all), np.zeros(n_all)
    for r0 in range(0, m_all, step_r):
        sl = slice(r0, r0 + step_r)
        p, obs = cells(sl)
        n_obs_model[sl] = obs.sum(axis=1)
        n_obs_item += obs.sum(axis=0)
        p_model[sl] = p.sum(axis=1)
        p_item += p.sum(axis=0)
    if np.sum(n_obs_model > 0) < 2 or np.sum(n_obs_item > 0) < 2:
        raise EngineError("diagnostics need at least two models and two items with observed results")
    pm = p_model[n_obs_model > 0] / n_obs_model[n_obs_model > 0]
    pi = p_item[n_obs_item > 0] / n_obs_item[n_obs_item > 0]
    model_info = float(np.mean(4 * pm * (1 - pm)))
    item_info = float(np.mean(4 * pi * (1 - pi)))
    if config.ordering == "irt":
        if theta is None or b is None:
            raise EngineError("ordering='irt' needs the fitted theta and b")
        model_strength = np.asarray(theta, dtype=float)
        item_easiness = -np.asarray(b, dtype=float)
    else:
        model_strength = np.where(n_obs_model > 0, p_model / np.maximum(n_obs_model, 1), np.nan)
        item_easiness = np.where(n_obs_item > 0, p_item / np.maximum(n_obs_item, 1), np.nan)
    rows = np.flatnonzero(np.isfinite(model_strength))
    cols = np.flatnonzero(np.isfinite(item_easiness))
    every = len(rows) == m_all and len(cols) == n_all
    block = max(1, _BLOCK_CELLS // max(1, max(len(rows), len(cols))))

    def item_contexts(c0, c1):  # models x a block of items
        return cells(rows if not every else slice(None), cols[c0:c1] if not every else slice(c0, c1))

    def model_contexts(c0, c1):  # items x a block of models
        p, obs = cells(rows[c0:c1] if not every else slice(c0, c1), cols if not every else slice(None))
        return p.T, obs.T

    # 0/1 integer cells: one level below the top (float inputs, counts: their levels per block)
    binary = t is None and c.dtype.kind in "biu" and c.size > 0 and int(c.min()) >= 0 and int(c.max()) <= 1
    model_inv = _inversion_rate(item_contexts, len(cols), model_strength[rows], block, binary)
    item_inv = _inversion_rate(model_contexts, len(rows), item_easiness[cols], block, binary)
    checks = {
        "model_information": model_info >= config.min_model_information,
        "item_information": item_info >= config.min_item_information,
        "model_inversion_rate": model_inv <= config.max_model_inversion,
        "item_inversion_rate": item_inv <= config.max_item_inversion,
    }
    return Diagnostics(
        model_information=model_info,
        item_information=item_info,
        model_inversion_rate=model_inv,
        item_inversion_rate=item_inv,
        checks=checks,
        passed=all(checks.values()),
        n_models=int(len(rows)),
        n_items=int(len(cols)),
        ordering=config.ordering,
    )
