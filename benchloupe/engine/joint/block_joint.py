"""Joint fits whose static part is leaderboard-sized (issue 26): DualEval (paper 000 section 3) on thousands of models
x thousands of static items beside an arena of AlpacaEval 2's size, by block-coordinate Newton.

The full Newton iteration (``optimise._run_newton``) eliminates every item's 2x2 block into a Schur complement over
all abilities: the static items couple every pair of models, so each iteration costs ``M^2 x 2 n`` flops (5,000
models x 14,805 items: 7e11) and holds models x items float64 matrices; above ``_NEWTON_MAX_BLOCK`` models the fit
fell back to L-BFGS over dense float64 evaluations (hours, several GB).  Here a sweep is

1. the static items' step given the abilities, exactly as the static block-coordinate Newton takes it
   (``optimise._run_block_newton``: per-item damped 2x2 Newton, kept by each item only if its own objective term
   decreases; two fused passes over the integer cells, float32 then float64);
2. one damped Newton step on everything else, jointly: all abilities, the arena prompts' (b, k) and gamma, with the
   static items fixed.  The static part of the abilities' Hessian is then diagonal (from the candidate pass), the
   arena part is the exact Newton system of the arena terms (``_Problem.evaluate`` on the pairs alone, over the
   models with pairs), so after the arena items' 2x2 blocks are eliminated the system is the arena models' small
   block plus a diagonal, solved with the ``mean(theta) = 0`` row by eliminating the diagonal part;
3. the exact minimum along the scale direction (``sweeps._rescale``, static and arena items together).

The step of 2 is accepted on the whole objective (Armijo, halving, then Levenberg-Marquardt damping); the pass that
evaluates a trial point is the next sweep's first pass, so an accepted sweep costs two passes over the cells and
one arena evaluation.  The objective is the joint ``_Problem``'s (checked in tests/unit/test_scale.py); the sweeps
stop when one lowers it by less than ``_BLOCK_FTOL`` relative, in float64.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from benchloupe.engine.backend import Backend, resolve
from benchloupe.engine.common import Progress, check_cancel
from benchloupe.engine.joint.inputs import JointConfig, PairSet
from benchloupe.engine.joint.objective import _Problem
from benchloupe.engine.joint.sweeps import (
    _BLOCK_FTOL,
    _BLOCK_MU_START,
    _F32_SLACK,
    _F32_SWITCH,
    _MU_DOWN,
    _MU_MIN,
    _MU_START,
    _MU_UP,
    _rate_start,
    _rescale,
)

_MAX_HALVINGS = 3


def arena_part(problem: _Problem, pairs: PairSet, n_models: int, config: JointConfig,
               pair_keep: np.ndarray | None) -> tuple[_Problem, np.ndarray]:
    """The arena terms alone (no regulariser: the caller adds the joint one) over the models with pairs, and the
    positions of those models among the joint problem's."""
    sub = _Problem(None, pairs, n_models, replace(config, mode="arena", lambda_reg=0.0), pair_keep=pair_keep,
                   min_models=1)
    if not np.array_equal(sub.a_items, problem.a_items):
        raise AssertionError("arena prompts differ between the joint and the arena problem")
    return sub, np.searchsorted(problem.models, sub.models)


def block_joint_newton(problem: _Problem, sub: _Problem, idx: np.ndarray, x0: np.ndarray, config: JointConfig,
                       progress: Progress, cancel, backend: Backend | None = None, polish: bool = True):
    """Fit (module docstring); ``x0`` in the joint layout.  Returns (x, f, sweeps, converged), as the other
    optimisers of ``optimise`` do, and sets ``problem.passes``.  ``polish=False``: with a float32 backend the
    sweeps end with the float32 stage (no float64 sweeps), for warm-started refits whose use tolerates float32's
    resolution (the held-out ECE, ``evaluation.heldout_calibration``), as ``optimise._run_block_newton`` does."""
    M, Ns, Na = problem.M, problem.Ns, problem.Na
    cfg = problem.cfg
    lam = cfg.lambda_reg
    lt, li = (lam / M, lam / problem.n_items) if problem.reg_mean else (lam, lam)
    w = cfg.lambda_static / problem.n_static
    backend = backend or resolve("cpu", M * Ns)
    stages = [backend] if backend.dtype == "float64" or not polish else [backend, replace(backend, dtype="float64")]
    stage, bk = 0, stages[0]
    x = x0.copy()
    o = M + 2 * Ns
    th, bs, ks = x[:M], x[M:M + Ns], x[M + Ns:o]
    if not np.any(x0[:o]):
        _rate_start(problem, th, bs)
    passes = 0.0
    MA = sub.M

    def arena_x(xx):
        return np.r_[xx[:M][idx], xx[o:]]

    def objective(xx, r, bound=None):
        """The joint objective at ``xx`` from its static pass ``r`` and the arena value.  With ``bound`` (a line
        search's Armijo bound) the arena terms are evaluated with their derivatives when the objective meets it
        (``_Problem.evaluate(accept=...)``) and kept in ``ahead``: the next sweep's step 2 needs them at this same
        arena point (step 1 moves only the static items), so an accepted trial costs no second arena evaluation."""
        t_, b_, k_ = xx[:M], xx[M:M + Ns], xx[M + Ns:o]
        items = xx[M:o + 2 * Na]

        def total(fa):
            return (w * float(r.loss.sum()) + fa + lt * float(t_ @ t_) + li * float(items @ items)
                    + lam * float(xx[-1]) ** 2)

        if bound is None:
            return total(sub.evaluate(arena_x(xx), order=0)[0]), (t_, b_, k_)
        out = sub.evaluate(arena_x(xx), order=2, accept=lambda fa: total(fa) <= bound)
        ahead[0] = out if out[1] is not None else None
        return total(out[0]), (t_, b_, k_)

    def static_at(xx, rows=False):
        nonlocal passes
        passes += 1
        started = time.perf_counter()
        out = problem.static_pass(xx[:M], xx[M:M + Ns], xx[M + Ns:o], rows=rows, backend=bk)
        problem.pass_s = time.perf_counter() - started  # the last is a float64 pass (fit_joint's passes-equivalent)
        return out

    ahead: list = [None]  # the arena terms with their derivatives at the accepted trial point (objective())
    r = static_at(x)
    f, _ = objective(x, r)
    mu_items = np.full(Ns, _BLOCK_MU_START)
    mu = _MU_START
    converged, it = False, 0
    while it < config.max_iter:
        check_cancel(cancel)
        it += 1
        # 1. the static items given theta
        gb_s, gk_s, c11, c12, c22 = (w * v for v in r.item_blocks(np.exp(ks), bs))
        gb_s, gk_s = gb_s + 2 * li * bs, gk_s + 2 * li * ks
        c11, c22 = (c11 + 2 * li) * (1 + mu_items), (c22 + 2 * li) * (1 + mu_items)
        lam_min = 0.5 * (c11 + c22) - np.sqrt(0.25 * (c11 - c22) ** 2 + c12 ** 2)
        sh = np.maximum(0.0, 1e-3 * np.abs(c11) - lam_min)
        c11, c22 = c11 + sh, c22 + sh
        det = c11 * c22 - c12 * c12
        nb = bs - np.clip((c22 * gb_s - c12 * gk_s) / det, -1.0, 1.0)
        nk = ks - np.clip((c11 * gk_s - c12 * gb_s) / det, -1.0, 1.0)
        cand = problem.static_pass(th, nb, nk, rows=True, cols=False, backend=bk)
        passes += 1
        old_q = w * r.loss + li * (bs * bs + ks * ks)
        slack = 0.0 if bk.dtype == "float64" else _F32_SLACK * np.abs(old_q)
        new_q = w * cand.loss + li * (nb * nb + nk * nk)
        ok = new_q <= old_q + slack
        g_th, h_th = cand.g_theta, cand.h_theta
        bad = np.flatnonzero(~ok)
        loss_items = np.where(ok, cand.loss, r.loss)
        bs[ok], ks[ok] = nb[ok], nk[ok]
        if 4 * len(bad) > Ns:
            again = problem.static_pass(th, bs, ks, rows=True, cols=False, backend=bk, loss=False)
            g_th, h_th = again.g_theta, again.h_theta
            passes += 1
        elif len(bad):
            new = problem.static_pass(th, nb, nk, rows=True, cols=False, backend=bk, columns=bad, loss=False)
            old = problem.static_pass(th, bs, ks, rows=True, cols=False, backend=bk, columns=bad, loss=False)
            g_th = g_th - new.g_theta + old.g_theta
            h_th = h_th - new.h_theta + old.h_theta
            passes += 2 * len(bad) / max(Ns, 1)
        mu_items = np.where(ok, mu_items * 0.3, mu_items * 4.0)
        items_now = x[M:o + 2 * Na]
        fa, ga, sysA = ahead[0] if ahead[0] is not None else sub.evaluate(arena_x(x), order=2)
        ahead[0] = None
        f_mid = (w * float(loss_items.sum()) + fa + lt * float(th @ th) + li * float(items_now @ items_now)
                 + lam * float(x[-1]) ** 2)
        # 2. theta (all), the arena items and gamma, static items fixed
        D = w * h_th + 2 * lt
        g_all = w * g_th + 2 * lt * th
        g_all[idx] += ga[:MA]
        A, Bb, Bk, Cbb, Cbk, Ckk = sysA
        ba, ka = x[o:o + Na], x[o + Na:o + 2 * Na]
        gb_a, gk_a = ga[MA:MA + Na] + 2 * li * ba, ga[MA + Na:MA + 2 * Na] + 2 * li * ka
        g_gam = ga[-1] + 2 * lam * x[-1]
        A = A.copy()
        A[-1, -1] += 2 * lam
        Cbb, Ckk = Cbb + 2 * li, Ckk + 2 * li
        accepted = False
        for _ in range(20):
            d = _direction(D, g_all, idx, A, Bb, Bk, Cbb, Cbk, Ckk, gb_a, gk_a, g_gam, mu)
            gd = float(g_all @ d[0] + gb_a @ d[1] + gk_a @ d[2] + g_gam * d[3])
            if np.all(np.isfinite(d[0])) and gd < 0:
                t = 1.0
                for _h in range(_MAX_HALVINGS):
                    xt = x.copy()
                    xt[:M] += t * d[0]
                    xt[o:o + Na] += t * d[1]
                    xt[o + Na:o + 2 * Na] += t * d[2]
                    xt[-1] += t * d[3]
                    bb_all = np.r_[xt[M:M + Ns], xt[o:o + Na]]
                    kk_all = np.r_[xt[M + Ns:o], xt[o + Na:o + 2 * Na]]
                    _rescale(xt[:M], bb_all, kk_all, lt, li)
                    xt[M:M + Ns], xt[o:o + Na] = bb_all[:Ns], bb_all[Ns:]
                    xt[M + Ns:o], xt[o + Na:o + 2 * Na] = kk_all[:Ns], kk_all[Ns:]
                    rt = static_at(xt)
                    ft, _ = objective(xt, rt, bound=f_mid + 1e-4 * t * gd)
                    if ft <= f_mid + 1e-4 * t * gd:
                        accepted = True
                        break
                    t *= 0.5
                if accepted:
                    break
            mu = max(_MU_UP * mu, _MU_MIN)
        if not accepted:  # no step of the second block pays: keep the item step and stop there
            r = static_at(x)
            f, _ = objective(x, r)
            pg = g_all - g_all.mean()
            converged = float(max(np.max(np.abs(pg)), np.max(np.abs(gb_a), initial=0.0),
                                  np.max(np.abs(gk_a), initial=0.0), abs(g_gam))) < 1e-6
            break
        x, r = xt, rt
        th, bs, ks = x[:M], x[M:M + Ns], x[M + Ns:o]
        mu = mu * (_MU_DOWN if t == 1.0 else 1.0) if mu > _MU_MIN else 0.0
        progress(it, config.max_iter, f"joint block sweep {it} ({bk.dtype}): objective {ft:.10f}")
        decrease, f = f - ft, ft
        if decrease <= max(_BLOCK_FTOL if bk.dtype == "float64" else _F32_SWITCH, config.ftol) * max(1.0, abs(f)):
            if stage == len(stages) - 1:
                converged = True
                break
            stage += 1
            bk = stages[stage]
            r = static_at(x)
            f, _ = objective(x, r)
    problem.passes = passes
    return x, f, it, converged


def _direction(D, g_all, idx, A, Bb, Bk, Cbb, Cbk, Ckk, gb, gk, g_gam, mu):
    """The Newton direction of step 2 (module docstring): (d theta (all M), d b_arena, d k_arena, d gamma)."""
    M = len(D)
    K = A.shape[0]  # arena models, then gamma
    c11, c12, c22 = Cbb + mu, Cbk, Ckk + mu
    lam_min = 0.5 * (c11 + c22) - np.sqrt(0.25 * (c11 - c22) ** 2 + c12 ** 2)
    shift = np.maximum(0.0, 1e-10 - lam_min)
    c11, c22 = c11 + shift, c22 + shift
    det = c11 * c22 - c12 * c12
    i11, i12, i22 = c22 / det, -c12 / det, c11 / det
    S = A + mu * np.eye(K)
    S[np.arange(K - 1), np.arange(K - 1)] += D[idx]
    S -= (Bb * i11 + Bk * i12) @ Bb.T + (Bb * i12 + Bk * i22) @ Bk.T
    cb, ck = i11 * gb + i12 * gk, i12 * gb + i22 * gk
    rest = np.ones(M, bool)
    rest[idx] = False
    Dr = D[rest] + mu
    gK = np.r_[g_all[idx], g_gam]
    # [S e; e^T -sum(1/Dr)] [dK; nu] = [-gK + B c; sum(g_r / Dr)], e = 1 on the arena models (0 for gamma)
    e = np.r_[np.ones(K - 1), 0.0]
    Kmat = np.zeros((K + 1, K + 1))
    Kmat[:K, :K] = S
    Kmat[:K, K] = Kmat[K, :K] = e
    Kmat[K, K] = -np.sum(1.0 / Dr)
    rhs = np.r_[-gK + Bb @ cb + Bk @ ck, np.sum(g_all[rest] / Dr)]
    sol = np.linalg.solve(Kmat, rhs)
    dK, nu = sol[:K], sol[K]
    tb, tk = Bb.T @ dK, Bk.T @ dK
    db = -cb - (i11 * tb + i12 * tk)
    dk = -ck - (i12 * tb + i22 * tk)
    d_theta = np.empty(M)
    d_theta[idx] = dK[:K - 1]
    d_theta[rest] = (-g_all[rest] - nu) / Dr
    return d_theta, db, dk, float(dK[K - 1])
