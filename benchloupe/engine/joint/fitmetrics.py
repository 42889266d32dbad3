"""In-sample fit metrics of paper 000, section 4.1: static accuracy, decisive-pair agreement, soft log-loss, ECE."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from benchloupe.engine.joint.inputs import JointResult, PairSet, StaticData
from benchloupe.engine.joint.subsets import trials


# -------------------------------------------------------------------------------------------------------- metrics
def in_sample_metrics(result: JointResult, static: StaticData | None, pair_keep: np.ndarray | None = None) -> dict:
    """Section 4.1 fit metrics: static accuracy (logit >= 0), decisive-pair agreement (mu >= .5 vs target >= .5),
    soft log-loss over all pairs, pair counts (A.3 run_summary).  On binomial cells static accuracy is the share of
    trials predicted right (a predicted success is right on the successes, a predicted failure on the failures)."""
    out: dict = {"objective": result.objective, "iterations": result.iterations, "converged": result.converged}
    if static is not None and np.isfinite(result.b_static).any():
        right, total, cells = 0.0, 0.0, 0
        step = max(1, (1 << 20) // max(1, static.shape[1]))  # row blocks: no models x items float temporary
        for r0 in range(0, static.shape[0], step):
            sl = slice(r0, r0 + step)
            ok = static.mask[sl] & np.isfinite(result.b_static)[None, :] & np.isfinite(result.theta[sl])[:, None]
            with np.errstate(invalid="ignore"):
                ahead = result.theta[sl, None] >= result.b_static[None, :]  # logit a (theta - b) >= 0, a > 0
            t = trials(static)
            if t is None:
                right += np.count_nonzero(ok & (ahead == (static.correct[sl] == 1)))
                total += np.count_nonzero(ok)
            else:  # a predicted success is right on the successes, a predicted failure on the failures
                n = np.where(ok, t[sl], 0).astype(float)
                s_ = np.where(ok, static.correct[sl], 0).astype(float)
                right += float(np.sum(np.where(ahead, s_, n - s_)))
                total += float(n.sum())
            cells += int(np.count_nonzero(ok))
        out["static_accuracy"] = float(right / total) if total else float("nan")
        out["n_static_cells"] = cells
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
