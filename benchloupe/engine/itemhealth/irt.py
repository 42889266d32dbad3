"""A two-parameter logistic model whose slope may go negative, fitted by marginal maximum likelihood, and the
Orlando-Thissen S-X2 item-fit statistic on it.

Why a fit of its own: the static calibration's sharpness is exp(k), positive by construction (DualEval), so an
item that strong models get wrong more often than weak ones receives an ordinary sharpness. Here
P_j(theta) = c_j + (1 - c_j) * sigmoid(a_j * theta + d_j), theta ~ N(0, 1), a_j unrestricted, the guessing
level c_j fixed at the item's stated chance. Bock & Aitkin (1981) EM on a 41-point quadrature, accelerated by
SQUAREM (Varadhan & Roland 2008); the M-step is one Fisher-scoring step per item, vectorised across items, with weak normal priors (a ~ N(0, 3^2),
d ~ N(0, 6^2)) that keep items nobody or everybody solves finite. Missing cells are left out of the likelihood.
The slope's interval uses the cross-product (XPD) information of each item's own parameters (mirt's
"crossprod" standard errors), from the per-model scores of the marginal likelihood.

S-X2 (Orlando & Thissen 2000): for summed score k, the observed proportion right on item j among the models
with summed score k against the model's E_jk = sum_q w_q P_j(q) f_-j(k-1 | q) / sum_q w_q f(k | q), with f the
summed-score distribution by the Lord-Wingersky (1984) recursion (f_-j: without item j). Exact for up to
``exact_max`` items (the recursion run once per item, vectorised over all items at once); beyond it the rest
score given theta is taken as normal with its exact mean and variance, over score groups. Adjacent score levels
are pooled to at least ``min_group`` models; a group counts for an item when its expected right and wrong
counts are both at least 1 (mirt's mincell); df = groups - 2. Only models that answered every item enter
(summed scores need complete rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special, stats

XPD_ROWS = 1024  # models per block of the standard errors' per-model scores


def quadrature(n: int = 41, lim: float = 6.0) -> tuple[np.ndarray, np.ndarray]:
    nodes = np.linspace(-lim, lim, n)
    w = np.exp(-0.5 * nodes**2)
    return nodes, w / w.sum()


@dataclass
class Fit2PL:
    """Slopes ``a`` (sign-free), intercepts ``d``, guessing ``c``; ``a_se`` (XPD); ``theta``/``theta_sd`` the
    models' EAP abilities and posterior SDs; ``iterations``, ``converged``, ``loglik``."""

    a: np.ndarray
    d: np.ndarray
    c: np.ndarray
    a_se: np.ndarray
    theta: np.ndarray
    theta_sd: np.ndarray
    iterations: int
    converged: bool
    loglik: float


def _prob(a, d, c, nodes):
    s = special.expit(np.outer(nodes, a) + d)  # Q x N
    return c + (1 - c) * s, s


def fit_2pl(y: np.ndarray, chance: np.ndarray, *, max_iter: int = 300, tol: float = 1e-3,
            prior_a_sd: float = 3.0, prior_d_sd: float = 6.0, a0: np.ndarray | None = None) -> Fit2PL:
    """Marginal ML (MAP with weak priors) 2PL with free-sign slopes; *y* models x items, 0/1 with NaN missing.
    *a0*: starting slopes (e.g. from the item-rest point-biserials; EM from near the answer takes fewer steps)."""
    nodes, w = quadrature()
    obs = ~np.isnan(y)
    complete = bool(obs.all())
    y0 = np.where(obs, y, 0.0)
    y32, obs32 = y0.astype(np.float32), obs.astype(np.float32)  # the E-step's products in float32 (half the time)
    c = np.clip(np.nan_to_num(np.asarray(chance, float), nan=0.0), 0.0, 0.95)
    n_obs = np.maximum(obs.sum(0), 1)
    pbar = np.clip(y0.sum(0) / n_obs, 0.02, 0.98)
    adj = np.clip((pbar - c) / (1 - c), 0.02, 0.98)
    a = np.ones(y.shape[1]) if a0 is None else np.clip(np.nan_to_num(np.asarray(a0, float), nan=1.0), -3, 3)
    d = special.logit(adj)
    logw = np.log(w)

    def em(a: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float, float]:
        """One EM step from (a, d): the new (a, d), the largest parameter change, the log posterior (marginal
        log-likelihood plus the priors) and the marginal log-likelihood at (a, d)."""
        P, s = _prob(a, d, c, nodes)
        P = np.clip(P, 1e-10, 1 - 1e-10)
        lq, l1 = np.log(P), np.log1p(-P)
        # y log P + (obs - y) log(1 - P): one product, and a second only when cells are missing
        base = (l1.sum(1)[None, :] if complete else (obs32 @ l1.T.astype(np.float32)).astype(float))
        ll = (y32 @ (lq - l1).T.astype(np.float32)).astype(float) + base + logw  # M x Q
        mx = ll.max(1, keepdims=True)
        post = np.exp(ll - mx)
        tot = post.sum(1, keepdims=True)
        post /= tot
        marginal = float((np.log(tot) + mx).sum())
        value = marginal - float((a * a).sum() / (2 * prior_a_sd**2) + (d * d).sum() / (2 * prior_d_sd**2))
        post32 = post.T.astype(np.float32)
        r1 = (post32 @ y32).astype(float)  # Q x N expected right at each node
        nq = np.broadcast_to(post.sum(0)[:, None], r1.shape) if complete else (post32 @ obs32).astype(float)
        dp = (1 - c) * s * (1 - s)
        g = (r1 - nq * P) * dp / (P * (1 - P))  # d loglik / d eta at each node
        info = nq * dp * dp / (P * (1 - P))
        ga = (g * nodes[:, None]).sum(0) - a / prior_a_sd**2
        gd = g.sum(0) - d / prior_d_sd**2
        iaa = (info * nodes[:, None] ** 2).sum(0) + 1 / prior_a_sd**2
        iad = (info * nodes[:, None]).sum(0)
        idd = info.sum(0) + 1 / prior_d_sd**2
        det = iaa * idd - iad * iad
        step_a = np.clip((idd * ga - iad * gd) / det, -1, 1)
        step_d = np.clip((iaa * gd - iad * ga) / det, -2, 2)
        change = max(np.abs(step_a).max(initial=0), np.abs(step_d).max(initial=0))
        return a + step_a, d + step_d, change, value, marginal

    # SQUAREM (Varadhan & Roland 2008, scheme S3) around the EM map: two EM steps, an extrapolation along them,
    # one EM step from there; back to the plain second step when the extrapolation lowers the log posterior.
    # The stopping rule is the plain EM step's, so the estimate is as converged as EM's; ``iterations`` counts
    # EM steps (each is two models x items x nodes products).
    converged, iterations, loglik = False, 0, -np.inf
    while iterations < max_iter:
        a1, d1, change, _, loglik = em(a, d)
        iterations += 1
        if change < tol:
            a, d, converged = a1, d1, True
            break
        a2, d2, _, v1, _ = em(a1, d1)
        iterations += 1
        ra, rd = a1 - a, d1 - d
        va, vd = a2 - a1 - ra, d2 - d1 - rd
        vn = float(np.sqrt((va * va).sum() + (vd * vd).sum()))
        alpha = min(-float(np.sqrt((ra * ra).sum() + (rd * rd).sum())) / vn, -1.0) if vn > 0 else -1.0
        at, dt = a - 2 * alpha * ra + alpha**2 * va, d - 2 * alpha * rd + alpha**2 * vd
        if alpha < -1.0 and np.isfinite(at).all() and np.isfinite(dt).all():
            a3, d3, _, vt, _ = em(np.clip(at, -30, 30), np.clip(dt, -60, 60))
            iterations += 1
            if vt >= v1:
                a, d = a3, d3
                continue
        a, d = a2, d2
    # EAP abilities and XPD standard errors at the estimate
    P, s = _prob(a, d, c, nodes)
    P = np.clip(P, 1e-10, 1 - 1e-10)
    lq, l1 = np.log(P), np.log1p(-P)
    base = (l1.sum(1)[None, :] if complete else (obs32 @ l1.T.astype(np.float32)).astype(float))
    ll = (y32 @ (lq - l1).T.astype(np.float32)).astype(float) + base + logw
    post = np.exp(ll - ll.max(1, keepdims=True))
    post /= post.sum(1, keepdims=True)
    theta = post @ nodes
    theta_sd = np.sqrt(np.maximum(post @ nodes**2 - theta**2, 0))
    gq = (1 - c) * s * (1 - s) / (P * (1 - P))  # Q x N
    g32 = [m_.astype(np.float32) for m_ in (gq, P * gq, gq * nodes[:, None], P * gq * nodes[:, None])]
    xaa, xad, xdd = np.zeros(y.shape[1]), np.zeros(y.shape[1]), np.zeros(y.shape[1])
    for lo in range(0, len(y), XPD_ROWS):  # per-model scores in float32, a block of models at a time
        rows = slice(lo, lo + XPD_ROWS)
        pb, yb, ob = post[rows].astype(np.float32), y32[rows], obs32[rows]
        sd_ = ob * (yb * (pb @ g32[0]) - pb @ g32[1])  # per-model score for d
        sa_ = ob * (yb * (pb @ g32[2]) - pb @ g32[3])
        xaa += np.einsum("ij,ij->j", sa_, sa_, dtype=np.float64)
        xad += np.einsum("ij,ij->j", sa_, sd_, dtype=np.float64)
        xdd += np.einsum("ij,ij->j", sd_, sd_, dtype=np.float64)
    det = xaa * xdd - xad * xad
    with np.errstate(invalid="ignore", divide="ignore"):
        a_var = np.where(det > 0, xdd / det, np.nan)
    return Fit2PL(a, d, c, np.sqrt(a_var), theta, theta_sd, iterations, converged, loglik)


def _lw(P: np.ndarray) -> np.ndarray:
    """Lord-Wingersky: summed-score distribution per node, P (Q x N) -> (Q x N+1)."""
    q, n = P.shape
    f = np.zeros((q, n + 1))
    f[:, 0] = 1.0
    for i in range(n):
        f[:, 1:i + 2] = f[:, 1:i + 2] * (1 - P[:, i:i + 1]) + f[:, 0:i + 1] * P[:, i:i + 1]
        f[:, 0] *= 1 - P[:, i]
    return f


def _lw_without_each(P: np.ndarray) -> np.ndarray:
    """f_-j for every item j at once: (N, Q, N) with score 0..N-1, item i added to every j != i per step."""
    q, n = P.shape
    f = np.zeros((n, q, n))
    f[:, :, 0] = 1.0
    eye = np.eye(n, dtype=bool)
    for i in range(n):
        pi = P[:, i][None, :, None]
        new = f * (1 - pi)
        new[:, :, 1:] += f[:, :, :-1] * pi
        f = np.where(eye[:, i][:, None, None], f, new)
    return f


@dataclass
class SX2:
    """Per item: ``stat``, ``df``, ``p``; per item and score group: ``observed``/``expected`` proportions right
    and ``counts`` (models per group), ``groups`` the summed-score ranges (lo, hi); ``n_models`` used."""

    stat: np.ndarray
    df: np.ndarray
    p: np.ndarray
    observed: np.ndarray
    expected: np.ndarray
    counts: np.ndarray
    groups: list
    n_models: int


def s_x2(y: np.ndarray, fit: Fit2PL, *, min_group: int = 10, max_groups: int = 12, exact_max: int = 200) -> SX2:
    """Orlando-Thissen S-X2 for every item (see the module docstring)."""
    n_items = y.shape[1]
    complete = ~np.isnan(y).any(1)
    yc = y[complete]
    m = len(yc)
    nan = np.full(n_items, np.nan)
    if m < 2 * min_group or n_items < 3:
        return SX2(nan, nan, nan, np.zeros((n_items, 0)), np.zeros((n_items, 0)), np.zeros(0), [], m)
    score = yc.sum(1).astype(int)
    inner = (score > 0) & (score < n_items)  # all-wrong and all-right models carry no information
    yc, score = yc[inner], score[inner]
    # pool adjacent score levels into groups of at least min_group models, at most max_groups groups
    levels = np.bincount(score, minlength=n_items + 1)
    target = max(min_group, int(np.ceil(len(score) / max_groups)))
    groups, lo, acc = [], None, 0
    for k in range(1, n_items):
        if levels[k] == 0 and lo is None:
            continue
        lo = k if lo is None else lo
        acc += levels[k]
        if acc >= target:
            groups.append((lo, k))
            lo, acc = None, 0
    if lo is not None:
        if groups:
            groups[-1] = (groups[-1][0], n_items - 1)
        else:
            groups.append((lo, n_items - 1))
    nodes, w = quadrature()
    P, _ = _prob(fit.a, fit.d, fit.c, nodes)
    G = len(groups)
    expected = np.zeros((n_items, G))
    if n_items <= exact_max:
        f = _lw(P)  # Q x N+1
        fm = _lw_without_each(P)  # N x Q x N
        for g, (lo, hi) in enumerate(groups):
            num = np.einsum("q,qj,jq->j", w, P, fm[:, :, lo - 1:hi].sum(2))
            den = w @ f[:, lo:hi + 1].sum(1)
            expected[:, g] = num / den
    else:  # rest score given theta taken as normal with its exact mean and variance
        mu, var = P.sum(1), (P * (1 - P)).sum(1)
        for g, (lo, hi) in enumerate(groups):
            sd_t = np.sqrt(np.maximum(var, 1e-9))
            den = w @ (special.ndtr((hi + .5 - mu) / sd_t) - special.ndtr((lo - .5 - mu) / sd_t))
            rm, rv = mu[:, None] - P, np.maximum(var[:, None] - P * (1 - P), 1e-9)
            prob = special.ndtr((hi - 1 + .5 - rm) / np.sqrt(rv)) - special.ndtr((lo - 1 - .5 - rm) / np.sqrt(rv))
            expected[:, g] = (w[:, None] * P * prob).sum(0) / den
    member = np.zeros((len(score), G))
    for g, (lo, hi) in enumerate(groups):
        member[:, g] = (score >= lo) & (score <= hi)
    counts = member.sum(0)
    observed = (yc.T @ member) / np.maximum(counts, 1)  # N x G
    e = np.clip(expected, 1e-9, 1 - 1e-9)
    use = (counts * e >= 1) & (counts * (1 - e) >= 1)
    stat = (use * counts * (observed - e) ** 2 / (e * (1 - e))).sum(1)
    df = use.sum(1) - 2
    with np.errstate(invalid="ignore"):
        p = np.where(df > 0, stats.chi2.sf(stat, np.maximum(df, 1)), np.nan)
    return SX2(np.where(df > 0, stat, np.nan), df.astype(float), p, observed, expected, counts, groups, int(m))


def eap(y: np.ndarray, fit: Fit2PL, cols: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """EAP abilities and posterior SDs from the items *cols* only (all when None), at the fitted parameters."""
    cols = np.arange(y.shape[1]) if cols is None else np.asarray(cols)
    nodes, w = quadrature()
    yy = y[:, cols]
    obs = ~np.isnan(yy)
    y0 = np.where(obs, yy, 0.0)
    P, _ = _prob(fit.a[cols], fit.d[cols], fit.c[cols], nodes)
    P = np.clip(P, 1e-10, 1 - 1e-10)
    ll = y0 @ np.log(P).T + (obs - y0) @ np.log1p(-P).T + np.log(w)
    post = np.exp(ll - ll.max(1, keepdims=True))
    post /= post.sum(1, keepdims=True)
    th = post @ nodes
    return th, np.sqrt(np.maximum(post @ nodes**2 - th**2, 0))


def widen(fit: Fit2PL, cols: np.ndarray, n: int) -> Fit2PL:
    """A fit on the items *cols* as a fit on all *n* items (NaN parameters elsewhere)."""
    def put(v):
        out = np.full(n, np.nan)
        out[cols] = v
        return out

    return Fit2PL(put(fit.a), put(fit.d), put(fit.c), put(fit.a_se), fit.theta, fit.theta_sd, fit.iterations,
                  fit.converged, fit.loglik)


def widen_sx2(sx: SX2, cols: np.ndarray, n: int) -> SX2:
    """S-X2 on the items *cols* as a result on all *n* items (NaN elsewhere)."""
    def put(v):
        out = np.full((n,) + v.shape[1:], np.nan)
        out[cols] = v
        return out

    return SX2(put(sx.stat), put(sx.df), put(sx.p), put(sx.observed), put(sx.expected), sx.counts, sx.groups,
               sx.n_models)
