"""Optimisers of the DualEval objective: damped Newton (Schur complement), block-coordinate Newton, L-BFGS, and
the paper's Adam schedule; ``fit_joint`` and ``fit_abilities`` choose among them (paper 000, section 3; Appendix B)."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace

import numpy as np

from benchloupe.engine.backend import Backend, describe, resolve
from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.joint.block_joint import arena_part, block_joint_newton
from benchloupe.engine.joint.fitmetrics import in_sample_metrics
from benchloupe.engine.joint.inputs import (
    ArenaData,
    JointConfig,
    JointResult,
    PairSet,
    StaticData,
    _expand,
    build_pairs,
)
from benchloupe.engine.joint.objective import _Problem
from benchloupe.engine.joint.subsets import static_columns
from benchloupe.engine.joint.sweeps import (  # the block sweeps' settings and steps
    _BLOCK_FTOL,
    _BLOCK_MU_START,
    _F32_FTOL,
    _F32_SLACK,
    _F32_SWITCH,
    _MU_DOWN,
    _MU_MIN,
    _MU_START,
    _MU_UP,
    _rate_start,
    _rescale,
)
from benchloupe.words import count

_MAX_HALVINGS = 3  # Armijo backtracking steps before the direction is damped instead (Levenberg-Marquardt)
_NEWTON_MAX_BLOCK = 3000  # larger Schur systems: block-coordinate Newton (static only, or joint) instead
_NEWTON_MAX_FLOPS = 2e10  # a Newton iteration's Schur complement above this: the joint block Newton (issue 26)


def _run_lbfgs(fun, x0, config: JointConfig, progress: Progress, cancel, label: str):
    """scipy L-BFGS with progress and cancellation checks at every iteration."""
    from scipy.optimize import minimize  # here: ~0.35 s of import that a Newton or block fit does not need
    state = {"it": 0}

    def callback(_xk):
        state["it"] += 1
        if state["it"] % 25 == 0:
            check_cancel(cancel)
            progress(state["it"], config.max_iter, f"{label}: iteration {state['it']}")

    res = minimize(fun, x0, jac=True, method="L-BFGS-B", callback=callback,
                   options={"maxiter": config.max_iter, "maxcor": 30, "ftol": 1e-15, "gtol": config.gtol,
                            "maxfun": 4 * config.max_iter})
    converged = bool(res.success) or float(np.max(np.abs(res.jac))) < 1e-5
    return res.x, float(res.fun), int(res.nit), converged


def _centre_gradient(problem: _Problem):
    def fun(x):
        f, gr = problem.value_grad(x)
        gr[:problem.M] -= gr[:problem.M].mean()
        return f, gr
    return fun


def _solve_newton(problem: _Problem, system, grad: np.ndarray, mu: float) -> np.ndarray:
    """Newton direction on {mean(theta) = 0} (a KKT row), eliminating the 2x2 item blocks (Schur complement on the
    small global block) or, for a static fit with many more models than item parameters, eliminating theta."""
    A, Bb, Bk, Cbb, Cbk, Ckk = system
    M = problem.M
    G = M + (1 if problem.has_arena else 0)
    c11, c12, c22 = Cbb + mu, Cbk, Ckk + mu
    lam_min = 0.5 * (c11 + c22) - np.sqrt(0.25 * (c11 - c22) ** 2 + c12 ** 2)
    shift = np.maximum(0.0, 1e-10 - lam_min)  # make every item block positive definite
    c11, c22 = c11 + shift, c22 + shift
    det = c11 * c22 - c12 * c12
    i11, i12, i22 = c22 / det, -c12 / det, c11 / det
    gA = np.r_[grad[:M], grad[-1:] if problem.has_arena else []]
    Ns, Na = problem.Ns, problem.Na
    o = M + 2 * Ns
    gb = np.r_[grad[M:M + Ns], grad[o:o + Na]]
    gk = np.r_[grad[M + Ns:M + 2 * Ns], grad[o + Na:o + 2 * Na]]
    n = problem.n_items
    if problem.has_arena or M + 1 <= 2 * n:
        S = (np.diag(A) if A.ndim == 1 else A) + mu * np.eye(G)
        # S -= [Bb Bk] C^-1 [Bb Bk]^T with each item's 2x2 inverse factored as L L^T (l11, l21, l22): one
        # symmetric product Y Y^T (BLAS syrk) instead of four general products, a quarter of the flops
        l11 = np.sqrt(i11)
        l21 = i12 / l11
        l22 = np.sqrt(np.maximum(i22 - l21 * l21, 0.0))
        Y = np.empty((G, 2 * n))
        np.multiply(Bb, l11, out=Y[:, :n])
        Y[:, :n] += Bk * l21
        np.multiply(Bk, l22, out=Y[:, n:])
        S -= Y @ Y.T
        cb, ck = i11 * gb + i12 * gk, i12 * gb + i22 * gk
        K = np.zeros((G + 1, G + 1))
        K[:G, :G] = S
        K[:M, G] = K[G, :M] = 1.0
        rhs = np.r_[-gA + Bb @ cb + Bk @ ck, 0.0]
        dA = np.linalg.solve(K, rhs)[:G]
        tb, tk = Bb.T @ dA, Bk.T @ dA
        db = -cb - (i11 * tb + i12 * tk)
        dk = -ck - (i12 * tb + i22 * tk)
    else:  # static only, A diagonal: eliminate theta
        ad = A + mu  # static only: the theta block is diagonal
        sq = np.sqrt(ad)
        Z = np.empty((M, 2 * n))  # [Bb Bk] / sqrt(ad), built in place
        np.divide(Bb, sq[:, None], out=Z[:, :n])
        np.divide(Bk, sq[:, None], out=Z[:, n:])
        S = -(Z.T @ Z)  # numpy hands Z.T @ Z to BLAS syrk (half the flops of a general product)
        idx = np.arange(n)
        S[idx, idx] += c11
        S[idx + n, idx + n] += c22
        S[idx, idx + n] += c12
        S[idx + n, idx] += c12
        K = np.zeros((2 * n + 1, 2 * n + 1))
        K[:2 * n, :2 * n] = S
        K[:2 * n, -1] = K[-1, :2 * n] = -(Z.T @ (1.0 / sq))
        K[-1, -1] = -np.sum(1.0 / ad)
        gth = gA[:M]
        rhs = np.r_[-np.r_[gb, gk] + Z.T @ (gth / sq), np.sum(gth / ad)]
        sol = np.linalg.solve(K, rhs)
        dC, nu = sol[:2 * n], sol[-1]
        dA = (-gth - sq * (Z @ dC) - nu) / ad
        db, dk = dC[:n], dC[n:]
    d = np.zeros_like(grad)
    d[:M] = dA[:M]
    d[M:M + Ns], d[M + Ns:M + 2 * Ns] = db[:Ns], dk[:Ns]
    d[o:o + Na], d[o + Na:o + 2 * Na] = db[Ns:], dk[Ns:]
    if problem.has_arena:
        d[-1] = dA[M]
    return d


def _run_newton(problem: _Problem, x0, config: JointConfig, progress: Progress, cancel):
    """Damped Newton on {mean(theta) = 0}: the full step when it satisfies Armijo on the true objective, halving
    otherwise, Levenberg-Marquardt damping when no step along the direction pays.  Each trial point is evaluated
    value first (``_Problem.evaluate(accept=...)``): a rejected trial costs a value-only evaluation, an accepted one
    continues to the gradient and Newton system at the same point, so an iteration makes one value evaluation per
    trial and one derivative evaluation.  Converged when the projected gradient is below ``gtol`` or the
    Newton decrement (the quadratic model's predicted decrease, undamped) is below ``ftol * max(1, |f|)``: items that
    everyone solves (or fails) then sit far out on an exponential tail whose remaining decrease is below ``ftol``.
    The steps keep mean(theta) = 0 up to rounding (the KKT row of the direction); the result is centred."""
    x = x0.copy()
    f, grad, system = problem.evaluate(x)
    mu, it, converged = _MU_START, 0, False
    while it < config.max_iter:
        check_cancel(cancel)
        pg = grad.copy()
        pg[:problem.M] -= pg[:problem.M].mean()
        if float(np.max(np.abs(pg))) < config.gtol:
            converged = True
            break
        accepted, ahead = False, None
        for _ in range(20):  # damping up to 1e-6 * 4^19 ~ 3e5
            try:
                d = _solve_newton(problem, system, grad, mu)
            except np.linalg.LinAlgError:
                d = None
            gd = float(grad @ d) if d is not None and np.all(np.isfinite(d)) else 0.0
            if gd < 0:
                if mu == 0.0 and -0.5 * gd <= config.ftol * max(1.0, abs(f)):
                    converged = True
                    break
                t = 1.0
                for _ in range(_MAX_HALVINGS):
                    xt = x + t * d
                    bound = f + 1e-4 * t * gd
                    with np.errstate(over="ignore", invalid="ignore"):
                        ahead = problem.evaluate(xt, accept=lambda fn, bound=bound: fn <= bound)
                    if ahead[0] <= bound:
                        accepted = True
                        break
                    t *= 0.5
                if accepted:
                    break
            mu = max(_MU_UP * mu, _MU_MIN)
        if converged:
            break
        it += 1
        if not accepted:
            converged = float(np.max(np.abs(pg))) < 1e-6
            break
        x = xt
        f, grad, system = ahead
        mu = mu * (_MU_DOWN if t == 1.0 else 1.0) if mu > _MU_MIN else 0.0
        if it % 5 == 0:
            progress(it, config.max_iter, f"Newton iteration {it}: objective {f:.8f}")
    return x, float(f), it, converged


def _run_block_newton(problem: _Problem, x0, config: JointConfig, progress: Progress, cancel,
                      backend: Backend | None = None, start_from_rates: bool = False, polish: bool = True):
    """Static-only fits too large for the Newton system (e.g. 5,000 models x 14,000 items): block-coordinate Newton.

    A sweep takes one damped Newton step for every item's (b_q, k_q) given theta (exact 2x2 block, per-item
    Levenberg-Marquardt damping) that each item keeps only if its own objective term decreases (items are
    independent given theta, so this is an exact per-item line search), then one Newton step for all theta given the
    items (diagonal and convex; exact curvature; on the subspace mean(theta) = 0 through a KKT multiplier, so theta
    stays centred; scaled down to move no theta by more than 1).  A sweep is two fused passes over the cells
    (``_Problem.static_pass``): one at the current point gives the objective and the item blocks, one at the
    candidate items gives their losses (the acceptance test) and the theta gradient and curvature (corrected over
    the few rejected items by a pass over those columns only).  The objective never increases under the item steps;
    the sweeps stop when one lowers it by less than ``max(_BLOCK_FTOL, ftol) * max(1, |f|)`` or after ``max_iter``
    sweeps (the bootstrap replicates' looser ftol applies).
    With a float32 backend the sweeps run in float32 until the decrease is below float32's resolution
    (``_F32_SWITCH``), then one float64 sweep (the polish) whose steps start from the last float32 sums; when that
    sweep still lowers the objective by more than float32's resolution, float64 sweeps continue to
    ``_BLOCK_FTOL``, so the result is a float64 optimum (``polish=False`` stops at the float32 stage's end instead:
    a warm-started refit whose use tolerates float32's resolution, e.g. the held-out ECE).  Same objective as the Newton solver.  The direction that only the prior pins (theta and b scaled by
    c, a by 1/c: every logit unchanged) is nearly flat and crawls under coordinate steps, so every sweep ends with
    its exact 1-D minimum (``_rescale``).  Returns the point, its objective, the sweeps, convergence and the number
    of full passes made."""
    M, n = problem.M, problem.Ns
    wq = problem.s_weight  # item weights (repeated bootstrap draws), None: every item once
    lam = config.lambda_reg
    lt, li = (lam / M, lam / (n if wq is None else float(wq.sum()))) if problem.reg_mean else (lam, lam)
    w = problem.cfg.lambda_static / problem.n_static
    backend = backend or resolve("cpu", M * n)
    stages = [backend] if backend.dtype == "float64" or not polish else [backend, replace(backend, dtype="float64")]
    stage, bk = 0, stages[0]
    x = x0.copy()
    th, bs, ks = x[:M], x[M:M + n], x[M + n:M + 2 * n]  # views: updated in place
    if start_from_rates:
        _rate_start(problem, th, bs)
    mu = np.full(n, _BLOCK_MU_START)
    passes = 0.0

    def at_point():
        nonlocal passes
        passes += 1
        started = time.perf_counter()
        r = problem.static_pass(th, bs, ks, rows=False, backend=bk)
        problem.pass_s = time.perf_counter() - started  # the last one is a float64 pass at the solution
        if wq is None:
            return r, w * float(r.loss.sum()) + lt * float(th @ th) + li * float(bs @ bs + ks @ ks)
        return r, w * float(wq @ r.loss) + lt * float(th @ th) + li * float(wq @ (bs * bs + ks * ks))

    r, f = at_point()
    converged, it, polish = False, 0, False
    while it < config.max_iter:
        check_cancel(cancel)
        it += 1
        Lq = w * r.loss
        gb, gk, c11, c12, c22 = (w * v for v in r.item_blocks(np.exp(ks), bs))
        gb, gk = gb + 2 * li * bs, gk + 2 * li * ks
        c11, c22 = (c11 + 2 * li) * (1 + mu), (c22 + 2 * li) * (1 + mu)
        lam_min = 0.5 * (c11 + c22) - np.sqrt(0.25 * (c11 - c22) ** 2 + c12 ** 2)
        sh = np.maximum(0.0, 1e-3 * np.abs(c11) - lam_min)  # positive definite
        c11, c22 = c11 + sh, c22 + sh
        det = c11 * c22 - c12 * c12
        nb = bs - np.clip((c22 * gb - c12 * gk) / det, -1.0, 1.0)
        nk = ks - np.clip((c11 * gk - c12 * gb) / det, -1.0, 1.0)
        cand = problem.static_pass(th, nb, nk, rows=True, cols=False, backend=bk)
        passes += 1
        old_q = Lq + li * (bs * bs + ks * ks)
        # float32 sums carry ~1e-7 relative noise: a real decrease smaller than that is unreadable, and a strict test
        # then rejects half the (good, small) late steps; float64 decides strictly (the polish)
        slack = 0.0 if (bk.dtype == "float64" and not polish) else _F32_SLACK * np.abs(old_q)
        ok = w * cand.loss + li * (nb * nb + nk * nk) <= old_q + slack
        g_th, h_th = cand.g_theta, cand.h_theta
        bad = np.flatnonzero(~ok)
        bs[ok], ks[ok] = nb[ok], nk[ok]
        if 4 * len(bad) > n:  # many rejected: one more full pass at the kept items
            r_th = problem.static_pass(th, bs, ks, rows=True, cols=False, backend=bk, loss=False)
            g_th, h_th = r_th.g_theta, r_th.h_theta
            passes += 1
        elif len(bad):  # swap the rejected items' contributions for those at their old values
            new = problem.static_pass(th, nb, nk, rows=True, cols=False, backend=bk, columns=bad, loss=False)
            old = problem.static_pass(th, bs, ks, rows=True, cols=False, backend=bk, columns=bad, loss=False)
            g_th = g_th - new.g_theta + old.g_theta
            h_th = h_th - new.h_theta + old.h_theta
            passes += 2 * len(bad) / n
        mu = np.where(ok, mu * _MU_DOWN, mu * _MU_UP)
        g, h = w * g_th + 2 * lt * th, w * h_th + 2 * lt
        step = (g - np.sum(g / h) / np.sum(1.0 / h)) / h  # Newton step on {mean(theta) = 0} (a KKT multiplier)
        th -= step / max(1.0, float(np.max(np.abs(step))))
        _rescale(th, bs, ks, lt, li, wq)
        r, f_new = at_point()
        progress(it, config.max_iter, f"block Newton sweep {it} ({bk.dtype}): objective {f_new:.10f}, "
                 f"{len(bad)} item steps rejected")
        decrease, f = f - f_new, f_new
        scale = max(1.0, abs(f))
        if polish:  # the first float64 sweep started from float32 sums: its decrease is known to float32's resolution
            polish = False
            if decrease <= max(_F32_FTOL, config.ftol) * scale:
                converged = True
                break
            continue
        if decrease <= max(_BLOCK_FTOL if bk.dtype == "float64" else _F32_SWITCH, config.ftol) * scale:
            if stage == len(stages) - 1:
                converged = True
                break
            stage += 1
            bk = stages[stage]
            polish = True  # no extra pass: the next sweep's item step starts from the float32 sums
    problem.passes = passes
    return x, f, it, converged


def _run_adam(problem: _Problem, x0, config: JointConfig, progress: Progress, cancel):
    """The paper's schedule: full-batch Adam (torch defaults), centring theta after every step (shift into all b)."""
    x = x0.copy()
    m = np.zeros_like(x)
    v = np.zeros_like(x)
    b1, b2, eps = 0.9, 0.999, 1e-8
    M, Ns, Na = problem.M, problem.Ns, problem.Na
    b_idx = np.r_[M:M + Ns, M + 2 * Ns:M + 2 * Ns + Na]
    for t in range(1, config.epochs + 1):
        _, gr = problem.value_grad(x)
        m = b1 * m + (1 - b1) * gr
        v = b2 * v + (1 - b2) * gr * gr
        x -= config.lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        s = x[:M].mean()
        x[:M] -= s
        x[b_idx] -= s
        if t % 100 == 0:
            check_cancel(cancel)
            progress(t, config.epochs, f"adam epoch {t}")
    return x, problem.value(x), config.epochs, True


def _initial_vector(problem: _Problem, init: JointResult | dict | None) -> np.ndarray:
    x = np.zeros(problem.n_params)
    if init is None:
        return x
    get = (lambda n: getattr(init, n)) if isinstance(init, JointResult) else (lambda n: init.get(n))
    M, Ns, Na = problem.M, problem.Ns, problem.Na

    def put(sl, values, idx):
        if values is not None:
            x[sl] = np.nan_to_num(np.asarray(values, dtype=float)[idx])

    put(slice(0, M), get("theta"), problem.models)
    if problem.has_static:
        put(slice(M, M + Ns), get("b_static"), problem.s_items)
        put(slice(M + Ns, M + 2 * Ns), get("k_static"), problem.s_items)
    if problem.has_arena:
        o = M + 2 * Ns
        put(slice(o, o + Na), get("b_arena"), problem.a_items)
        put(slice(o + Na, o + 2 * Na), get("k_arena"), problem.a_items)
        gamma = get("gamma")
        if gamma is not None and np.isfinite(gamma) and gamma > 0:
            x[-1] = math.log(gamma / problem.cfg.gamma0)
    x[:M] -= x[:M].mean()
    return x


def _item_warnings(static: StaticData | None, config: JointConfig) -> list[str]:
    if static is None or not config.uses_static:
        return []
    # trials per item; 0/1 cells: the observed count, without the int8 copy of the mask n_trials makes (70 M cells:
    # 0.2 s -> 0.05 s)
    n = np.count_nonzero(static.mask, axis=0) if static.trials is None else static.trials.sum(axis=0, dtype=np.int64)
    s = static.correct.sum(axis=0, dtype=np.int64)
    solved = int(np.sum((n > 0) & (s == n)))
    failed = int(np.sum((n > 0) & (s == 0)))
    out = []
    if solved or failed:
        out.append(f"{count(solved, 'static item')} solved by every model and {failed} failed by every model: "
                   "their b is held finite only by the L2 prior and they carry no ranking information")
    return out


def fit_joint(static: StaticData | None, arena: ArenaData | None, config: JointConfig = JointConfig(), *,
              progress: Progress = no_progress, cancel: threading.Event | None = None,
              init: JointResult | dict | None = None, pairs: PairSet | None = None,
              pair_keep: np.ndarray | None = None, static_mask: np.ndarray | None = None,
              device: str | Backend = "auto", polish: bool = True) -> JointResult:
    """Fit DualEval (section 3) in ``config.mode``.  ``pairs`` reuses a prebuilt :class:`PairSet`; ``pair_keep`` and
    ``static_mask`` restrict the training data (held-out calibration, Appendix E).  ``device`` ("auto", "cpu",
    "cuda", or a ``backend.Backend``) picks the compute backend of the dense static passes (``backend.resolve``);
    the result's ``provenance`` records the backend, device, pass dtype, wall time and the time as passes-equivalent (the wall
    time over one fused float64 pass over the same data, measured in the same run).  ``polish=False``: a
    block-coordinate fit with float32 passes ends when its float32 sweeps do, without the float64 polish (for
    warm-started refits whose use tolerates float32's resolution: ``evaluation.heldout_calibration``)."""
    started = time.perf_counter()
    n_models = _n_models(static, arena)
    if config.uses_arena and arena is not None and pairs is None:
        pairs = build_pairs(arena, config)
    if not config.uses_arena:
        pairs_used = None
    else:
        pairs_used = pairs
    problem = _Problem(static, pairs_used, n_models, config, pair_keep=pair_keep, static_mask=static_mask)
    x0 = _initial_vector(problem, init)
    backend = device if isinstance(device, Backend) else resolve(device, problem.M * problem.Ns if problem.has_static else 0)
    problem.passes, problem.pass_s = None, None
    progress(0, 1, f"DualEval {config.mode} fit: {problem.M} models, {problem.n_items} items")
    if config.optimizer == "adam":
        x, fval, nit, conv = _run_adam(problem, x0, config, progress, cancel)
    elif config.optimizer == "newton" and _newton_fits(problem):
        x, fval, nit, conv = _run_newton(problem, x0, config, progress, cancel)
    elif _block_joint(problem, config):
        sub, idx = arena_part(problem, pairs_used, n_models, config, pair_keep)
        x, fval, nit, conv = block_joint_newton(problem, sub, idx, x0, config, progress, cancel, backend,
                                                polish=polish)
    elif config.optimizer == "block" or (config.optimizer == "newton" and not problem.has_arena):
        x, fval, nit, conv = _run_block_newton(problem, x0, config, progress, cancel, backend,
                                               start_from_rates=init is None, polish=polish)
    else:
        x, fval, nit, conv = _run_lbfgs(_centre_gradient(problem), x0, config, progress, cancel, "L-BFGS")
    wall = time.perf_counter() - started
    if problem.pass_s is None:  # one value-and-gradient evaluation: the fused pass of the other optimisers
        t0 = time.perf_counter()
        problem.value_grad(x)
        problem.pass_s = time.perf_counter() - t0
    used = backend if problem.passes is not None else Backend("numpy", "cpu", "float64")
    provenance = {**describe(used), "optimizer": _optimizer_name(problem, config), "wall_s": round(wall, 4),
                  "pass_s": round(problem.pass_s, 5), "passes_equivalent": round(wall / problem.pass_s, 1),
                  "passes": None if problem.passes is None else round(problem.passes, 2)}
    th, bs, ks, ba, ka, g = problem.split(x)
    shift = th.mean()  # ~0 up to rounding; absorbing it leaves the data terms unchanged
    th, bs, ba = th - shift, bs - shift, ba - shift
    warnings = _item_warnings(static, config)
    missing = n_models - problem.M
    if missing:
        warnings.append(f"{missing} models have no data in the fitted sources; their theta is NaN")
    res = JointResult(
        config=config, theta=_expand(n_models, problem.models, th),
        b_static=_expand(static.shape[1] if static is not None else 0, problem.s_items if problem.has_static else [], bs),
        k_static=_expand(static.shape[1] if static is not None else 0, problem.s_items if problem.has_static else [], ks),
        b_arena=_expand(arena.shape[1] if arena is not None else 0, problem.a_items if problem.has_arena else [], ba),
        k_arena=_expand(arena.shape[1] if arena is not None else 0, problem.a_items if problem.has_arena else [], ka),
        gamma=float(config.gamma0 * math.exp(g)) if problem.has_arena else float("nan"),
        objective=fval, iterations=nit, converged=conv, pairs=pairs_used, warnings=warnings,
        chance_static=None if static is None or not problem.has_static else static.chance, provenance=provenance)
    res.metrics = in_sample_metrics(res, static if problem.has_static else None, pair_keep)
    progress(1, 1, f"DualEval {config.mode} fit done: objective {fval:.6f}")
    return res


def fit_static_weighted(static: StaticData, weights: np.ndarray, config: JointConfig, *,
                        init: JointResult | dict | None = None, cancel: threading.Event | None = None,
                        device: str | Backend = "auto") -> np.ndarray:
    """theta (per model, NaN where a model has no data) of the static-only fit in which column q of ``static``
    counts ``weights[q]`` times: the same objective, iterates and optimum as ``fit_joint`` on the matrix with each
    column repeated ``weights[q]`` times (block-coordinate Newton keeps repeated columns identical: their item
    steps are the same), at the cost of the distinct columns only.  For bootstrap replicates (Appendix D), which
    draw about 37 % of the columns more than once; no result object, metrics or warnings are built."""
    cfg = replace(config, mode="static")
    if cfg.optimizer not in ("newton", "block"):
        raise EngineError("a weighted static fit runs block-coordinate Newton (optimizer 'newton' or 'block')")
    n_models = _n_models(static, None)
    problem = _Problem(static, None, n_models, cfg, static_weight=weights)
    x0 = _initial_vector(problem, init)
    backend = device if isinstance(device, Backend) else resolve(device, problem.M * problem.Ns)
    x, *_ = _run_block_newton(problem, x0, cfg, no_progress, cancel, backend, start_from_rates=init is None)
    th = x[:problem.M]
    return _expand(n_models, problem.models, th - th.mean())


def _block_joint(problem: _Problem, config: JointConfig) -> bool:
    """Static and arena data too large for the full Newton system: the joint block-coordinate Newton
    (:mod:`.block_joint`) instead of L-BFGS (or of a Newton system whose Schur complement dominates)."""
    return (problem.has_static and problem.has_arena and config.optimizer in ("newton", "block")
            and (config.optimizer == "block" or not _newton_fits(problem)))


def _optimizer_name(problem: _Problem, config: JointConfig) -> str:
    if config.optimizer == "adam":
        return "adam"
    if config.optimizer == "newton" and _newton_fits(problem):
        return "newton"
    if _block_joint(problem, config):
        return "block_joint"
    if config.optimizer == "block" or (config.optimizer == "newton" and not problem.has_arena):
        return "block"
    return "lbfgs"


def _newton_fits(problem: _Problem) -> bool:
    """Whether the full Newton system is used: never for a static-only fit (block-coordinate Newton reaches the same
    optimum faster at every size measured, 100 x 300 to 2,000 x 2,000: e.g. 1,000 x 1,000 0.34 s vs 14.9 s, equal
    objectives to 1e-11; docs/BENCHMARKS.md); with arena data while its Schur block (the smaller side) is at most
    ``_NEWTON_MAX_BLOCK``."""
    if not problem.has_arena:
        return False
    # the Schur complement over the smaller side costs side^2 x the other side per iteration (2,000 models x 14,805
    # items: 1.2e11 flops, ~50 s a Newton iteration here); above _NEWTON_MAX_FLOPS the joint block Newton is used
    side = min(problem.M, 2 * problem.n_items)
    return side <= _NEWTON_MAX_BLOCK and float(side) ** 2 * max(problem.M, 2 * problem.n_items) <= _NEWTON_MAX_FLOPS


def _n_models(static, arena) -> int:
    if static is None and arena is None:
        raise EngineError("no data: give static labels, arena rewards or both")
    if static is not None and arena is not None and static.shape[0] != arena.shape[0]:
        raise EngineError(f"static has {static.shape[0]} models but arena has {arena.shape[0]}: align both to one "
                          "model list (NaN / mask=False for a model missing from one source)")
    return (static if static is not None else arena).shape[0]


def objective(result: JointResult, static: StaticData | None, arena: ArenaData | None,
              config: JointConfig | None = None) -> float:
    """The section-3 objective of given parameters (e.g. the reference's published theta/b/k/gamma) on our data."""
    config = config or result.config
    pairs = result.pairs if result.pairs is not None or not config.uses_arena else None
    if config.uses_arena and arena is not None and pairs is None:
        pairs = build_pairs(arena, config)
    problem = _Problem(static, pairs if config.uses_arena else None, _n_models(static, arena), config)
    x = _initial_vector(problem, result)
    return problem.value(x)


# ------------------------------------------------------------------------------------------------ frozen items
_ABILITY_STEP_TOL = 1e-10  # a frozen-item ability refit ends when no model's Newton step exceeds this


def _frozen_static_abilities(problem: _Problem, x0: np.ndarray, max_iter: int = 100) -> np.ndarray:
    """theta minimising the static objective with every item frozen (``x0``: the start of theta, then the items).

    With the items fixed the objective is a sum of one-dimensional terms, one per model (its cells' losses plus its
    prior), so each model's ability is found by its own safeguarded Newton iteration, all models at once: one
    fused pass (float64) per iteration gives every model's gradient and curvature; a step is clipped to 1 and kept
    inside the bracket the gradient signs have established (bisection when Newton leaves it), so every model
    converges, to the unique minimum of a 2PL term (convex) or to a stationary point of a term with a chance level.
    Stops when no step exceeds ``_ABILITY_STEP_TOL``.  It replaces L-BFGS over all abilities at once (ftol 1e-15,
    gtol 1e-8: tens of dense evaluations, and on large matrices its gradient test stopped short of 1e-4 in theta)."""
    M, n = problem.M, problem.Ns
    bs, ks = x0[M:M + n], x0[M + n:M + 2 * n]
    lam = problem.cfg.lambda_reg
    lt = lam / M if problem.reg_mean else lam
    w = problem.cfg.lambda_static / problem.n_static
    bk = Backend("numpy", "cpu", "float64")
    th = x0[:M].copy()
    lo, hi = np.full(M, -np.inf), np.full(M, np.inf)
    for _ in range(max_iter):
        r = problem.static_pass(th, bs, ks, rows=True, cols=False, backend=bk, loss=False)
        g = w * r.g_theta + 2 * lt * th
        h = w * r.h_theta + 2 * lt
        step = g / h
        active = np.abs(step) > _ABILITY_STEP_TOL
        if not active.any():
            break
        lo = np.where(g < 0, np.maximum(lo, th), lo)  # the minimum lies above a point of negative gradient
        hi = np.where(g > 0, np.minimum(hi, th), hi)
        cand = th - np.clip(step, -1.0, 1.0)
        outside = active & ((cand < lo) | (cand > hi)) & np.isfinite(lo) & np.isfinite(hi)
        th = np.where(outside, 0.5 * (lo + hi), np.where(active, cand, th))
    return th


def fit_abilities(static: StaticData | None, arena: ArenaData | None, item_params: JointResult,
                  config: JointConfig | None = None, *, static_items: np.ndarray | None = None,
                  arena_items: np.ndarray | None = None, pairs: PairSet | None = None) -> np.ndarray:
    """Refit only theta with b, k and gamma frozen at ``item_params`` (section 4.2 subset refit; screening).

    ``static_items`` / ``arena_items`` are boolean masks restricting the items used.  theta is not centred: the
    frozen difficulties anchor the scale (the reference centres without absorbing into b, which changes the fit)."""
    config = config or item_params.config
    n_models = _n_models(static, arena)
    if static is not None and config.uses_static and not (config.uses_arena and arena is not None):
        # static items only: the problem on the selected columns (no models x items mask of the whole matrix)
        use = np.isfinite(item_params.b_static)
        if static_items is not None:
            use &= np.asarray(static_items, bool)
        cols = np.flatnonzero(use)
        sub = static if len(cols) == static.shape[1] else static_columns(static, cols)
        if not sub.mask.any():
            raise EngineError("the selected items carry no data for an ability refit; select more items")
        problem = _Problem(sub, None, n_models, replace(config, mode="static"), min_models=1)
        x0 = _initial_vector(problem, {"b_static": item_params.b_static[cols], "k_static": item_params.k_static[cols]})
        # every ability starts at 0, as the L-BFGS refit did: models with the same responses then take the same
        # steps and end exactly tied (a warm start broke such ties by rounding, and a Spearman on a one-item
        # subset moved with them); with a chance level the term may also have several stationary points
        x0[:problem.M] = 0.0
        return _expand(n_models, problem.models, _frozen_static_abilities(problem, x0))
    smask = None
    if static is not None and config.uses_static:
        smask = static.mask & (True if static_items is None else np.asarray(static_items, bool)[None, :])
        smask = smask & np.isfinite(item_params.b_static)[None, :]
    keep = None
    if config.uses_arena and arena is not None:
        pairs = pairs if pairs is not None else (item_params.pairs or build_pairs(arena, config))
        keep = np.isfinite(item_params.b_arena)[pairs.prompt]
        if arena_items is not None:
            keep &= np.asarray(arena_items, bool)[pairs.prompt]
    has_static = smask is not None and smask.any()
    has_arena = keep is not None and (keep & pairs.decisive).any()
    if not (has_static or has_arena):
        raise EngineError("the selected items carry no data for an ability refit; select more items")
    cfg = replace(config, mode="joint" if has_static and has_arena else ("static" if has_static else "arena"))
    problem = _Problem(static if has_static else None, pairs if has_arena else None, n_models, cfg,
                       pair_keep=keep, static_mask=smask, min_models=1)
    x0 = _initial_vector(problem, item_params)
    x0[:problem.M] = 0.0
    M = problem.M
    if not has_arena:  # arena prompts selected, but none with a decisive pair: the static cells alone
        return _expand(n_models, problem.models, _frozen_static_abilities(problem, x0))

    def fun(t):
        x = x0.copy()
        x[:M] = t
        f, gr = problem.value_grad(x)
        return f, gr[:M]

    from scipy.optimize import minimize

    res = minimize(fun, np.zeros(M), jac=True, method="L-BFGS-B",
                   options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-8})
    return _expand(n_models, problem.models, res.x)

