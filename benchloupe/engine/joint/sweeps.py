"""What the block-coordinate Newton fits share (``optimise._run_block_newton``, ``block_joint``): damping and
stopping settings, the rate start and the exact step along the scale direction."""

from __future__ import annotations

import math

import numpy as np

from benchloupe.engine.joint.objective import _Problem

_MU_MIN, _MU_UP, _MU_DOWN = 1e-6, 4.0, 0.3  # damping: first value, growth on failure, decay after a full step
# The first steps are damped: at theta = b = 0 every logit is 0, the k-Hessian is only the tiny prior, and an undamped
# step throws the sharpness of near-separable items far out into a worse local minimum (checked on ChemBench with the
# reference settings).  1e-3 decays to 0 after a few full steps.
_MU_START = 1e-3
_BLOCK_FTOL = 1e-10  # block-coordinate sweeps: relative objective decrease per sweep at which they stop
_BLOCK_MU_START = 0.1  # first per-item damping of the block sweeps (from the rate start)
_F32_SLACK = 8 * 2.0 ** -24  # float32 item acceptance: a per-item increase within rounding is accepted
_F32_FTOL = 1e-8  # the polish sweep's acceptance: its decrease is known to float32's resolution
# float32 sweeps stop (and the float64 polish starts) at this relative decrease: below it a float32 objective of
# 10^5-10^8 cells cannot tell progress from rounding (its sweep-to-sweep noise is ~1e-7 on 10^6 cells), and the
# sweeps left are better spent in float64 (5,000 x 14,000: one float32 sweep less, same objective to 7e-12)
_F32_SWITCH = 1e-7


def _rescale(th, bs, ks, lt: float, li: float, wq: np.ndarray | None = None) -> None:
    """The exact minimum along the scale direction, in place: theta -> c theta, b -> c b, k -> k - log c leaves
    every logit a (theta - b) unchanged, so only the prior moves; 1-D Newton on log c (convex).  ``wq``: item
    weights (an item of weight w counts w times in the prior)."""
    if wq is None:
        sq = lt * float(th @ th) + li * float(bs @ bs)
        ksum, n = float(ks.sum()), len(ks)
    else:
        sq = lt * float(th @ th) + li * float(wq @ (bs * bs))
        ksum, n = float(wq @ ks), float(wq.sum())
    s = 0.0
    for _ in range(50):
        e = math.exp(2 * s)
        step = (2 * e * sq - 2 * li * (ksum - n * s)) / (4 * e * sq + 2 * li * n)
        s -= step
        if abs(step) < 1e-15:
            break
    th *= math.exp(s)
    bs *= math.exp(s)
    ks -= s


def _rate_start(problem: _Problem, th: np.ndarray, bs: np.ndarray) -> None:
    """A start from the observed rates, in place: theta_i = logit(model i's success rate), centred, and
    b_q = -logit(item q's rate) (rates clipped to [0.02, 0.98]): the zeros start spends its first sweeps getting
    there.  One pass over the integer cells."""
    Y, N, wq = problem.Y, problem.N, problem.s_weight
    succ_m, succ_q = Y.sum(axis=1, dtype=np.int64), Y.sum(axis=0, dtype=np.int64)
    if N is None:
        tri_m, tri_q = np.full(problem.M, problem.Ns), np.full(problem.Ns, problem.M)
    else:
        tri_m, tri_q = N.sum(axis=1, dtype=np.int64), N.sum(axis=0, dtype=np.int64)
    if wq is not None:  # repeated columns count as often as drawn
        succ_m = Y @ wq
        tri_m = np.full(problem.M, wq.sum()) if N is None else N @ wq
    c = 0.0 if problem.c is None else problem.c

    def logit(s, t, chance=0.0):
        r = np.clip(s / np.maximum(t, 1), 0.02, 0.98)
        r = np.clip((r - chance) / (1 - chance), 0.02, 0.98)
        return np.log(r / (1 - r))

    t = logit(succ_m, tri_m, float(np.mean(c)))
    th[:] = t - t.mean()
    bs[:] = -logit(succ_q, tri_q, c)
