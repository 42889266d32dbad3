"""In-sample fit metrics of paper 000, section 4.1: static accuracy, decisive-pair agreement, soft log-loss, ECE."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from benchloupe.engine.joint.inputs import JointResult, PairSet, StaticData
from benchloupe.engine.joint.subsets import cell_weight, observed_rate


# -------------------------------------------------------------------------------------------------------- metrics
def in_sample_metrics(result: JointResult, static: StaticData | None, pair_keep: np.ndarray | None = None) -> dict:
    """Section 4.1 fit metrics: static accuracy (logit >= 0), decisive-pair agreement (mu >= .5 vs target >= .5),
    soft log-loss over all pairs, pair counts (A.3 run_summary).  On binomial cells static accuracy is the share of
    trials predicted right (a predicted success is right on the successes, a predicted failure on the failures)."""
    out: dict = {"objective": result.objective, "iterations": result.iterations, "converged": result.converged}
    if static is not None and np.isfinite(result.b_static).any():
        ok = static.mask & np.isfinite(result.b_static)[None, :] & np.isfinite(result.theta)[:, None]
        with np.errstate(invalid="ignore"):
            logit = result.a_static[None, :] * (result.theta[:, None] - result.b_static[None, :])
        rate, w = observed_rate(static)[ok], cell_weight(static)[ok]
        right = np.where(logit[ok] >= 0, rate, 1 - rate)
        out["static_accuracy"] = float(np.sum(right * w) / np.sum(w))
        out["n_static_cells"] = int(ok.sum())
    pairs = result.pairs
    if pairs is not None:
        mu = pair_probabilities(result)
        keep = np.ones(len(pairs), bool) if pair_keep is None else pair_keep
        dec = pairs.decisive & keep
        out["arena_decisive_agreement"] = float(np.mean((mu[dec] >= 0.5) == (pairs.target[dec] >= 0.5)))
        t = pairs.target[keep]
        m = np.clip(mu[keep], 1e-12, 1 - 1e-12)
        out["arena_soft_logloss"] = float(-np.mean(t * np.log(m) + (1 - t) * np.log(1 - m)))
        out["arena_decisive_pairs"] = int(dec.sum())
        out["arena_both_bad_pairs"] = int((pairs.bb_loss & keep).sum())
        out["arena_tie_pairs"] = int((pairs.tie & keep).sum())
        out["gamma"] = result.gamma
    return out


def pair_probabilities(result: JointResult, pairs: PairSet | None = None) -> np.ndarray:
    """mu_ijq = sigmoid(gamma (p_iq - p_jq)) for every pair."""
    pairs = pairs if pairs is not None else result.pairs
    P = result.p_arena()
    return expit(result.gamma * (P[pairs.i, pairs.prompt] - P[pairs.j, pairs.prompt]))


def ece(pred: np.ndarray, obs: np.ndarray, bins: int = 10, weight: np.ndarray | None = None) -> float:
    """Expected calibration error with equal-width bins: sum_b (n_b/N) |mean pred - mean obs| (A.6).  ``weight``
    (trials per binomial cell, ``obs`` then the cell's success rate) counts every trial once."""
    pred = np.asarray(pred, float)
    obs = np.asarray(obs, float)
    if pred.size == 0:
        return float("nan")
    w = np.ones(pred.size) if weight is None else np.asarray(weight, float)
    idx = np.minimum((pred * bins).astype(int), bins - 1)
    n = np.bincount(idx, w, bins)
    sp = np.bincount(idx, pred * w, bins)
    so = np.bincount(idx, obs * w, bins)
    nz = n > 0
    return float(np.sum(np.abs(sp[nz] - so[nz])) / w.sum())
