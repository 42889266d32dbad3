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
        out.update(_static_accuracy(static, result.theta, result.b_static))
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


def _static_accuracy(static: StaticData, theta: np.ndarray, b: np.ndarray) -> dict:
    """Static accuracy (the share of trials predicted right; a cell is predicted a success when its logit
    a (theta - b) >= 0, i.e. theta >= b as a > 0) and the number of cells it counts, in row blocks (no models x
    items float temporary).  Dense 0/1 data (every cell observed, every theta and b finite: the common case, e.g.
    5,000 x 14,000) take three passes per block: theta >= b, equality with the 0/1 label, a count."""
    t = trials(static)
    fin_b, fin_t = np.isfinite(b), np.isfinite(theta)
    dense = t is None and bool(fin_b.all()) and bool(fin_t.all()) and bool(static.mask.all())
    right, total, cells = 0.0, 0.0, 0
    step = max(1, (1 << 20) // max(1, static.shape[1]))
    ahead = None
    for r0 in range(0, static.shape[0], step):
        sl = slice(r0, r0 + step)
        if dense:  # observed 0/1 cells: the int8 labels read as booleans without a copy
            rows = static.correct[sl]
            ahead = np.greater_equal(theta[sl, None], b[None, :], out=None if ahead is None else ahead[:len(rows)])
            labels = rows.view(bool) if rows.dtype.itemsize == 1 and rows.dtype.kind in "biu" else rows == 1
            right += np.count_nonzero(np.equal(ahead, labels, out=ahead))
            total += rows.size
            cells += rows.size
            continue
        ok = static.mask[sl] & fin_b[None, :] & fin_t[sl, None]
        with np.errstate(invalid="ignore"):
            ahead_b = theta[sl, None] >= b[None, :]  # logit a (theta - b) >= 0, a > 0
        if t is None:
            right += np.count_nonzero(ok & (ahead_b == (static.correct[sl] == 1)))
            total += np.count_nonzero(ok)
        else:  # a predicted success is right on the successes, a predicted failure on the failures
            n = np.where(ok, t[sl], 0).astype(float)
            s_ = np.where(ok, static.correct[sl], 0).astype(float)
            right += float(np.sum(np.where(ahead_b, s_, n - s_)))
            total += float(n.sum())
        cells += int(np.count_nonzero(ok))
    return {"static_accuracy": float(right / total) if total else float("nan"), "n_static_cells": int(cells)}


def pair_probabilities(result: JointResult, pairs: PairSet | None = None) -> np.ndarray:
    """mu_ijq = sigmoid(gamma (p_iq - p_jq)) for every pair."""
    pairs = pairs if pairs is not None else result.pairs
    P = result.p_arena()
    flat, n = P.ravel(), P.shape[1]  # flat gathers: the values of P[i, prompt], several times faster
    return expit(result.gamma * (np.take(flat, pairs.i * n + pairs.prompt) - np.take(flat, pairs.j * n + pairs.prompt)))


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
