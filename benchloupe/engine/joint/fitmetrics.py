"""In-sample fit metrics of paper 000, section 4.1: static accuracy, decisive-pair agreement, soft log-loss, ECE."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from benchloupe.engine.common import thread_pool, usable_cores
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


# ------------------------------------------------------------------------------------ held-out cells (Appendix E)
_DRAW_CHUNK = 1 << 22  # uniform draws compared a chunk at a time: no float64 array of every cell's draw
_THREADED_DRAWS = 1 << 22  # from this many draws the stream is cut into one range per core


def heldout_cells(mask: np.ndarray, holdout: float, seed: int) -> np.ndarray:
    """The held-out cells of one Appendix E split: ``numpy.random.default_rng(seed).random(k) < holdout`` over the
    ``k`` observed cells in row-major order, as a boolean models x items matrix (False where unobserved).

    The same draws as one ``random(k)`` call (PCG64 makes one 64-bit step per float64 draw, so the stream is cut
    into ranges, each from a copy of the generator advanced to its start), compared chunk by chunk on the cores:
    no float64 array of k draws and no int64 index of the observed cells (70 M cells: 1.1 GB of temporaries)."""
    k = int(mask.size) if mask.all() else int(np.count_nonzero(mask))
    draws = np.empty(k, dtype=bool)
    state = np.random.default_rng(seed).bit_generator.state
    cores = usable_cores() if k >= _THREADED_DRAWS else 1
    edges = np.linspace(0, k, cores + 1).astype(np.int64)

    def fill(r: int) -> None:
        bits = np.random.PCG64()
        bits.state = state
        bits.advance(int(edges[r]))
        gen = np.random.Generator(bits)
        # one buffer per range, reused chunk after chunk: a fresh 32 MB array per chunk cost more in page faults
        # than the draws themselves (5.4 -> 2.2 ns a draw; issue 26)
        buf = np.empty(min(_DRAW_CHUNK, int(edges[r + 1] - edges[r])))
        for lo in range(int(edges[r]), int(edges[r + 1]), _DRAW_CHUNK):
            hi = min(lo + _DRAW_CHUNK, int(edges[r + 1]))
            np.less(gen.random(out=buf[:hi - lo]), holdout, out=draws[lo:hi])

    if cores > 1:
        list(thread_pool("heldout").map(fill, range(cores)))
    else:
        fill(0)
    if k == mask.size:
        return draws.reshape(mask.shape)
    held = np.zeros(mask.shape, dtype=bool)
    held[mask] = draws  # boolean assignment fills the observed cells in row-major order
    return held


def heldout_static_ece(result: JointResult, static: StaticData, held: np.ndarray, bins: int = 10) -> float:
    """ECE (:func:`ece`) of the fitted p on the ``held`` static cells whose model and item were fitted: per row block,
    only the held cells are gathered and predicted (float64), and the bin sums accumulate across blocks; the same
    value as ``ece(result.p_static()[ok], observed_rate(static)[ok], bins, cell_weight(static)[ok])`` up to the order
    of the additions (no dense models x items float64 matrices of p, rates and weights)."""
    theta, b, a = result.theta, result.b_static, result.a_static
    chance = result.chance_static
    t = trials(static)
    fin_t, fin_b = np.isfinite(theta), np.isfinite(b)
    every = bool(fin_t.all() and fin_b.all())
    width = static.shape[1]
    step = max(1, (1 << 20) // max(1, width))
    blocks = [slice(r0, r0 + step) for r0 in range(0, static.shape[0], step)]

    def work(chunk: list[slice]) -> np.ndarray:
        sums = np.zeros((3, bins))  # per bin: trials, sum of p, sum of the observed rate (each trial-weighted)
        for sl in chunk:
            pick = held[sl] if every else held[sl] & fin_t[sl, None] & fin_b[None, :]
            f = np.flatnonzero(pick)
            if not len(f):
                continue
            r = f // width
            c = f - r * width
            p = expit(a[c] * (theta[sl][r] - b[c]))
            if chance is not None:
                p = chance[c] + (1.0 - chance[c]) * p
            y = np.take(static.correct[sl].reshape(-1), f).astype(float)
            idx = np.minimum((p * bins).astype(np.intp), bins - 1)
            if t is None:
                w = None
            else:
                w = np.take(t[sl].reshape(-1), f).astype(float)
                with np.errstate(invalid="ignore", divide="ignore"):
                    y = y / np.maximum(w, 1) * w  # the rate, trial-weighted (= the successes)
                p = p * w
            sums[0] += np.bincount(idx, w, bins)
            sums[1] += np.bincount(idx, p, bins)
            sums[2] += np.bincount(idx, y, bins)
        return sums

    k = min(usable_cores(), len(blocks))
    parts = list(thread_pool("heldout").map(work, [blocks[i::k] for i in range(k)])) if k > 1 else [work(blocks)]
    n, sp, so = sum(parts)
    total = n.sum()
    if total == 0:
        return float("nan")
    nz = n > 0
    return float(np.sum(np.abs(sp[nz] - so[nz])) / total)
