"""1PL by MAP (paper 003 section 3.1, Appendix C.3), its Laplace posterior and online calibration (4.1);
see the package docstring."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy import linalg, special

from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress

from .inputs import _as_counts, _chance_vector, _log_p_terms
from .mml import fit_mml

__all__ = ["LaplacePosterior", "OnePLConfig", "OnePLResult", "fit_1pl", "online_difficulty"]


@dataclass(frozen=True)
class OnePLConfig:
    """1PL difficulty fit of paper 3 (section 3.1, Appendix C.3 "IRT fitting").

    ``method="map"``: posterior mode under ``theta ~ N(0, prior_sd_theta^2)``, ``b ~ N(0, prior_sd_b^2)``
    (the paper's priors: both 1). ``method="mml"``: Rasch by marginal ML with free latent variance
    (:func:`fit_mml`), abilities as EAP; offered as the psychometric cross-check, not the paper's choice.
    ``prior_mean_theta`` / ``prior_mean_b`` shift the priors (the hierarchical variants of C.3 set them, with the
    SDs, from their hyperpriors; see ``coverage.robustness.prior_sensitivity``). ``tol`` stops the Newton
    iteration once the predicted decrease of the objective (half the Newton
    decrement) is below it, in nats.
    """

    method: Literal["map", "mml"] = "map"
    prior_sd_theta: float = 1.0
    prior_sd_b: float = 1.0
    max_iter: int = 100
    tol: float = 1e-9
    prior_mean_theta: float = 0.0
    prior_mean_b: float = 0.0


@dataclass(frozen=True)
class LaplacePosterior:
    """Gaussian approximation N(mode, H^-1) of the 1PL posterior; H is the information at the mode (observed;
    the Fisher information where the observed one is not positive definite).

    Stored block-wise: ``h_theta`` and ``h_b`` are the diagonals, ``w`` (models x items) the coupling
    weights (the off-diagonal block is ``-w``). Draws are exact for that Gaussian (C.6 uncertainty).
    """

    theta: np.ndarray
    b: np.ndarray
    h_theta: np.ndarray
    h_b: np.ndarray
    w: np.ndarray | None  # dense coupling block; None when ``coupling`` holds it (large fits, issue 26)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    coupling: object = None  # ``onepl_large.Coupling``: W dense or as a low-rank product

    @property
    def W(self):
        """The coupling block as an ``onepl_large.Coupling`` (dense or low-rank)."""
        from .onepl_large import Coupling

        return self.coupling if self.coupling is not None else Coupling(dense=self.w)

    def dense_w(self) -> np.ndarray:
        """W as a dense models x items array (built from the factors when the fit kept them)."""
        if self.w is not None:
            return self.w
        A, B = self.coupling.factors if self.coupling.dense is None else (None, None)
        return self.coupling.dense if A is None else A @ B.T

    def _cholesky(self) -> np.ndarray:
        """Lower Cholesky factor of the small Schur complement, computed once (C.6 draws come in chunks); the fit
        may leave it here (only its lower triangle is read: ``solve_triangular`` of its transpose, upper)."""
        if "chol" not in self._cache:
            self._cache["chol"] = linalg.cholesky(self.W.schur(self.h_theta, self.h_b), lower=True)
        return self._cache["chol"]

    def sample_b(self, rngs: Sequence[np.random.Generator]) -> np.ndarray:
        """One difficulty draw from the Laplace posterior per generator (draws x items): each draw's normals
        come from its own generator only, so a draw is the same whichever others are drawn beside it (up to the
        rounding of the products, which a fixed set of generators fixes)."""
        W = self.W
        m, n = W.shape
        chol = self._cholesky()
        if m <= n:
            # theta block has precision S = H_tt - W H_bb^-1 W^T; b | theta ~ N(b + H_bb^-1 W^T dtheta, H_bb^-1)
            # (built draws x items, C-contiguous, so that the per-draw sorts of C.6 run on contiguous rows)
            normals = [(r.standard_normal(m), r.standard_normal(n)) for r in rngs]
            dtheta = linalg.solve_triangular(chol.T, np.stack([z for z, _ in normals], axis=1), lower=False)
            draws = np.stack([z for _, z in normals])
            draws *= 1.0 / np.sqrt(self.h_b)
            draws += W.rmatvec(dtheta).T / self.h_b
            draws += self.b
            return draws
        z = np.stack([r.standard_normal(n) for r in rngs], axis=1)
        draws = linalg.solve_triangular(chol.T, z, lower=False)
        return np.ascontiguousarray((self.b[:, None] + draws).T)


@dataclass(frozen=True)
class OnePLResult:
    """1PL fit: abilities ``theta`` (models), difficulties ``b`` (items) and posterior SEs of ``b``.

    ``objective`` is the negative log posterior (MAP) or negative marginal log-likelihood (MML) at the end;
    ``laplace`` (MAP only) draws from the Laplace posterior for the C.6 uncertainty of the metrics.
    """

    theta: np.ndarray
    b: np.ndarray
    b_se: np.ndarray
    objective: float
    iterations: int
    converged: bool
    chance: np.ndarray
    method: str = "map"
    laplace: LaplacePosterior | None = field(default=None, repr=False)


def _map_objective_and_derivs(theta, b, c, k, g, var_t, var_b, mu_t=0.0, mu_b=0.0):
    """Negative log posterior of the 1PL, its gradient and information blocks (h_theta, h_b, w)."""
    eta = theta[:, None] - b[None, :]
    if np.all(g == 0):
        # c log s + (k - c) log(1 - s) = c * eta - k * softplus(eta); one exp and one log1p per cell
        e = np.exp(-np.abs(eta))
        softplus = np.log1p(e)
        softplus += np.maximum(eta, 0.0)
        loglik = theta @ c.sum(axis=1) - b @ c.sum(axis=0) - np.sum(k * softplus)
        sig = np.where(eta >= 0, 1.0, e)
        sig /= 1.0 + e
        score = c - k * sig  # d loglik / d eta
        w = k * sig
        w *= 1.0 - sig  # Fisher = observed information (canonical link)
    else:
        log_p, log_q, sig = _log_p_terms(eta, g[None, :])
        loglik = np.sum(c * log_p + (k - c) * log_q)
        p = np.exp(log_p)
        ratio = sig / p
        score = (c - k * p) * ratio
        fisher = k * (1.0 - g)[None, :] * sig * (1.0 - sig) * ratio
        # observed information = Fisher - (c - k p) sigma (1 - sigma) g / p^2 (exact Newton; Fisher scoring
        # alone converges only linearly here). It can be indefinite away from the mode: the step then falls
        # back to the Fisher weights, which are always positive.
        w = fisher - (c - k * p) * sig * (1.0 - sig) * g[None, :] / p**2
        f = -loglik + 0.5 * np.sum((theta - mu_t) ** 2) / var_t + 0.5 * np.sum((b - mu_b) ** 2) / var_b
        g_theta = -score.sum(axis=1) + (theta - mu_t) / var_t
        g_b = score.sum(axis=0) + (b - mu_b) / var_b
        observed = (g_theta, g_b, w.sum(axis=1) + 1.0 / var_t, w.sum(axis=0) + 1.0 / var_b, w)
        expected = (g_theta, g_b, fisher.sum(axis=1) + 1.0 / var_t, fisher.sum(axis=0) + 1.0 / var_b, fisher)
        if np.all(observed[2] > 0) and np.all(observed[3] > 0):
            try:
                _schur(*observed[2:])
                return float(f), observed
            except linalg.LinAlgError:
                pass
        return float(f), expected
    f = -loglik + 0.5 * np.sum((theta - mu_t) ** 2) / var_t + 0.5 * np.sum((b - mu_b) ** 2) / var_b
    g_theta = -score.sum(axis=1) + (theta - mu_t) / var_t
    g_b = score.sum(axis=0) + (b - mu_b) / var_b
    h_theta = w.sum(axis=1) + 1.0 / var_t
    h_b = w.sum(axis=0) + 1.0 / var_b
    return float(f), (g_theta, g_b, h_theta, h_b, w)


def _schur_matrix(h_theta, h_b, w) -> np.ndarray:
    """Schur complement on the smaller side of H = [[diag h_t, -W], [-W^T, diag h_b]]."""
    m, n = w.shape
    if m <= n:
        ws = w * (1.0 / np.sqrt(h_b))[None, :]
        return np.diag(h_theta) - ws @ ws.T
    ws = w * (1.0 / np.sqrt(h_theta))[:, None]
    return np.diag(h_b) - ws.T @ ws


def _schur(h_theta, h_b, w):
    """Cholesky factorisation (scipy ``cho_factor``) of :func:`_schur_matrix`."""
    return linalg.cho_factor(_schur_matrix(h_theta, h_b, w), lower=True)


def _newton_step(derivs):
    """Solve H [dt; db] = -[g_theta; g_b] through the Schur complement (cost min(m, n)^2 * max(m, n))."""
    g_theta, g_b, h_theta, h_b, w = derivs
    m, n = w.shape
    r1, r2 = -g_theta, -g_b
    fac = _schur(h_theta, h_b, w)
    if m <= n:
        dt = linalg.cho_solve(fac, r1 + w @ (r2 / h_b))
        db = (r2 + w.T @ dt) / h_b
    else:
        db = linalg.cho_solve(fac, r2 + w.T @ (r1 / h_theta))
        dt = (r1 + w @ db) / h_theta
    return dt, db


def _b_posterior_se(h_theta, h_b, w) -> np.ndarray:
    """sqrt(diag of the b-block of H^-1), computed through the small Schur complement."""
    m, n = w.shape
    fac = _schur(h_theta, h_b, w)
    if m <= n:
        v = w / h_b  # m x n
        var = 1.0 / h_b + np.einsum("ij,ij->j", v, linalg.cho_solve(fac, v))
    else:
        var = np.diag(linalg.cho_solve(fac, np.eye(n))).copy()
    return np.sqrt(np.maximum(var, 0.0))


def fit_1pl(
    correct: np.ndarray | None,
    mask: np.ndarray | None = None,
    *,
    chance: float | np.ndarray | None = None,
    successes: np.ndarray | None = None,
    trials: np.ndarray | None = None,
    config: OnePLConfig = OnePLConfig(),
    init: tuple[np.ndarray, np.ndarray] | None = None,
    progress: Progress = no_progress,
    cancel: threading.Event | None = None,
) -> OnePLResult:
    """Fit the paper's 1PL (with fixed per-item chance ``chance`` for multiple choice) to models x items data.

    ``correct`` is 0/1 (NaN or ``mask=False`` for missing); alternatively ``successes``/``trials`` give the
    binomial likelihood of repeated rollouts. Items or models with no observed cell are still estimated
    (their prior pins them at 0); an all-correct or all-wrong item gets a finite estimate thanks to the prior.
    """
    if config.method == "map" and _large(correct, successes, chance, init):
        return _fit_map_large(correct, mask, successes, trials, config, progress, cancel)
    c, k = _as_counts(correct, mask, successes, trials)
    m, n = c.shape
    g = _chance_vector(chance, n)
    if config.method == "mml":
        res = fit_mml(
            None, None, successes=c, trials=k, model="rasch", chance=g, progress=progress, cancel=cancel
        )
        b_rows = res.se[res.se["param"] == "b"].sort_values("item")
        return OnePLResult(
            theta=res.theta_eap,
            b=res.b,
            b_se=b_rows["se"].to_numpy(),
            objective=-res.loglik,
            iterations=res.iterations,
            converged=res.converged,
            chance=g,
            method="mml",
        )
    if config.method != "map":
        raise EngineError(f"unknown 1PL method {config.method!r}; use 'map' or 'mml'")
    var_t, var_b = config.prior_sd_theta**2, config.prior_sd_b**2
    if var_t <= 0 or var_b <= 0:
        raise EngineError("prior standard deviations must be positive")
    # start: logit of smoothed rates
    p_item = (c.sum(0) + 0.5) / (k.sum(0) + 1.0)
    p_model = (c.sum(1) + 0.5) / (k.sum(1) + 1.0)
    b = -special.logit(p_item)
    b -= b.mean()
    theta = special.logit(p_model)
    theta -= theta.mean()
    if init is not None:  # a warm start (leave-one-out refits, prior variants)
        theta, b = np.array(init[0], float), np.array(init[1], float)
        if theta.shape != (m,) or b.shape != (n,):
            raise EngineError(f"init must be (theta of {m} models, b of {n} items)")
    mu_t, mu_b = config.prior_mean_theta, config.prior_mean_b
    f, derivs = _map_objective_and_derivs(theta, b, c, k, g, var_t, var_b, mu_t, mu_b)
    converged = False
    it = 0
    for it in range(1, config.max_iter + 1):
        check_cancel(cancel)
        dt, db = _newton_step(derivs)
        decrement = -(derivs[0] @ dt + derivs[1] @ db) / 2  # predicted decrease of the objective (nats)
        if decrement < config.tol:
            converged = True
            break
        step = 1.0
        for _ in range(40):  # backtracking: Fisher scoring with g > 0 is not always a descent step of size 1
            f_new, derivs_new = _map_objective_and_derivs(
                theta + step * dt, b + step * db, c, k, g, var_t, var_b, mu_t, mu_b
            )
            if f_new <= f + 1e-12 * abs(f):
                break
            step *= 0.5
        theta, b = theta + step * dt, b + step * db
        f_old, f, derivs = f, f_new, derivs_new
        progress(it, config.max_iter, f"1PL MAP Newton step {it}: objective {f:.6g}")
        if f_old - f <= 1e-15 * abs(f):  # no progress possible at machine precision
            converged = decrement < 1e-6
            break
    if not (np.all(np.isfinite(theta)) and np.all(np.isfinite(b))):
        raise EngineError("1PL fit diverged; check that responses are 0/1 or successes <= trials")
    _, _, h_theta, h_b, w = derivs
    return OnePLResult(
        theta=theta,
        b=b,
        b_se=_b_posterior_se(h_theta, h_b, w),
        objective=float(f),
        iterations=it,
        converged=converged,
        chance=g,
        method="map",
        laplace=LaplacePosterior(theta=theta, b=b, h_theta=h_theta, h_b=h_b, w=w),
    )


LARGE_FLOPS = 1e10  # min(m, n)^2 max(m, n) of a full Newton step above which a 1PL without guessing goes large


def _large(correct, successes, chance, init) -> bool:
    """Whether :func:`fit_1pl` takes the large-matrix path (:mod:`.onepl_large`): MAP, no chance level, no warm
    start, and a full Newton step dearer than ``LARGE_FLOPS``."""
    if init is not None or (chance is not None and np.any(np.asarray(chance, float) != 0)):
        return False
    shape = np.shape(successes if successes is not None else correct)
    if len(shape) != 2:
        return False
    m, n = shape
    return float(min(m, n)) ** 2 * max(m, n) > LARGE_FLOPS


def _fit_map_large(correct, mask, successes, trials, config: OnePLConfig, progress, cancel) -> OnePLResult:
    """The MAP fit of :func:`fit_1pl` (no chance level) by block-coordinate sweeps, then the same full Newton
    steps, line search and stopping rule as the small path (see :mod:`.onepl_large`)."""
    from . import onepl_large as big

    data = big.cell_data(correct, mask, successes, trials)
    var_t, var_b = config.prior_sd_theta**2, config.prior_sd_b**2
    if var_t <= 0 or var_b <= 0:
        raise EngineError("prior standard deviations must be positive")
    mu_t, mu_b = config.prior_mean_theta, config.prior_mean_b
    prior = (var_t, var_b, mu_t, mu_b)
    theta, b = big.start_point(data)
    theta, b, sweeps = big.block_newton(data, theta, b, var_t=var_t, var_b=var_b, mu_t=mu_t, mu_b=mu_b,
                                        progress=progress, cancel=cancel)
    f, gt, gb, ht, hb = big.derivatives(data, theta, b, *prior)
    W = big.coupling(data, theta, b)
    converged, it, fac = False, 0, None
    for it in range(1, config.max_iter + 1):
        check_cancel(cancel)
        dt, db, fac = big.newton_step(gt, gb, ht, hb, W)
        decrement = -(gt @ dt + gb @ db) / 2
        if decrement < config.tol:
            converged = True
            break
        step = 1.0
        for _ in range(40):
            f_new = big.objective(data, theta + step * dt, b + step * db, *prior)
            if f_new <= f + 1e-12 * abs(f):
                break
            step *= 0.5
        theta, b = theta + step * dt, b + step * db
        f_old = f
        f, gt, gb, ht, hb = big.derivatives(data, theta, b, *prior)
        W = big.coupling(data, theta, b)
        fac = None
        progress(it, config.max_iter, f"1PL MAP Newton step {it}: objective {f:.6g}")
        if f_old - f <= 1e-15 * abs(f):
            converged = decrement < 1e-6
            break
    if not (np.all(np.isfinite(theta)) and np.all(np.isfinite(b))):
        raise EngineError("1PL fit diverged; check that responses are 0/1 or successes <= trials")
    if fac is None:
        fac = linalg.cho_factor(W.schur(ht, hb), lower=True)
    laplace = LaplacePosterior(theta=theta, b=b, h_theta=ht, h_b=hb, w=W.dense, coupling=W)
    laplace._cache["chol"] = fac[0]
    return OnePLResult(theta=theta, b=b, b_se=_posterior_se_b(ht, hb, W, fac), objective=float(f),
                       iterations=sweeps + it, converged=converged, chance=np.zeros(data.n), method="map",
                       laplace=laplace)


def _posterior_se_b(h_theta, h_b, W, fac) -> np.ndarray:
    """:func:`_b_posterior_se` from a Cholesky factor of the Schur complement; with low-rank W = A B^T the b
    variances are ``1 / h_b + c_j^T (A^T S^-1 A) c_j``, ``c_j = B_j / h_bj`` (no models x items solve)."""
    m, n = W.shape
    if W.dense is not None:
        if m <= n:
            v = W.dense / h_b
            var = 1.0 / h_b + np.einsum("ij,ij->j", v, linalg.cho_solve(fac, v))
        else:
            var = np.diag(linalg.cho_solve(fac, np.eye(n))).copy()
        return np.sqrt(np.maximum(var, 0.0))
    A, B = W.factors
    if m <= n:
        G = A.T @ linalg.cho_solve(fac, A)
        C = B / h_b[:, None]
        var = 1.0 / h_b + np.einsum("jr,rs,js->j", C, G, C)
    else:
        var = np.diag(linalg.cho_solve(fac, np.eye(n))).copy()
    return np.sqrt(np.maximum(var, 0.0))


def online_difficulty(
    theta: np.ndarray,
    successes: np.ndarray,
    trials: np.ndarray,
    *,
    chance: float = 0.0,
    prior_sd_b: float | None = None,
) -> float:
    """Online calibration of one new item (paper 3, section 4.1): argmax_b of the binomial log-likelihood
    sum_j c_j log P_j + (K_j - c_j) log(1 - P_j), P_j = g + (1 - g) sigmoid(theta_j - b), abilities fixed.

    The paper's formula has no prior; an item every annotator solves (or fails) then has no finite MLE, so
    ``prior_sd_b`` (default None = the paper's formula) adds the fitting prior ``N(0, prior_sd_b^2)``; without
    it a perfect or zero score raises :class:`EngineError` telling the caller to pass a prior.
    """
    th = np.asarray(theta, dtype=float)
    c = np.asarray(successes, dtype=float)
    k = np.asarray(trials, dtype=float)
    if th.shape != c.shape or c.shape != k.shape or th.ndim != 1:
        raise EngineError("theta, successes and trials must be 1-D arrays of one length (one per annotator)")
    keep = k > 0
    if not keep.any():
        raise EngineError("no annotator trial to calibrate the new item from")
    th, c, k = th[keep], c[keep], k[keep]
    g = _chance_vector(chance, 1)[0]
    floor = k.sum() * g
    if prior_sd_b is None and (c.sum() >= k.sum() or c.sum() <= floor):
        raise EngineError(
            "the new item was solved by every annotator trial (or at or below chance); its difficulty has no "
            "finite maximum-likelihood value: pass prior_sd_b=1.0 to use the fit's N(0, 1) prior"
        )
    inv_var = 0.0 if prior_sd_b is None else 1.0 / prior_sd_b**2
    b = float(np.mean(th) - special.logit(np.clip((c.sum() + 0.5) / (k.sum() + 1.0), 1e-6, 1 - 1e-6)))
    for _ in range(100):
        log_p, _, sig = _log_p_terms(th - b, g)
        p = np.exp(log_p)
        ratio = sig / p
        grad = -np.sum((c - k * p) * ratio) - b * inv_var  # d loglik / d b
        info = np.sum(k * (1 - g) * sig * (1 - sig) * ratio) + inv_var
        step = grad / info
        b += float(np.clip(step, -2.0, 2.0))
        if abs(step) < 1e-10:
            break
    return b
