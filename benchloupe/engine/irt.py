"""Item response theory estimators shared by the coverage, calibration and joint-fit code.

Two families live here.

1. **1PL by MAP** (paper 3, "Your Benchmark Is an Empirical Measure Over Difficulty", section 3.1 and
   Appendix C.3 "IRT fitting"): ``P(Y_ji = 1) = g_i + (1 - g_i) * sigmoid(theta_j - b_i)`` with independent
   ``N(0, 1)`` priors on every ability ``theta_j`` and difficulty ``b_i``; ``g_i`` is the item's chance level
   (0 for free-response items, e.g. 1/4 for four options) and is *fixed*, not estimated, as in the paper.
   With repeated rollouts the likelihood is binomial in ``successes / trials`` (C.3).
   The paper samples this posterior with NUTS (4 chains x 1,000 draws, PyMC). We compute its mode (MAP) by a
   full Newton iteration on all parameters at once, with a backtracking line search: the Hessian has two
   diagonal blocks (abilities, difficulties) coupled by a dense models x items block, so each Newton step
   only needs a Schur complement on the smaller side (``min(models, items)`` squared). For ``g = 0`` the
   observed and expected (Fisher) information coincide; with guessing we use the observed information and
   fall back to the Fisher weights wherever the former is not positive definite. Posterior uncertainty (C.6)
   uses the Laplace approximation around the mode (:class:`LaplacePosterior`), whose exact Gaussian draws
   are made block-wise without ever forming the items x items covariance. This is the documented divergence from the paper: MAP + Laplace instead of
   NUTS draws; ``benchloupe.engine.coverage.metric_uncertainty`` also offers a parametric bootstrap.

2. **Marginal maximum likelihood** (Bock & Aitkin 1981) for Rasch (``a = 1``, latent variance free), 2PL and
   3PL in mirt's slope-intercept parameterisation ``logit P = a * theta + d`` (``b = -d / a``), with
   ``theta ~ N(0, sigma^2)`` (``sigma^2 = 1`` except for Rasch). As in mirt the latent density is discretised on
   61 equally spaced points on [-6, 6]. The fit runs EM cycles (E-step: posterior over the grid; M-step:
   expected complete-data log-likelihood per item, variance in closed form) and then polishes the *same*
   marginal log-likelihood with BFGS on its exact score (Fisher identity), so the result is the MLE rather
   than wherever an EM tolerance happened to stop. Standard errors come from the observed information:
   central differences of the exact score (mirt's default ``SE.type = "Oakes"`` is the same quantity;
   SEM, used in some of mirt's tests, estimates it too). Pattern-frequency weights and missing cells (mask)
   are supported; binomial successes/trials are supported as well.

Layout convention: every matrix is **rows = respondents (models), columns = items**.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
from scipy import linalg, optimize, special

from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress

__all__ = [
    "LaplacePosterior",
    "MMLConfig",
    "MMLResult",
    "OnePLConfig",
    "OnePLResult",
    "fit_1pl",
    "fit_mml",
    "marginal_loglik",
    "online_difficulty",
]


# ---------------------------------------------------------------------------------------------------------
# input handling
# ---------------------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------------------
# 1PL MAP (paper 3, section 3.1 and C.3)
# ---------------------------------------------------------------------------------------------------------


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
    w: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def _cholesky(self) -> np.ndarray:
        """Lower Cholesky factor of the small Schur complement, computed once (C.6 draws come in chunks)."""
        if "chol" not in self._cache:
            self._cache["chol"] = linalg.cholesky(_schur_matrix(self.h_theta, self.h_b, self.w), lower=True)
        return self._cache["chol"]

    def sample_b(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        """``n_draws`` x items difficulty draws from the Laplace posterior."""
        m, n = self.w.shape
        chol = self._cholesky()
        if m <= n:
            # theta block has precision S = H_tt - W H_bb^-1 W^T; b | theta ~ N(b + H_bb^-1 W^T dtheta, H_bb^-1)
            # (built draws x items, C-contiguous, so that the per-draw sorts of C.6 run on contiguous rows)
            dtheta = linalg.solve_triangular(chol.T, rng.standard_normal((m, n_draws)), lower=False)
            draws = rng.standard_normal((n_draws, n))
            draws *= 1.0 / np.sqrt(self.h_b)
            draws += (dtheta.T @ self.w) / self.h_b
            draws += self.b
            return draws
        draws = linalg.solve_triangular(chol.T, rng.standard_normal((n, n_draws)), lower=False)
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


# ---------------------------------------------------------------------------------------------------------
# marginal maximum likelihood (Bock-Aitkin EM over a quadrature grid)
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MMLConfig:
    """Marginal ML by EM on a quadrature grid (Bock & Aitkin 1981), defaults as mirt's unidimensional fit:
    61 equally spaced nodes on [-6, 6], EM until the largest parameter change is below ``em_tol``, then
    BFGS polishing of the marginal log-likelihood to ``gtol``. ``se=True`` computes the observed information
    by central differences (step ``se_step``) of the exact score.
    """

    quadpts: int = 61
    theta_lim: float = 6.0
    max_em_iter: int = 500
    em_tol: float = 1e-5
    polish: bool = True
    gtol: float = 1e-7
    se: bool = True
    se_step: float = 1e-4
    ci_level: float = 0.95

    @staticmethod
    def mirt_like() -> MMLConfig:
        """mirt's own stopping point (its default ``TOL = 1e-4`` on the largest EM parameter change, no
        polishing): reproduces mirt's printed estimates, which stop short of the exact MLE on flat likelihoods."""
        return MMLConfig(em_tol=1e-4, polish=False)


@dataclass(frozen=True)
class MMLResult:
    """MML fit in mirt's parameterisation: ``logit(P - g)/(1 - g) = a * theta + d``, ``b = -d / a``.

    ``se`` has one row per parameter: param (a, d, g, b, latent_var), item (0-based; -1 for latent_var),
    value, se, ci_lo, ci_hi (Wald, ``ci_level``). Fixed parameters (Rasch ``a``, 2PL ``g``) have se NaN.
    """

    a: np.ndarray
    d: np.ndarray
    b: np.ndarray
    g: np.ndarray
    se: pd.DataFrame
    latent_var: float
    loglik: float
    iterations: int
    converged: bool
    theta_eap: np.ndarray
    model: str


class _MarginalModel:
    """Packs parameters, evaluates the marginal log-likelihood and its exact score (Fisher identity)."""

    def __init__(self, c, k, weights, model, chance, cfg: MMLConfig):
        self.c, self.k, self.wt = c, k, weights
        self.model = model
        self.n_items = c.shape[1]
        self.nodes = np.linspace(-cfg.theta_lim, cfg.theta_lim, cfg.quadpts)
        self.g_fixed = chance
        self.cw = c * weights[:, None]
        self.kw = k * weights[:, None]

    # parameter vector: rasch [d (n), log var]; 2pl [a, d]; 3pl [a, d, logit g]
    def unpack(self, x):
        n = self.n_items
        if self.model == "rasch":
            return np.ones(n), x[:n], self.g_fixed, float(np.exp(x[n]))
        if self.model == "2pl":
            return x[:n], x[n : 2 * n], self.g_fixed, 1.0
        return x[:n], x[n : 2 * n], special.expit(x[2 * n :]), 1.0

    def log_prior(self, var):
        lw = -0.5 * self.nodes**2 / var
        return lw - special.logsumexp(lw)

    def estep(self, x):
        a, d, g, var = self.unpack(x)
        eta = a[:, None] * self.nodes[None, :] + d[:, None]  # items x Q
        log_p, log_q, sig = _log_p_terms(eta, g[:, None])
        loglik_rows = self.c @ log_p + (self.k - self.c) @ log_q  # N x Q
        joint = loglik_rows + self.log_prior(var)[None, :]
        norm = special.logsumexp(joint, axis=1)
        post = np.exp(joint - norm[:, None])
        ll = float(np.sum(self.wt * norm))
        r = self.cw.T @ post  # items x Q expected successes
        nn = self.kw.T @ post  # items x Q expected trials
        nq = self.wt @ post  # Q expected persons
        return ll, post, r, nn, nq, (a, d, g, var, eta, log_p, sig)

    def complete_grad(self, x, r, nn, nq, cache):
        """Gradient of the expected complete-data log-likelihood; at the E-step point it equals the score."""
        a, d, g, var, eta, log_p, sig = cache
        p = np.exp(log_p)
        ratio = sig / p
        s_eta = (r - nn * p) * ratio  # items x Q, d/d eta
        if self.model == "rasch":
            gd = s_eta.sum(1)
            lw = self.log_prior(var)
            wq = np.exp(lw)
            # d/d log var of sum_q nq log w_q, w_q proportional to exp(-t^2 / 2 var)
            dlw = 0.5 * self.nodes**2 / var - np.sum(wq * 0.5 * self.nodes**2 / var)
            return np.concatenate([gd, [np.sum(nq * dlw)]])
        ga = (s_eta * self.nodes[None, :]).sum(1)
        gd = s_eta.sum(1)
        if self.model == "2pl":
            return np.concatenate([ga, gd])
        # d loglik / d g = sum (r/p - (nn - r)/(1-p)) * (1 - sig); chain rule to logit g
        q = 1.0 - p
        dg = np.sum((r / p - (nn - r) / q) * (1.0 - sig), axis=1)
        return np.concatenate([ga, gd, dg * g * (1 - g)])

    def negll_and_grad(self, x):
        ll, _, r, nn, nq, cache = self.estep(x)
        return -ll, -self.complete_grad(x, r, nn, nq, cache)


def _mstep(model: _MarginalModel, x, r, nn, nq):
    """M-step: maximise the expected complete-data log-likelihood (items independent) by a few BFGS steps."""
    if model.model == "rasch":
        n = model.n_items
        # latent variance: the continuous-normal closed form (mean fixed at 0), evaluated on the grid; the BFGS
        # polish then maximises the exact discretised likelihood
        var = float(np.sum(nq * model.nodes**2) / np.sum(nq))
        x = x.copy()
        x[n] = np.log(max(var, 1e-6))

    def fun(z):
        xx = x.copy()
        if model.model == "rasch":
            xx[: model.n_items] = z
        else:
            xx[:] = z
        a, d, g, var = model.unpack(xx)
        eta = a[:, None] * model.nodes[None, :] + d[:, None]
        log_p, log_q, sig = _log_p_terms(eta, g[:, None])
        val = np.sum(r * log_p + (nn - r) * log_q)
        grad = model.complete_grad(xx, r, nn, nq, (a, d, g, var, eta, log_p, sig))
        if model.model == "rasch":
            grad = grad[: model.n_items]
        return -val, -grad

    z0 = x[: model.n_items] if model.model == "rasch" else x
    sol = optimize.minimize(fun, z0, jac=True, method="L-BFGS-B", options={"maxiter": 50})
    out = x.copy()
    if model.model == "rasch":
        out[: model.n_items] = sol.x
    else:
        out[:] = sol.x
    return out


def _score_hessian(model: _MarginalModel, x, h):
    """Observed information: central differences of the exact score, symmetrised."""
    p = x.size
    hess = np.empty((p, p))
    for j in range(p):
        e = np.zeros(p)
        e[j] = h
        hess[:, j] = (model.negll_and_grad(x + e)[1] - model.negll_and_grad(x - e)[1]) / (2 * h)
    return 0.5 * (hess + hess.T)


def fit_mml(
    correct: np.ndarray | None,
    mask: np.ndarray | None = None,
    *,
    model: Literal["rasch", "2pl", "3pl"] = "rasch",
    weights: np.ndarray | None = None,
    successes: np.ndarray | None = None,
    trials: np.ndarray | None = None,
    chance: float | np.ndarray | None = None,
    config: MMLConfig = MMLConfig(),
    progress: Progress = no_progress,
    cancel: threading.Event | None = None,
) -> MMLResult:
    """Marginal ML (Bock-Aitkin EM + BFGS polish) for Rasch (latent variance free), 2PL or 3PL.

    ``correct`` is respondents x items 0/1 (NaN / ``mask=False`` missing); ``weights`` are pattern
    frequencies (one per row). ``chance`` fixes a lower asymptote for Rasch/2PL (ignored by 3PL, which
    estimates ``g``).
    """
    if model not in ("rasch", "2pl", "3pl"):
        raise EngineError(f"unknown IRT model {model!r}; use 'rasch', '2pl' or '3pl'")
    c, k = _as_counts(correct, mask, successes, trials)
    n_rows, n = c.shape
    wt = np.ones(n_rows) if weights is None else np.asarray(weights, dtype=float)
    if wt.shape != (n_rows,) or np.any(wt < 0) or not np.all(np.isfinite(wt)):
        raise EngineError("weights must be one non-negative frequency per response row")
    solved = c.T @ wt
    tried = k.T @ wt
    degenerate = (solved <= 0) | (solved >= tried)
    if np.any(degenerate):
        bad = np.flatnonzero(degenerate)[:5].tolist()
        raise EngineError(
            f"items {bad} are answered all correct, all wrong or never: their MML estimate is infinite; "
            "drop them or use the 1PL MAP fit (fit_1pl) whose prior keeps them finite"
        )
    g_fixed = _chance_vector(chance, n)
    mm = _MarginalModel(c, k, wt, model, g_fixed, config)
    p_item = np.clip(solved / tried, 1e-3, 1 - 1e-3)
    d0 = special.logit(p_item)
    if model == "rasch":
        x = np.concatenate([d0, [0.0]])
    elif model == "2pl":
        x = np.concatenate([np.ones(n), d0])
    else:
        x = np.concatenate([np.ones(n), d0, np.full(n, special.logit(0.2))])
    converged = False
    it = 0
    for it in range(1, config.max_em_iter + 1):
        check_cancel(cancel)
        ll, _, r, nn, nq, _ = mm.estep(x)
        x_new = _mstep(mm, x, r, nn, nq)
        change = np.max(np.abs(x_new - x))
        x = x_new
        progress(it, config.max_em_iter, f"EM cycle {it}: log-likelihood {ll:.6f}")
        if change < config.em_tol:
            converged = True
            break
    if config.polish:
        sol = optimize.minimize(
            mm.negll_and_grad, x, jac=True, method="BFGS", options={"gtol": config.gtol, "maxiter": 2000}
        )
        if np.all(np.isfinite(sol.x)) and sol.fun <= mm.negll_and_grad(x)[0] + 1e-9:
            x = sol.x
            converged = bool(sol.success) or converged
    ll, post, *_ = mm.estep(x)
    a, d, g, var = mm.unpack(x)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(d)) and np.isfinite(ll)):
        raise EngineError("the marginal ML fit diverged; the data may not identify this model (try 'rasch')")
    theta_eap = post @ mm.nodes
    cov = None
    if config.se:
        hess = _score_hessian(mm, x, config.se_step)
        try:
            cov = np.linalg.inv(hess)
        except np.linalg.LinAlgError:
            cov = np.full_like(hess, np.nan)
    se_table = _se_table(model, x, a, d, g, var, cov, config.ci_level, n)
    return MMLResult(
        a=np.asarray(a, dtype=float),
        d=np.asarray(d, dtype=float),
        b=-d / a,
        g=np.asarray(g, dtype=float),
        se=se_table,
        latent_var=var,
        loglik=ll,
        iterations=it,
        converged=converged,
        theta_eap=theta_eap,
        model=model,
    )


def marginal_loglik(
    correct: np.ndarray | None,
    mask: np.ndarray | None = None,
    *,
    a: np.ndarray,
    d: np.ndarray,
    g: np.ndarray | None = None,
    latent_var: float = 1.0,
    weights: np.ndarray | None = None,
    successes: np.ndarray | None = None,
    trials: np.ndarray | None = None,
    config: MMLConfig = MMLConfig(),
) -> float:
    """Marginal log-likelihood of given item parameters on the quadrature grid of ``config`` (for model
    comparison and checks): sum over rows of weight * log sum_q w_q prod_i P(y_i | theta_q)."""
    c, k = _as_counts(correct, mask, successes, trials)
    n = c.shape[1]
    wt = np.ones(c.shape[0]) if weights is None else np.asarray(weights, dtype=float)
    gg = _chance_vector(g, n)
    mm = _MarginalModel(c, k, wt, "2pl", gg, config)
    log_prior = -0.5 * mm.nodes**2 / latent_var
    log_prior -= special.logsumexp(log_prior)
    eta = np.asarray(a, float)[:, None] * mm.nodes[None, :] + np.asarray(d, float)[:, None]
    log_p, log_q, _ = _log_p_terms(eta, gg[:, None])
    joint = c @ log_p + (k - c) @ log_q + log_prior[None, :]
    return float(np.sum(wt * special.logsumexp(joint, axis=1)))


def _se_table(model, x, a, d, g, var, cov, ci_level, n) -> pd.DataFrame:
    """Parameter table with delta-method SEs (exact at the MLE for these smooth reparameterisations)."""
    z = special.ndtri(0.5 + ci_level / 2)
    p = x.size
    cov = np.full((p, p), np.nan) if cov is None else cov
    # jacobian of (a, d, g, var) w.r.t. x, per item block
    rows = []

    def add(param, item, value, var_):
        se = float(np.sqrt(var_)) if np.isfinite(var_) and var_ >= 0 else float("nan")
        rows.append((param, item, float(value), se, value - z * se, value + z * se))

    items = np.arange(n)
    if model == "rasch":
        ia, id_ = None, items
    else:
        ia, id_ = items, n + items
    for i in range(n):
        va = cov[ia[i], ia[i]] if ia is not None else np.nan
        vd = cov[id_[i], id_[i]]
        add("a", i, a[i], va if ia is not None else np.nan)
        add("d", i, d[i], vd)
        if model == "3pl":
            ig = 2 * n + i
            add("g", i, g[i], cov[ig, ig] * (g[i] * (1 - g[i])) ** 2)
        else:
            add("g", i, g[i], np.nan)
        # b = -d / a: gradient (d/a^2, -1/a)
        if ia is None:
            vb = vd
        else:
            jac = np.array([d[i] / a[i] ** 2, -1.0 / a[i]])
            sub = cov[np.ix_([ia[i], id_[i]], [ia[i], id_[i]])]
            vb = jac @ sub @ jac
        add("b", i, -d[i] / a[i], vb)
    if model == "rasch":
        add("latent_var", -1, var, cov[n, n] * var**2)
    else:
        add("latent_var", -1, var, np.nan)
    return pd.DataFrame(rows, columns=["param", "item", "value", "se", "ci_lo", "ci_hi"])
