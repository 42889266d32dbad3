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
  c = .058 [.056, .060] in 2 s of CPU (bench/bench_chance.py; 28 s of wall time under load before issue 36's
  merged response patterns, fewer BLAS products and warm-started profile fits; ``--chance estimate``).  Checked on
  simulated data with known c (tests/unit/test_chance_check.py: within .03 at c = 0, .25 and .5 on 2,000
  respondents x 100 items).  A joint-ML profile (abilities as free parameters, the DualEval objective) is
  biased: it put c at .10 for data simulated with .25, and .30 for .5, which is why this uses the marginal
  likelihood.
* :func:`chance_lr_test` (issue 32): a likelihood-ratio test of the stated levels against that estimate (one
  degree of freedom; on a seeded subset of at most 400 x 100 cells, about a second), which every run with
  ``--chance stated`` reports and warns on (rejected at p < .001 with the estimate at least .03 away).  Measured
  by ``bench/bench_chance_test.py`` (docs/DUALEVAL.md, "The chance test").
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize, special, stats

from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress

from .inputs import _as_counts, _log_p_terms

__all__ = ["Floor", "empirical_floor", "check_chance", "AsymptoteEstimate", "estimate_lower_asymptote", "ChanceTest",
           "chance_lr_test"]


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
    c, k = _counts(successes, trials)
    tried_m, tried_q = k.sum(1, dtype=float), k.sum(0, dtype=float)
    ok_m, ok_q = tried_m > 0, tried_q > 0
    acc_m = np.where(ok_m, c.sum(1, dtype=float) / np.maximum(tried_m, 1), np.inf)
    acc_q = np.where(ok_q, c.sum(0, dtype=float) / np.maximum(tried_q, 1), np.inf)
    n_m = max(1, int(round(model_share * ok_m.sum())))
    n_q = max(1, int(round(item_share * ok_q.sum())))
    weak = np.argsort(acc_m, kind="stable")[:n_m]
    hard = np.argsort(acc_q, kind="stable")[:n_q]
    sub_c, sub_k = c[np.ix_(weak, hard)], k[np.ix_(weak, hard)]
    cells = float(sub_k.sum(dtype=float))
    g = np.zeros(c.shape[1]) if chance is None else np.broadcast_to(np.asarray(chance, float), (c.shape[1],))
    return Floor(float(sub_c.sum(dtype=float) / cells) if cells else float("nan"), float(np.nanmean(g[hard])), n_m,
                 n_q, int(cells))


def _counts(successes, trials) -> tuple[np.ndarray, np.ndarray]:
    """(successes, trials) zero where a cell has no trial: integer cells as they are (every sum of them exact, so
    the floor is the same number), without the float64 copies of ``_as_counts`` (5,000 x 14,000: 9 s, 2.3 GB on
    every fit; issue 26); anything else through ``_as_counts``."""
    s, t = np.asarray(successes), np.asarray(trials)
    if s.ndim != 2 or s.shape != t.shape or s.dtype.kind not in "biu" or t.dtype.kind not in "biu":
        return _as_counts(None, None, np.asarray(successes, float), np.asarray(trials, float))
    if t.dtype == bool:
        t = t.view(np.int8)
    obs = t > 0
    every = bool(obs.all())
    c = s if every else np.where(obs, s, 0)
    k = t if every else np.where(obs, t, 0)
    if (c < 0).any() or (c > k).any():
        raise EngineError("successes must lie between 0 and trials (0/1 for correct); fix the response values")
    if not (every or obs.any()):
        raise EngineError("the response matrix has no observed cell; import results first")
    return c, k


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
            f"them): guessing-aware results (residuals, compression) assume a floor the "
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
    exact score (Fisher identity) in ``z = [a (n), d (n), logit g]``, with ``c = g w`` per item (``w``: one per
    item, ones for one shared asymptote; the stated levels over their mean for :func:`chance_lr_test`).  The
    c-score is written as ``r (1 - s) / p - (n - r) / (1 - c)``, finite where ``sigmoid`` saturates (the 3PL score
    of :mod:`.mml` divides ``1 - s`` by ``1 - p`` there).

    Issue 36 (ARC 4,280 x 100: 75 s -> a few): identical response rows are merged into one with a weight (3,456
    patterns of ARC's 4,280 rows), the likelihood is ``c @ (log p - log q) + k @ log q`` (two products instead of
    three, one when every cell has one trial: ``k @ log q`` is then a row total), and the posterior normalised
    by hand (scipy's ``logsumexp`` was a third of an evaluation)."""

    def __init__(self, c: np.ndarray, k: np.ndarray, quadpts: int, w: np.ndarray | None = None):
        ck = np.ascontiguousarray(np.concatenate([c, k], axis=1))
        rows, inverse, counts = np.unique(ck, axis=0, return_inverse=True, return_counts=True)
        self.n = c.shape[1]
        self.c = np.ascontiguousarray(rows[:, :self.n])
        self.cT = np.ascontiguousarray(self.c.T)
        k = rows[:, self.n:]
        self.weight = counts.astype(float)
        # one trial a cell (0/1 data without missing cells): k @ log q and k.T @ post are sums
        self.ones = bool(np.all(k == 1.0))
        self.k = None if self.ones else np.ascontiguousarray(k)
        self.kT = None if self.ones else np.ascontiguousarray(k.T)
        self.w = np.ones(self.n) if w is None else np.asarray(w, float)
        self.nodes = np.linspace(-6.0, 6.0, quadpts)
        lw = -0.5 * self.nodes ** 2
        self.log_prior = lw - special.logsumexp(lw)

    def __call__(self, z: np.ndarray) -> tuple[float, np.ndarray]:
        n = self.n
        a, d, g = z[:n], z[n:2 * n], float(special.expit(z[-1]))
        ci = g * self.w
        eta = a[:, None] * self.nodes[None, :] + d[:, None]
        log_p, log_q, sig = _log_p_terms(eta, ci[:, None])
        joint = self.c @ (log_p - log_q)
        if self.ones:
            joint += log_q.sum(0) + self.log_prior
        else:
            joint += self.k @ log_q
            joint += self.log_prior
        top = joint.max(1)
        joint -= top[:, None]
        post = np.exp(joint, out=joint)
        total = post.sum(1)
        norm = top + np.log(total)
        post *= (self.weight / total)[:, None]  # each pattern's posterior, times its count
        r = self.cT @ post  # items x Q expected successes and trials
        nn = np.broadcast_to(post.sum(0), r.shape) if self.ones else self.kT @ post
        p = np.exp(log_p)
        s_eta = (r - nn * p) * (sig / p)
        ga, gd = (s_eta * self.nodes[None, :]).sum(1), s_eta.sum(1)
        gc = float(np.sum(self.w[:, None] * (r * (1.0 - sig) / p - (nn - r) / (1.0 - ci[:, None]))))
        return -float(self.weight @ norm), -np.concatenate([ga, gd, [gc * g * (1 - g)]])


def estimate_lower_asymptote(successes, trials, *, c_max: float = 0.9, quadpts: int = 41,
                             cancel: threading.Event | None = None,
                             progress: Progress = no_progress) -> AsymptoteEstimate:
    """Marginal-ML estimate of one lower asymptote shared by every item (module docstring): L-BFGS over every
    item's (a, d) and logit c at once; the 95 % interval from the profile likelihood (c fixed, (a, d) refitted
    warm): from its curvature in logit c for an interior estimate, by bisection of the likelihood-ratio bound at
    the boundary.  ``successes`` of ``trials`` per cell as in :func:`empirical_floor`."""
    c, k = _as_counts(None, None, np.asarray(successes, float), np.asarray(trials, float))
    keep = _informative(c, k)
    if keep.sum() < 2:
        raise EngineError("estimating a lower asymptote needs at least two items that some but not all models "
                          "solved")
    return _estimate(c[:, keep], k[:, keep], c_max=c_max, quadpts=quadpts, cancel=cancel, progress=progress)[0]


def _informative(c: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Items some but not all of whose trials succeeded (the others carry no information about c)."""
    solved, tried = c.sum(0), k.sum(0)
    return (tried > 0) & (solved > 0) & (solved < tried)


def _estimate(c: np.ndarray, k: np.ndarray, *, w: np.ndarray | None = None, at: float | None = None,
              interval: bool = True, c_max: float = 0.9, quadpts: int = 41, start: float = 0.05,
              cancel: threading.Event | None = None, progress: Progress = no_progress):
    """The estimate of :func:`estimate_lower_asymptote` on informative items (``c = g w`` per item, ``g`` the
    estimate), the minimised negative log-likelihood with ``g`` fixed at ``at`` (NaN when ``at`` is None), and the
    profile (``g`` -> that minimum).  ``interval`` False skips the interval and the c = 0 fit (NaN there).

    Every profile fit starts from the (a, d) of the nearest fit already made, or from the line through the two
    nearest when they are about as close to each other as to it (issue 36: the interval's second fit took 56
    evaluations of ARC from the optimum's (a, d), 12 from that line)."""
    rows = k.sum(1) > 0
    model = _SharedC(c[rows], k[rows], quadpts, w)
    n = model.n
    c_max = min(c_max, 0.99 / float(np.max(model.w)))
    lo_z, hi_z = special.logit(1e-6), special.logit(c_max)
    ad_bounds = [(1e-3, 30.0)] * n + [(-30.0, 30.0)] * n
    lo_ad, hi_ad = np.array(ad_bounds).T
    report = _Report(progress, interval or at is not None)

    def fun(z):
        check_cancel(cancel)
        return model(z)

    solved, tried = c.sum(0), k.sum(0)
    p_item = np.clip(solved / tried, 1e-3, 1 - 1e-3)
    z0 = np.concatenate([np.ones(n), special.logit(p_item), [special.logit(start)]])
    sol = optimize.minimize(fun, z0, jac=True, method="L-BFGS-B", bounds=ad_bounds + [(lo_z, hi_z)],
                            options={"maxiter": 5000, "maxfun": 10000},
                            callback=lambda zk: report.main(float(special.expit(zk[-1]))))
    z = sol.x
    c_hat, nll = float(special.expit(z[-1])), float(sol.fun)
    fitted, values = {c_hat: z[:2 * n]}, {c_hat: nll}  # g -> the (a, d) of its fit, and its minimum

    def warm(cv: float) -> np.ndarray:
        near = sorted(fitted, key=lambda g: abs(g - cv))[:2]
        if len(near) < 2 or abs(cv - near[0]) > 1.5 * abs(near[0] - near[1]):
            return fitted[near[0]]
        (g1, x1), (g2, x2) = (near[0], fitted[near[0]]), (near[1], fitted[near[1]])
        return np.clip(x1 + (cv - g1) * (x1 - x2) / (g1 - g2), lo_ad, hi_ad)

    def profile(cv: float) -> float:
        cv = min(max(cv, 1e-6), c_max)
        if cv in values:
            return values[cv]
        zc = float(special.logit(cv))
        report.profile(cv)

        def f(ad):
            v, g = fun(np.concatenate([ad, [zc]]))
            return v, g[:2 * n]

        out = optimize.minimize(f, warm(cv), jac=True, method="L-BFGS-B", bounds=ad_bounds,
                                options={"maxiter": 2000})
        fitted[cv], values[cv] = out.x, float(out.fun)
        return values[cv]

    if not interval:
        return AsymptoteEstimate(c_hat, (float("nan"), float("nan")), -nll, float("nan"), int(n),
                                 bool(sol.success)), (float("nan") if at is None else max(profile(at), nll)), profile
    first = _interval(profile, c_hat, nll, c_max) if _interior(c_hat, c_max) else None
    f0 = profile(0.0)
    if f0 < nll:  # the boundary: no floor at all
        c_hat, nll, first = 0.0, f0, None
    lo, hi = first if first is not None else _interval(profile, c_hat, nll, c_max)
    nll_at = float("nan") if at is None else max(profile(at), nll)
    return AsymptoteEstimate(c_hat, (lo, hi), -nll, -f0, int(n), bool(sol.success)), nll_at, profile


class _Report:
    """Progress of one estimate: the main fit's iterations fill 60 % (approaching it: the count is not known
    ahead), each profile fit after it a share of the rest (the interior interval and c = 0: three)."""

    def __init__(self, progress: Progress, profiles: bool):
        self.progress, self.profiles = progress, profiles
        self.iterations, self.fits = 0, 0

    def main(self, c: float) -> None:
        self.iterations += 1
        done = (0.6 if self.profiles else 1.0) * (1.0 - np.exp(-self.iterations / 80.0))
        self.progress(done, 1.0, f"estimating a shared lower asymptote: iteration {self.iterations}, c = {c:.4f}")

    def profile(self, c: float) -> None:
        self.fits += 1
        done = 0.6 + 0.4 * (1.0 - 0.5 ** self.fits)  # 3 fits for an interior estimate: 95 %
        self.progress(done, 1.0, f"profile likelihood of the shared lower asymptote: fit {self.fits} at c = {c:.4f}")


def _interior(c_hat: float, c_max: float) -> bool:
    return 1e-3 < c_hat < c_max - 1e-3


def _interval(profile, c_hat: float, nll: float, c_max: float) -> tuple[float, float]:
    """95 % profile-likelihood interval of c: from the profile's curvature on the logit scale for an interior
    estimate (2 fits), by a root search of the likelihood-ratio bound at a boundary or on a flat profile."""
    target = nll + 0.5 * 3.841  # 95 %: -2 (profile loglik - max) = chi2_1(.95)

    def crossing(outside: float, inside: float) -> float:
        # out from the estimate in steps of .005, .02, .08, ... (each fit starting from the last one's) until the
        # bound is passed, then Brent's method in that bracket to .001 or 1/256 of it (issue 36: a bisection
        # from c_max took nine fits, the one at c_max the slowest; it was within (c_max - c) / 512 of the bound)
        last, step = inside, 0.005 * np.sign(outside - inside)
        while True:
            x = inside + step
            if (outside - x) * np.sign(step) <= 0:
                if profile(outside) < target:  # the boundary itself lies inside the interval
                    return outside
                x = outside
                break
            if profile(x) > target:
                break
            last, step = x, step * 4
        lo, hi = sorted((last, x))
        return float(optimize.brentq(lambda v: profile(v) - target, lo, hi, xtol=min(1e-3, (hi - lo) / 256)))

    if _interior(c_hat, c_max):
        zc, h = float(special.logit(c_hat)), 0.05
        curv = (profile(float(special.expit(zc + h))) + profile(float(special.expit(zc - h))) - 2 * nll) / h ** 2
        if curv > 0:
            half = 1.959964 / np.sqrt(curv)
            return float(special.expit(zc - half)), float(special.expit(zc + half))
    lo = crossing(0.0, c_hat) if c_hat > 1e-4 else 0.0
    return float(lo), float(crossing(c_max, c_hat))


# the stated chance is rejected when the likelihood ratio is significant at this level AND the estimate lies at
# least MIN_CHANCE_GAP from it (huge benchmarks make any difference significant; .03 is a difference that moves
# the residuals of the weakest models' cells)
CHANCE_TEST_ALPHA = 0.001
MIN_CHANCE_GAP = 0.03


@dataclass(frozen=True)
class ChanceTest:
    """A likelihood-ratio test of the stated chance levels against one shared lower asymptote (issue 32): the
    stated mean level, the estimated one and its 95 % interval, the log-likelihood gain of the estimate over the
    stated value (on the cells tested), the test's p-value, and the cells it used."""

    stated: float
    estimate: float
    ci: tuple[float, float]
    gain: float
    p_value: float
    n_models: int
    n_items: int
    subsampled: bool

    @property
    def rejected(self) -> bool:
        return self.p_value < CHANCE_TEST_ALPHA and abs(self.estimate - self.stated) >= MIN_CHANCE_GAP


def chance_lr_test(successes, trials, stated, *, max_models: int = 400, max_items: int = 100,
                       seed: int = 0, quadpts: int = 31,
                       cancel: threading.Event | None = None) -> ChanceTest | None:
    """Do the data reject the stated chance levels?  On the items with a stated level (and some but not all
    trials solved), the marginal likelihood of ``P = c_i + (1 - c_i) sigmoid(a theta + d)`` with ``c_i`` the
    stated levels (null) against ``c_i = g stated_i / mean(stated)`` with ``g`` free (one shared asymptote when
    every item states the same level; nested at ``g`` = the stated mean): twice the gain is chi-squared with one
    degree of freedom.  Large benchmarks are tested on a seeded random ``max_models`` x ``max_items`` subset (the
    test keeps its size, the run its minutes: ~1-3 s here).  None when fewer than two items state a level."""
    sc, k = _as_counts(None, None, np.asarray(successes, float), np.asarray(trials, float))
    g = np.broadcast_to(np.asarray(stated, float), (sc.shape[1],))
    items = np.flatnonzero((g > 0) & _informative(sc, k))
    if len(items) < 2:
        return None
    rng = np.random.default_rng(seed)
    rows = np.flatnonzero(k[:, items].sum(1) > 0)
    sub = len(rows) > max_models or len(items) > max_items
    if len(rows) > max_models:
        rows = np.sort(rng.choice(rows, max_models, replace=False))
    if len(items) > max_items:
        items = np.sort(rng.choice(items, max_items, replace=False))
    c, kk = sc[np.ix_(rows, items)], k[np.ix_(rows, items)]
    keep = _informative(c, kk)
    if keep.sum() < 2:
        return None
    c, kk, gi = c[:, keep], kk[:, keep], g[items][keep]
    level = float(gi.mean())
    est, nll_at, profile = _estimate(c, kk, w=gi / level, at=level, interval=False, quadpts=quadpts, start=level,
                                     cancel=cancel)
    gain = max(0.0, est.loglik + nll_at)
    out = ChanceTest(level, est.c, (float("nan"), float("nan")), gain, float(stats.chi2.sf(2.0 * gain, 1)),
                     int(c.shape[0]), int(c.shape[1]), sub)
    if out.rejected:  # the interval for the warning (2 more fits, only when it warns)
        out = replace(out, ci=_interval(profile, est.c, -est.loglik, min(0.9, 0.99 * level / float(gi.max()))))
    return out
