"""Marginal maximum likelihood (Bock-Aitkin EM over mirt's quadrature grid, then BFGS on the exact score) for
Rasch, 2PL and 3PL; see the package docstring."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from scipy import optimize, special

from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress

from .inputs import _as_counts, _chance_vector, _log_p_terms

__all__ = ["MMLConfig", "MMLResult", "fit_mml", "marginal_loglik"]


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
