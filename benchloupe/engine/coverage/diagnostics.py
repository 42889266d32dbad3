"""Response-matrix diagnostics of paper 003 Appendix C.3: model / item information and inversion rates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from benchloupe.engine.common import EngineError

__all__ = ["Diagnostics", "DiagnosticsConfig", "diagnostics"]


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


def _inversion_rate(values: np.ndarray, observed: np.ndarray, strength: np.ndarray) -> float:
    """Fraction of (context, ordered unit pair) with the stronger unit's value below the weaker one's.

    ``values``/``observed``: units x contexts. Pairs with equal ``strength`` are unordered and skipped; pairs
    need both cells observed. Counting uses cumulative sums per distinct value level: O(levels * size).
    """
    order = np.argsort(strength, kind="stable")
    v = values[order]
    o = observed[order]
    s = strength[order]
    group_start = np.searchsorted(s, s, side="left")  # first position with the same strength
    zeros = np.zeros((1, v.shape[1]))
    cum_obs = np.concatenate([zeros, np.cumsum(o, axis=0, dtype=float)])
    pairs = float(np.sum(o * cum_obs[group_start]))
    if pairs == 0:
        return 0.0
    levels = np.unique(v[o])
    inversions = 0.0
    for level in levels[:-1]:
        above = np.concatenate([zeros, np.cumsum(o & (v > level), axis=0, dtype=float)])
        inversions += float(np.sum((o & (v == level)) * above[group_start]))
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
    model / an item; information is the mean of ``4 p (1 - p)``.
    """
    if successes is not None or trials is not None:
        if successes is None or trials is None:
            raise EngineError("successes and trials must be given together")
        c = np.asarray(successes, dtype=float)
        t = np.asarray(trials, dtype=float)
    else:
        if correct is None:
            raise EngineError("give either correct (0/1) or successes and trials")
        c = np.asarray(correct, dtype=float)
        t = np.ones_like(c)
    if c.ndim != 2 or c.shape != t.shape:
        raise EngineError("responses must be a models x items matrix")
    obs = np.isfinite(c) & np.isfinite(t) & (t > 0)
    if mask is not None:
        obs &= np.asarray(mask, dtype=bool)
    p = np.where(obs, c / np.where(obs, t, 1.0), 0.0)
    n_obs_model = obs.sum(axis=1)
    n_obs_item = obs.sum(axis=0)
    if np.sum(n_obs_model > 0) < 2 or np.sum(n_obs_item > 0) < 2:
        raise EngineError("diagnostics need at least two models and two items with observed results")
    pm = p.sum(axis=1)[n_obs_model > 0] / n_obs_model[n_obs_model > 0]
    pi = p.sum(axis=0)[n_obs_item > 0] / n_obs_item[n_obs_item > 0]
    model_info = float(np.mean(4 * pm * (1 - pm)))
    item_info = float(np.mean(4 * pi * (1 - pi)))
    if config.ordering == "irt":
        if theta is None or b is None:
            raise EngineError("ordering='irt' needs the fitted theta and b")
        model_strength = np.asarray(theta, dtype=float)
        item_easiness = -np.asarray(b, dtype=float)
    else:
        model_strength = np.where(n_obs_model > 0, p.sum(axis=1) / np.maximum(n_obs_model, 1), np.nan)
        item_easiness = np.where(n_obs_item > 0, p.sum(axis=0) / np.maximum(n_obs_item, 1), np.nan)
    keep_m = np.isfinite(model_strength)
    keep_i = np.isfinite(item_easiness)
    pk = p[np.ix_(keep_m, keep_i)]
    ok = obs[np.ix_(keep_m, keep_i)]
    model_inv = _inversion_rate(pk, ok, model_strength[keep_m])
    item_inv = _inversion_rate(pk.T, ok.T, item_easiness[keep_i])
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
        n_models=int(keep_m.sum()),
        n_items=int(keep_i.sum()),
        ordering=config.ordering,
    )
