"""Bradley-Terry on pairwise preferences (battles, AlpacaEval pairs), with bootstrap intervals.

Each comparison (a, b, p) says P(a beats b) = p: a win is 1, a loss 0, a tie 0.5 (half a win each way, as
Chatbot Arena's published ratings count ties), a judge's soft preference anything in [0, 1]. Comparisons are
first aggregated into wins ``W[i, j]`` (sum of p for i over j) and counts ``N[i, j]`` per ordered pair, so the
fit costs O(models^2) per iteration whatever the number of battles. The strengths are the fixed point of
Hunter's (2004) minorise-maximise update (found by Newton's method, see ``fit_matrix``)

    pi_i <- (W_i + alpha) / (sum_j N_ij / (pi_i + pi_j) + 2 alpha / (pi_i + 1)),

where ``alpha`` pseudo-comparisons (half won, half lost) against a reference of strength 1 keep a model that
won or lost everything finite and tie disconnected groups to a common scale (alpha = 0 is the plain MLE).
Scores are theta = log pi, centred to mean 0 (the logit scale: P(i beats j) = sigmoid(theta_i - theta_j));
``elo`` gives Chatbot Arena's scale 400 log10(pi) + 1000.

Bootstrap: battles are resampled with replacement (B replicates); identical battles (same ordered pair, same
outcome) are grouped so a replicate is one multinomial draw over the distinct kinds of battle, then refit.
Intervals are percentiles; se the bootstrap standard deviation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .common import EngineError


@dataclass(frozen=True)
class PairwiseData:
    """Comparisons as integer model codes ``a``, ``b`` (0..n-1) and ``p`` = P(a beats b) in [0, 1]."""

    a: np.ndarray
    b: np.ndarray
    p: np.ndarray
    n_models: int


@dataclass
class BTResult:
    theta: np.ndarray            # log-strength, mean 0
    iterations: int
    converged: bool
    n_comparisons: int
    se: np.ndarray | None = None
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None

    @property
    def elo(self) -> np.ndarray:
        return 400.0 * self.theta / np.log(10.0) + 1000.0


def check(data: PairwiseData) -> None:
    a, b, p = data.a, data.b, data.p
    if not (len(a) == len(b) == len(p)):
        raise EngineError("comparisons: a, b and p differ in length")
    if len(a) == 0:
        raise EngineError("no pairwise comparisons to fit")
    if data.n_models < 2:
        raise EngineError("Bradley-Terry needs at least two models")
    if (a == b).any():
        raise EngineError("a model is compared with itself")
    if not np.isfinite(p).all() or (p < 0).any() or (p > 1).any():
        raise EngineError("P(a beats b) must be in [0, 1]")


def aggregate(a: np.ndarray, b: np.ndarray, p: np.ndarray, n: int, weight: np.ndarray | None = None):
    """(W, N): W[i, j] = wins of i over j (ties half), N[i, j] = comparisons of i and j (symmetric)."""
    w = np.ones(len(a)) if weight is None else weight
    cells = n * n
    W = np.bincount(a * n + b, weights=w * p, minlength=cells) + np.bincount(b * n + a, weights=w * (1 - p),
                                                                             minlength=cells)
    C = np.bincount(a * n + b, weights=w, minlength=cells)
    C = C.reshape(n, n)
    return W.reshape(n, n), C + C.T


def _loglik(theta, W, N, alpha):
    d = theta[:, None] - theta[None, :]
    ll = (W * -np.logaddexp(0.0, -d)).sum()
    return ll + alpha * (-np.logaddexp(0.0, -theta) - np.logaddexp(0.0, theta)).sum()


def fit_matrix(W: np.ndarray, N: np.ndarray, *, alpha: float = 0.5, tol: float = 1e-9,
               max_iter: int = 100) -> tuple[np.ndarray, int, bool]:
    """theta (mean 0), iterations, converged, from the aggregated wins and counts.

    Newton's method on the log-likelihood (the MM fixed point above is its maximiser; Newton reaches it in a
    few steps where MM needs hundreds): gradient g_i = sum_j (W_ij - N_ij s_ij) + alpha (1 - 2 s_i), Hessian
    the weighted graph Laplacian of N_ij s_ij (1 - s_ij) plus 2 alpha s_i (1 - s_i) on the diagonal, with
    step halving. alpha = 0 pins the mean to 0 instead (the likelihood only sees differences).
    """
    n = W.shape[0]
    theta = np.zeros(n)
    ll = _loglik(theta, W, N, alpha)
    for it in range(1, max_iter + 1):
        s = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
        si = 1.0 / (1.0 + np.exp(-theta))
        g = (W - N * s).sum(axis=1) + alpha * (1.0 - 2.0 * si)
        w = N * s * (1.0 - s)
        H = np.diag(w.sum(axis=1) + 2.0 * alpha * si * (1.0 - si)) - w
        if alpha <= 0:
            H += 1.0 / n  # the direction of a common shift: fixed by centring
        try:
            step = np.linalg.solve(H, g)
        except np.linalg.LinAlgError:
            step = np.linalg.lstsq(H, g, rcond=None)[0]
        t = 1.0
        while True:
            cand = theta + t * step
            new_ll = _loglik(cand, W, N, alpha)
            if new_ll >= ll - 1e-12 * abs(ll) or t < 1e-8:
                break
            t /= 2
        theta, ll = cand, new_ll
        if np.max(np.abs(t * step)) < tol:
            return theta - theta.mean(), it, True
    return theta - theta.mean(), max_iter, False


def fit_bt(data: PairwiseData, *, alpha: float = 0.5, bootstrap: int = 0, seed: int = 0, tol: float = 1e-9,
           max_iter: int = 100, level: float = 0.95, progress=None) -> BTResult:
    """Bradley-Terry strengths of ``data``; with ``bootstrap`` > 0, percentile intervals over resampled battles."""
    check(data)
    if not (np.isfinite(alpha) and alpha >= 0):
        raise EngineError(f"the prior's alpha must be a finite number >= 0 (0 = plain MLE), got {alpha}")
    if int(bootstrap) != bootstrap or bootstrap < 0:
        raise EngineError(f"bootstrap replicates must be a whole number >= 0 (0 = no intervals), got {bootstrap}")
    n = data.n_models
    a, b = np.asarray(data.a, np.int64), np.asarray(data.b, np.int64)
    p = np.asarray(data.p, np.float64)
    W, N = aggregate(a, b, p, n)
    theta, it, ok = fit_matrix(W, N, alpha=alpha, tol=tol, max_iter=max_iter)
    res = BTResult(theta, it, ok, len(a))
    if bootstrap > 0:
        kinds, counts = np.unique(np.stack([a * n + b, np.round(p * 1e6).astype(np.int64)]), axis=1,
                                  return_counts=True)
        ka, kb, kp = kinds[0] // n, kinds[0] % n, kinds[1] / 1e6
        rng = np.random.default_rng(seed)
        draws = np.empty((bootstrap, n))
        for r in range(bootstrap):
            w = rng.multinomial(len(a), counts / counts.sum()).astype(np.float64)
            Wr, Nr = aggregate(ka, kb, kp, n, weight=w)
            draws[r], _, _ = fit_matrix(Wr, Nr, alpha=alpha, tol=tol * 10, max_iter=max_iter)
            if progress is not None:
                progress(r + 1, bootstrap, "bootstrap")
        q = (1 - level) / 2
        res.se = draws.std(axis=0, ddof=1) if bootstrap > 1 else np.zeros(n)
        res.lo, res.hi = np.quantile(draws, q, axis=0), np.quantile(draws, 1 - q, axis=0)
    return res


def preference_pairs(a: np.ndarray, b: np.ndarray, prompt: np.ndarray, p: np.ndarray, n_models: int,
                     n_prompts: int):
    """DualEval arena pairs straight from preferences (our extension of paper 000, docs/DUALEVAL.md).

    The paper distils pairs from rewards: the soft target is sigmoid(z_i - z_j). Where only judgments exist
    (battles, AlpacaEval pairs) the judgment *is* the soft target, p* = P(a beats b): a win 1, a loss 0, a tie
    0.5, a weighted judge's preference anything between. Every comparison is a decisive pair (the tie and
    both-bad flags of section 3 are thresholds on reward gaps, which do not exist here; a tie enters as the
    target 0.5). Pairs are stored with i < j (a pair given as (b, a) has its target flipped); ``z_gap`` is the
    logit of the target, clipped at 1e-6, so code that reads gaps sees the same preference.
    """
    from benchloupe.engine.joint.inputs import PairSet

    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    prompt, p = np.asarray(prompt, np.int64), np.asarray(p, np.float64)
    check(PairwiseData(a, b, p, n_models))
    if prompt.shape != a.shape or (prompt < 0).any() or (prompt >= n_prompts).any():
        raise EngineError("preference prompts must be codes 0..n_prompts-1, one per comparison")
    flip = a > b
    i, j = np.where(flip, b, a), np.where(flip, a, b)
    target = np.where(flip, 1.0 - p, p)
    q = np.clip(target, 1e-6, 1 - 1e-6)
    none = np.zeros(len(i), bool)
    return PairSet(i=i, j=j, prompt=prompt, z_gap=np.log(q / (1 - q)), target=target, tie=none, both_bad=none.copy(),
                   tie_delta=0.0, bb_threshold=float("nan"), z=np.full((n_models, n_prompts), np.nan))
