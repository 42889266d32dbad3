"""The 1PL MAP fit (paper 003 C.3) on leaderboard-sized matrices (issue 26): the same posterior mode, Laplace
posterior and difficulty SEs as the full Newton iteration of :mod:`.onepl`, without its dense float64 copies.

:func:`.onepl.fit_1pl` takes this path for the 2PL-free 1PL (no chance level) when a full Newton step would cost
more than ``onepl.LARGE_FLOPS`` (5,000 models x 14,000 items: each step's Schur complement was 3.5e11 flops,
and the derivatives 8 dense float64 matrices, 4.5 GB).  Two stages:

1. **Block-coordinate Newton** on the integer cells (``engine.backend.fused_pass`` with every slope 1: the 1PL's
   logit ``theta - b`` is the 2PL's with ``a = 1``).  A sweep takes one damped Newton step per item given the
   abilities (kept by each item only if its own objective term decreases; items are independent given theta),
   one Newton step per model given the items (independent and convex), and the exact minimum along the one
   direction only the priors pin, the common shift ``theta + c, b + c``.  Float32 passes, then float64.
2. **Full Newton steps** from there, as :mod:`.onepl` takes them (the same Schur complement on the smaller side,
   the same line search and the same stopping rule: the Newton decrement below ``config.tol``), usually one or
   two.  The coupling block ``W = trials * sigma' (theta_i - b_j)`` is, on complete data with one trial count,
   a smooth function of ``theta_i - b_j``: it is kept as the rank-r product ``A B^T`` of Chebyshev interpolation
   in theta (``A``: the Lagrange basis at the abilities, ``B``: the exact ``sigma'`` at the nodes), with r grown
   until a sample of cells agrees with the exact values to ``_FACTOR_TOL``; elsewhere (missing cells, mixed
   trials) ``W`` is built densely, in row blocks.

The 1PL without a chance level is strictly convex, so both stages reach the same mode as the full iteration;
tests/unit/test_scale.py checks mode, SEs, objective and the Laplace draws against :mod:`.onepl`.
"""

from __future__ import annotations

import threading

import numpy as np
from scipy import linalg, special

from benchloupe.engine.backend import Backend, fused_pass
from benchloupe.engine.common import (
    EngineError,
    Progress,
    check_cancel,
    no_progress,
    thread_pool,
    usable_cores,
)

_F32_SWITCH = 1e-7  # float32 sweeps end at this relative decrease (their resolution); float64 sweeps follow
_SWEEP_FTOL = 1e-12  # float64 sweeps end at this relative decrease; the full Newton steps finish the job
_MAX_SWEEPS = 200
_FLOAT64_SWEEPS = False  # after the float32 sweeps the full Newton steps take over (quadratic from there)
_FACTOR_TOL = 1e-13  # max |W - A B^T| over the sampled cells (W <= 0.25 per trial)
_FACTOR_SAMPLE = 20_000


class CellData:
    """The response matrix as the passes read it: integer successes ``Y`` and trials ``N`` (None: one trial per
    cell, every cell observed), with the per-model / per-item totals of both."""

    def __init__(self, Y: np.ndarray, N: np.ndarray | None):
        self.Y, self.N = Y, N
        self.m, self.n = Y.shape
        self.succ_m = Y.sum(axis=1, dtype=np.int64)
        self.succ_q = Y.sum(axis=0, dtype=np.int64)
        if N is None:
            self.tri_m = np.full(self.m, self.n, np.int64)
            self.tri_q = np.full(self.n, self.m, np.int64)
        else:
            self.tri_m = N.sum(axis=1, dtype=np.int64)
            self.tri_q = N.sum(axis=0, dtype=np.int64)

    def constant_trials(self) -> int | None:
        """The trial count when every cell has the same (complete data), else None."""
        if self.N is None:
            return 1
        k = int(self.N.flat[0])
        if k > 0 and bool(np.all(self.tri_m == k * self.n)) and bool(np.all(self.N == k)):
            return k
        return None


def cell_data(correct, mask, successes, trials) -> CellData:
    """The cells without a float64 copy of the matrix: 0/1 ``correct`` as int8 (trials None when every cell is
    observed, else the observed mask as int8), successes / trials in their own dtype, zero where unobserved; the
    checks and messages of ``irt.inputs._as_counts``."""
    if successes is not None or trials is not None:
        if successes is None or trials is None:
            raise EngineError("successes and trials must be given together (binomial likelihood)")
        s, t = np.asarray(successes), np.asarray(trials)
        if s.shape != t.shape or s.ndim != 2:
            raise EngineError(f"successes {s.shape} and trials {t.shape} must be 2-D arrays of one shape")
        obs = t > 0
        if s.dtype.kind == "f" or t.dtype.kind == "f":
            obs &= np.isfinite(s) & np.isfinite(t)
        if mask is not None:
            obs &= np.asarray(mask, bool)
        Y, N = np.where(obs, s, 0), np.where(obs, t, 0)
    else:
        if correct is None:
            raise EngineError("give either correct (0/1) or successes and trials")
        y = np.asarray(correct)
        if y.ndim != 2:
            raise EngineError(f"correct must be a models x items matrix, got shape {y.shape}")
        obs = np.isfinite(y) if y.dtype.kind == "f" else np.ones(y.shape, bool)
        if mask is not None:
            m = np.asarray(mask, dtype=bool)
            if m.shape != y.shape:
                raise EngineError(f"mask shape {m.shape} differs from the response shape {y.shape}")
            obs &= m
        Y = np.where(obs, y, 0)
        N = None if obs.all() else obs.view(np.int8)
        if Y.dtype.kind == "f" and np.array_equal(Y, np.round(Y)):
            Y = Y.astype(np.int8)
    if np.any(Y < 0) or np.any(Y > (1 if N is None else N)):
        raise EngineError("successes must lie between 0 and trials (0/1 for correct); fix the response values")
    if not obs.any():
        raise EngineError("the response matrix has no observed cell; import results first")
    return CellData(Y, N)


# --------------------------------------------------------------------------------------------- the coupling W
class Coupling:
    """``W`` (models x items, the off-diagonal information block) either dense or as ``A @ B.T``."""

    def __init__(self, dense: np.ndarray | None = None, factors: tuple[np.ndarray, np.ndarray] | None = None):
        self.dense, self.factors = dense, factors

    @property
    def shape(self) -> tuple[int, int]:
        if self.dense is not None:
            return self.dense.shape
        return self.factors[0].shape[0], self.factors[1].shape[0]

    def matvec(self, x: np.ndarray) -> np.ndarray:  # W x
        if self.dense is not None:
            return self.dense @ x
        A, B = self.factors
        return A @ (B.T @ x)

    def rmatvec(self, y: np.ndarray) -> np.ndarray:  # W^T y
        if self.dense is not None:
            return self.dense.T @ y
        A, B = self.factors
        return B @ (A.T @ y)

    def schur(self, h_theta: np.ndarray, h_b: np.ndarray) -> np.ndarray:
        """The Schur complement on the smaller side of H = [[diag h_t, -W], [-W^T, diag h_b]]."""
        m, n = self.shape
        if self.dense is not None:
            if m <= n:
                ws = self.dense * (1.0 / np.sqrt(h_b))[None, :]
                return np.diag(h_theta) - _gram_rows(ws)
            ws = self.dense * (1.0 / np.sqrt(h_theta))[:, None]
            return np.diag(h_b) - _gram_rows(np.ascontiguousarray(ws.T))
        A, B = self.factors
        if m <= n:
            K = (B / h_b[:, None]).T @ B
            return np.diag(h_theta) - A @ K @ A.T
        K = (A / h_theta[:, None]).T @ A
        return np.diag(h_b) - B @ K @ B.T


def _gram_rows(X: np.ndarray) -> np.ndarray:
    """X X^T, its row blocks on the cores (the CLI's BLAS is single-threaded)."""
    k = usable_cores()
    if k < 2 or X.shape[0] < 512:
        return X @ X.T
    edges = np.linspace(0, X.shape[0], k + 1).astype(int)
    out = np.empty((X.shape[0], X.shape[0]))

    def part(r: int) -> None:
        out[edges[r]:edges[r + 1]] = X[edges[r]:edges[r + 1]] @ X.T

    list(thread_pool("onepl").map(part, range(k)))
    return out


def _sigma_prime(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return e / (1.0 + e) ** 2


def _chebyshev_factors(theta: np.ndarray, b: np.ndarray, r: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """``scale * sigma'(theta_i - b_j) ~ sum_k L_k(theta_i) scale sigma'(t_k - b_j)``: barycentric Lagrange basis
    on r Chebyshev points of the first kind over the abilities' range."""
    lo, hi = float(theta.min()), float(theta.max())
    mid, half = 0.5 * (lo + hi), max(0.5 * (hi - lo), 1e-12)
    k = np.arange(r)
    ang = (2 * k + 1) * np.pi / (2 * r)
    nodes = mid + half * np.cos(ang)
    wts = (-1.0) ** k * np.sin(ang)
    diff = theta[:, None] - nodes[None, :]
    exact = diff == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = wts[None, :] / diff
    A = terms / terms.sum(axis=1, keepdims=True)
    hit = exact.any(axis=1)
    if hit.any():
        A[hit] = exact[hit].astype(float)
    B = scale * _sigma_prime(nodes[None, :] - b[:, None])
    return A, B


def coupling(data: CellData, theta: np.ndarray, b: np.ndarray, rng_seed: int = 0) -> Coupling:
    """``W`` at (theta, b): low-rank when the trials are one constant count and the factors pass the check on a
    sample of cells, else dense (row blocks)."""
    k = data.constant_trials()
    if k is not None:
        rng = np.random.default_rng(rng_seed)
        size = min(_FACTOR_SAMPLE, data.m * data.n)
        ii, jj = rng.integers(0, data.m, size), rng.integers(0, data.n, size)
        exact = k * _sigma_prime(theta[ii] - b[jj])
        for r in (48, 64, 96, 128):
            A, B = _chebyshev_factors(theta, b, r, float(k))
            if np.max(np.abs(np.einsum("ij,ij->i", A[ii], B[jj]) - exact)) <= _FACTOR_TOL:
                return Coupling(factors=(A, B))
    W = np.empty((data.m, data.n))
    step = max(1, (1 << 20) // max(1, data.n))
    for r0 in range(0, data.m, step):
        sl = slice(r0, r0 + step)
        w = _sigma_prime(theta[sl, None] - b[None, :])
        if data.N is not None:
            w *= data.N[sl]
        W[sl] = w
    return Coupling(dense=W)


# --------------------------------------------------------------------------------------------- the fit
def _prior(theta, b, var_t, var_b, mu_t, mu_b) -> float:
    return 0.5 * float(np.sum((theta - mu_t) ** 2)) / var_t + 0.5 * float(np.sum((b - mu_b) ** 2)) / var_b


def _shift(theta, b, var_t, var_b, mu_t, mu_b) -> float:
    """The exact minimum of the objective along theta + c, b + c (only the priors change)."""
    return -(float(np.sum(theta - mu_t)) / var_t + float(np.sum(b - mu_b)) / var_b) / (
        theta.size / var_t + b.size / var_b)


def block_newton(data: CellData, theta: np.ndarray, b: np.ndarray, *, var_t: float, var_b: float,
                 mu_t: float = 0.0, mu_b: float = 0.0, progress: Progress = no_progress,
                 cancel: threading.Event | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Stage 1 (module docstring): block-coordinate Newton sweeps from (theta, b); returns the point and sweeps."""
    Y, N = data.Y, data.N
    n = data.n
    ones = np.ones(n)
    stages = [Backend("numpy", "cpu", "float32"), Backend("numpy", "cpu", "float64")]
    stage = 0
    theta, b = theta.astype(float).copy(), b.astype(float).copy()
    damp = np.full(n, 1e-3)

    def at(th, bb, **kw):
        return fused_pass(Y, N, th, bb, ones, backend=stages[stage], **kw)

    r = at(theta, b, rows=False)
    f = float(r.loss.sum()) + _prior(theta, b, var_t, var_b, mu_t, mu_b)
    it = 0
    while it < _MAX_SWEEPS:
        check_cancel(cancel)
        it += 1
        gb = -r.s0R + (b - mu_b) / var_b
        hb = (r.s0V + 1.0 / var_b) * (1.0 + damp)
        nb = b - np.clip(gb / hb, -1.0, 1.0)
        cand = at(theta, nb, rows=True, cols=False)
        old_q = r.loss + 0.5 * (b - mu_b) ** 2 / var_b
        slack = 0.0 if stage else 1e-6 * np.abs(old_q)
        ok = cand.loss + 0.5 * (nb - mu_b) ** 2 / var_b <= old_q + slack
        g_th, h_th = cand.g_theta, cand.h_theta
        bad = np.flatnonzero(~ok)
        b[ok] = nb[ok]
        if 4 * len(bad) > n:
            again = at(theta, b, rows=True, cols=False)
            g_th, h_th = again.g_theta, again.h_theta
        elif len(bad):  # the rejected items' contributions at their old values
            new = at(theta, nb, rows=True, cols=False, columns=bad)
            old = at(theta, b, rows=True, cols=False, columns=bad)
            g_th = g_th - new.g_theta + old.g_theta
            h_th = h_th - new.h_theta + old.h_theta
        damp = np.where(ok, damp * 0.3, damp * 4.0)
        gt = g_th + (theta - mu_t) / var_t
        theta -= np.clip(gt / (h_th + 1.0 / var_t), -1.0, 1.0)
        c = _shift(theta, b, var_t, var_b, mu_t, mu_b)
        theta += c
        b += c
        r = at(theta, b, rows=False)
        f_new = float(r.loss.sum()) + _prior(theta, b, var_t, var_b, mu_t, mu_b)
        progress(it, _MAX_SWEEPS, f"1PL MAP block sweep {it} ({stages[stage].dtype}): objective {f_new:.10g}")
        decrease, f = f - f_new, f_new
        if decrease <= (_F32_SWITCH if stage == 0 else _SWEEP_FTOL) * max(1.0, abs(f)):
            if stage == 1 or not _FLOAT64_SWEEPS:
                break
            stage = 1
            r = at(theta, b, rows=False)  # the float64 sums at this point
            f = float(r.loss.sum()) + _prior(theta, b, var_t, var_b, mu_t, mu_b)
    return theta, b, it


def derivatives(data: CellData, theta, b, var_t, var_b, mu_t, mu_b):
    """Objective, gradients and the information diagonals at (theta, b) from one float64 pass, and ``W``."""
    r = fused_pass(data.Y, data.N, theta, b, np.ones(data.n), backend=Backend("numpy", "cpu", "float64"))
    f = float(r.loss.sum()) + _prior(theta, b, var_t, var_b, mu_t, mu_b)
    g_theta = r.g_theta + (theta - mu_t) / var_t
    g_b = -r.s0R + (b - mu_b) / var_b
    h_theta = r.h_theta + 1.0 / var_t
    h_b = r.s0V + 1.0 / var_b
    return f, g_theta, g_b, h_theta, h_b


def objective(data: CellData, theta, b, var_t, var_b, mu_t, mu_b) -> float:
    r = fused_pass(data.Y, data.N, theta, b, np.ones(data.n), rows=False, cols=False,
                   backend=Backend("numpy", "cpu", "float64"))
    return float(r.loss.sum()) + _prior(theta, b, var_t, var_b, mu_t, mu_b)


def newton_step(g_theta, g_b, h_theta, h_b, W: Coupling):
    """Solve H [dt; db] = -[g_theta; g_b] through the Schur complement; also returns its Cholesky factor."""
    m, n = W.shape
    r1, r2 = -g_theta, -g_b
    fac = linalg.cho_factor(W.schur(h_theta, h_b), lower=True)
    if m <= n:
        dt = linalg.cho_solve(fac, r1 + W.matvec(r2 / h_b))
        db = (r2 + W.rmatvec(dt)) / h_b
    else:
        db = linalg.cho_solve(fac, r2 + W.rmatvec(r1 / h_theta))
        dt = (r1 + W.matvec(db)) / h_theta
    return dt, db, fac


def start_point(data: CellData) -> tuple[np.ndarray, np.ndarray]:
    """The start of :mod:`.onepl`: logits of the smoothed rates, centred."""
    p_item = (data.succ_q + 0.5) / (data.tri_q + 1.0)
    p_model = (data.succ_m + 0.5) / (data.tri_m + 1.0)
    b = -special.logit(p_item)
    b -= b.mean()
    theta = special.logit(p_model)
    theta -= theta.mean()
    return theta, b
