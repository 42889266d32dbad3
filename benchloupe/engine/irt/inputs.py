"""Input handling shared by the IRT estimators: counts from 0/1 or binomial data, chance levels, stable
log-probabilities of the guessing model."""

from __future__ import annotations

import numpy as np

from benchloupe.engine.common import EngineError

__all__ = ["_as_counts", "_chance_vector", "_log_p_terms"]


def _as_counts(
    correct: np.ndarray | None,
    mask: np.ndarray | None,
    successes: np.ndarray | None,
    trials: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Return (successes, trials) as float arrays with zeros where a cell is missing."""
    if successes is not None or trials is not None:
        if successes is None or trials is None:
            raise EngineError("successes and trials must be given together (binomial likelihood)")
        c = np.asarray(successes, dtype=float)
        k = np.asarray(trials, dtype=float)
        if c.shape != k.shape or c.ndim != 2:
            raise EngineError(f"successes {c.shape} and trials {k.shape} must be 2-D arrays of one shape")
    else:
        if correct is None:
            raise EngineError("give either correct (0/1) or successes and trials")
        c = np.asarray(correct, dtype=float)
        if c.ndim != 2:
            raise EngineError(f"correct must be a models x items matrix, got shape {c.shape}")
        k = np.ones_like(c)
    obs = np.isfinite(c) & np.isfinite(k) & (k > 0)
    if mask is not None:
        m = np.asarray(mask, dtype=bool)
        if m.shape != c.shape:
            raise EngineError(f"mask shape {m.shape} differs from the response shape {c.shape}")
        obs &= m
    c = np.where(obs, c, 0.0)
    k = np.where(obs, k, 0.0)
    if np.any(c < 0) or np.any(c > k):
        raise EngineError(
            "successes must lie between 0 and trials (0/1 for correct); fix the response values"
        )
    if not obs.any():
        raise EngineError("the response matrix has no observed cell; import results first")
    return c, k


def _chance_vector(chance: float | np.ndarray | None, n_items: int) -> np.ndarray:
    if chance is None:
        return np.zeros(n_items)
    g = np.broadcast_to(np.asarray(chance, dtype=float), (n_items,)).copy()
    if np.any(~np.isfinite(g)) or np.any(g < 0) or np.any(g >= 1):
        raise EngineError("chance levels must lie in [0, 1); e.g. 0.25 for four options, 0 for free response")
    return g


def _log_p_terms(eta: np.ndarray, g: np.ndarray | float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log P, log(1 - P) and sigmoid(eta) for P = g + (1 - g) sigmoid(eta), numerically stable.

    One exp and one log1p per cell: with e = exp(-|eta|), log sigmoid(eta) = min(eta, 0) - log1p(e).
    """
    e = np.exp(-np.abs(eta))
    l1p = np.log1p(e)
    log_sig = np.minimum(eta, 0.0) - l1p
    log1m_sig = log_sig - eta
    sig = np.where(eta >= 0, 1.0, e) / (1.0 + e)
    g = np.asarray(g, dtype=float)
    if np.all(g == 0):
        return log_sig, log1m_sig, sig
    with np.errstate(divide="ignore"):
        log_p = np.logaddexp(np.log(g), np.log1p(-g) + log_sig)
    return log_p, np.log1p(-g) + log1m_sig, sig
