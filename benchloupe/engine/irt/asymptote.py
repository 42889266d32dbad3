"""Is the stated chance level right?  The empirical floor of a benchmark and a shared lower asymptote estimated
from its data (issue 23).

A benchmark whose items are imported as multiple choice gets ``chance = 1 / choices``, and every guessing-aware
analysis (the DualEval fit's ``p = c + (1 - c) sigmoid``, the residuals, compression) trusts it.  Real data can
disagree: responses binarised from a continuous score (TruthfulQA's mc2), log-likelihood scoring of the options
(ARC's ``acc_norm``), or distractors that attract the weakest respondents put the floor far below 1 / choices.

* :func:`empirical_floor`: the success rate of the weakest ``model_share`` of respondents (by raw accuracy) on
  the hardest ``item_share`` of items (by p-value) — the issue's description of a floor (TruthfulQA: .005;
  metabench ARC: .07; a real four-way set: .20) — beside the mean stated chance of those items.  It is
  descriptive and biased low (selecting on the outcome twice), so the check warns only when the stated chance
  is far above it (:func:`check_chance`).
* :func:`estimate_lower_asymptote`: the maximum marginal-likelihood estimate of one lower asymptote ``c`` shared
  by all items, under ``P = c + (1 - c) sigmoid(a theta + d)`` with ``theta ~ N(0, 1)`` on a quadrature grid
  (the 3PL of :mod:`.mml` with its ``g`` tied across items): ``a`` and ``d`` per item and ``logit c`` by L-BFGS
  on the exact marginal score (Fisher identity), a 95 % profile-likelihood interval for ``c``.  ARC (4,280 x 100):
  c = .058 [.056, .060] in about 2 minutes at load 9 (it is an option, ``--chance estimate``).  Checked on
  simulated data with known c (tests/unit/test_chance_check.py: within .03 at c = 0, .25 and .5 on 2,000
  respondents x 100 items).  A joint-ML profile (abilities as free parameters, the DualEval objective) is
  biased: it put c at .10 for data simulated with .25, and .30 for .5, which is why this uses the marginal
  likelihood.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from benchloupe.engine.common import EngineError, check_cancel

from .inputs import _as_counts, _log_p_terms

__all__ = ["Floor", "empirical_floor", "check_chance", "AsymptoteEstimate", "estimate_lower_asymptote"]


@dataclass(frozen=True)
class Floor:
    """Success rate of the weakest respondents on the hardest items, and the items' mean stated chance."""

    floor: float
    stated: float
    n_models: int
    n_items: int
    cells: int

    @property
    def se(self) -> float:
        """Binomial standard error of ``floor`` over its cells (an optimistic one: cells are not independent)."""
        return float(np.sqrt(max(self.floor * (1 - self.floor), 1e-12) / max(self.cells, 1)))


def empirical_floor(successes, trials, *, chance=None, model_share: float = 0.10,
                    item_share: float = 0.20) -> Floor:
    """:class:`Floor` of a models x items matrix of ``successes`` of ``trials`` (0/1 data: the 0/1 values and
    the observed mask; a missing cell has 0 trials).  ``chance`` (scalar or per item; None = 0) gives
    ``stated``."""
    c, k = _as_counts(None, None, np.asarray(successes, float), np.asarray(trials, float))
    tried_m, tried_q = k.sum(1), k.sum(0)
    ok_m, ok_q = tried_m > 0, tried_q > 0
    acc_m = np.where(ok_m, c.sum(1) / np.maximum(tried_m, 1), np.inf)
    acc_q = np.where(ok_q, c.sum(0) / np.maximum(tried_q, 1), np.inf)
    n_m = max(1, int(round(model_share * ok_m.sum())))
    n_q = max(1, int(round(item_share * ok_q.sum())))
    weak = np.argsort(acc_m, kind="stable")[:n_m]
    hard = np.argsort(acc_q, kind="stable")[:n_q]
    sub_c, sub_k = c[np.ix_(weak, hard)], k[np.ix_(weak, hard)]
    cells = float(sub_k.sum())
    g = np.zeros(c.shape[1]) if chance is None else np.broadcast_to(np.asarray(chance, float), (c.shape[1],))
    return Floor(float(sub_c.sum() / cells) if cells else float("nan"), float(np.nanmean(g[hard])), n_m, n_q,
                 int(cells))


def check_chance(floor: Floor, *, ratio: float = 0.5, slack: float = 0.02) -> str | None:
    """A warning when the stated chance is implausible for the data: the empirical floor (plus two of its
    standard errors and ``slack``) below ``ratio`` times the stated chance; None when it is plausible or no
    chance is stated.  Real four-way data sit at .20 against .25 (no warning); a 0/1 score with no floor at .005
    (a warning)."""
    if not np.isfinite(floor.floor) or floor.stated <= 0:
        return None
    if floor.floor + 2 * floor.se + slack >= ratio * floor.stated:
        return None
    return (f"the stated chance level (mean {floor.stated:.3f} on the hardest {floor.n_items} items) is far above "
            f"the empirical floor {floor.floor:.3f} (the success rate of the weakest {floor.n_models} models on "
            f"them): guessing-aware results (residuals, compression, the protocol's ceiling) assume a floor the "
            f"data do not show; check the items' chance (binarised scores have none)")


@dataclass(frozen=True)
class AsymptoteEstimate:
    """Shared lower asymptote ``c`` (marginal ML), its 95 % profile-likelihood interval, the marginal
    log-likelihood at the optimum and at c = 0, and the items it used (items everyone or no one solved carry no
    information about c and are left out)."""

    c: float
    ci: tuple[float, float]
    loglik: float
    loglik_c0: float
    items_used: int
    converged: bool


class _SharedC:
    """Marginal log-likelihood of ``P = c + (1 - c) sigmoid(a theta + d)``, ``theta ~ N(0, 1)`` on a grid, and its
    exact score (Fisher identity) in ``z = [a (n), d (n), logit c]``.  The c-score is written as
    ``r (1 - s) / p - (n - r) / (1 - c)``, finite where ``sigmoid`` saturates (the 3PL score of :mod:`.mml`
    divides ``1 - s`` by ``1 - p`` there)."""

    def __init__(self, c: np.ndarray, k: np.ndarray, quadpts: int):
        self.c, self.k = c, k
        self.n = c.shape[1]
        self.nodes = np.linspace(-6.0, 6.0, quadpts)
        lw = -0.5 * self.nodes ** 2
        self.log_prior = lw - special.logsumexp(lw)

    def __call__(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        n = self.n
        a, d, g = z[:n], z[n:2 * n], float(special.expit(z[-1]))
        eta = a[:, None] * self.nodes[None, :] + d[:, None]
        log_p, log_q, sig = _log_p_terms(eta, g)
        joint = self.c @ log_p + (self.k - self.c) @ log_q + self.log_prior[None, :]
        norm = special.logsumexp(joint, axis=1)
        post = np.exp(joint - norm[:, None])
        r, nn = self.c.T @ post, self.k.T @ post  # items x Q expected successes and trials
        p = np.exp(log_p)
        s_eta = (r - nn * p) * (sig / p)
        ga, gd = (s_eta * self.nodes[None, :]).sum(1), s_eta.sum(1)
        gc = float(np.sum(r * (1.0 - sig) / p) - np.sum(nn - r) / (1.0 - g))
        return -float(norm.sum()), -np.concatenate([ga, gd, [gc * g * (1 - g)]])


def estimate_lower_asymptote(successes, trials, *, c_max: float = 0.9, quadpts: int = 41,
                             cancel: threading.Event | None = None) -> AsymptoteEstimate:
    """Marginal-ML estimate of one lower asymptote shared by every item (module docstring): L-BFGS over every
    item's (a, d) and logit c at once; the 95 % interval from the profile likelihood (c fixed, (a, d) refitted
    warm): from its curvature in logit c for an interior estimate, by bisection of the likelihood-ratio bound at
    the boundary.  ``successes`` of ``trials`` per cell as in :func:`empirical_floor`."""
    c, k = _as_counts(None, None, np.asarray(successes, float), np.asarray(trials, float))
    solved, tried = c.sum(0), k.sum(0)
    keep = (tried > 0) & (solved > 0) & (solved < tried)
    if keep.sum() < 2:
        raise EngineError("estimating a lower asymptote needs at least two items that some but not all models "
                          "solved")
    c, k = c[:, keep], k[:, keep]
    rows = k.sum(1) > 0
    model = _SharedC(c[rows], k[rows], quadpts)
    n = model.n
    lo_z, hi_z = special.logit(1e-6), special.logit(c_max)
    ad_bounds = [(1e-3, 30.0)] * n + [(-30.0, 30.0)] * n

    def fun(z):
        check_cancel(cancel)
        return model(z)

    p_item = np.clip(solved[keep] / tried[keep], 1e-3, 1 - 1e-3)
    z0 = np.concatenate([np.ones(n), special.logit(p_item), [special.logit(0.05)]])
    sol = optimize.minimize(fun, z0, jac=True, method="L-BFGS-B", bounds=ad_bounds + [(lo_z, hi_z)],
                            options={"maxiter": 5000, "maxfun": 10000})
    z = sol.x
    c_hat, nll = float(special.expit(z[-1])), float(sol.fun)

    def profile(cv: float) -> float:
        zc = float(special.logit(min(max(cv, 1e-6), c_max)))

        def f(ad):
            v, g = fun(np.concatenate([ad, [zc]]))
            return v, g[:2 * n]

        return float(optimize.minimize(f, z[:2 * n], jac=True, method="L-BFGS-B", bounds=ad_bounds,
                                       options={"maxiter": 2000}).fun)

    target = nll + 0.5 * 3.841  # 95 %: -2 (profile loglik - max) = chi2_1(.95)

    def crossing(outside: float, inside: float) -> float:
        if profile(outside) < target:  # the boundary itself lies inside the interval
            return outside
        for _ in range(8):
            mid = 0.5 * (outside + inside)
            if profile(mid) > target:
                outside = mid
            else:
                inside = mid
        return 0.5 * (outside + inside)

    f0 = profile(0.0)
    if f0 < nll:  # the boundary: no floor at all
        c_hat, nll, target = 0.0, f0, f0 + 0.5 * 3.841
    lo = hi = None
    if 1e-3 < c_hat < c_max - 1e-3:  # interior: the profile's curvature on the logit scale (3 fits, not ~18)
        zc, h = float(special.logit(c_hat)), 0.05
        curv = (profile(float(special.expit(zc + h))) + profile(float(special.expit(zc - h))) - 2 * nll) / h ** 2
        if curv > 0:
            half = 1.959964 / np.sqrt(curv)
            lo, hi = float(special.expit(zc - half)), float(special.expit(zc + half))
    if lo is None:  # at a boundary (no floor) or a flat profile: bisection on the profile likelihood
        lo = crossing(0.0, c_hat) if c_hat > 1e-4 else 0.0
        hi = crossing(c_max, c_hat)
    return AsymptoteEstimate(c_hat, (float(lo), float(hi)), -nll, -f0, int(n), bool(sol.success))
