"""The robustness analyses of paper 003: C.3 leave-one-out, C.5 model comparison, the C.3 prior variants, the
D.1 calibration experiment and the E.2 localised-improvement test.

- :func:`leave_one_out` (C.3, Table 7): refit the 1PL without each model (or each of ``folds`` model folds) and
  compare the difficulties with the full fit (Pearson, Spearman: the paper's mean and minimum), plus the
  stability of what the curator acts on: DDM, the max gap, and whether each of the top-k gaps of the full fit
  is still a top-k gap of the refit (the empty interval containing its raw midpoint). Refits are exact
  (warm-started Newton) when their total cost is small; otherwise one Newton step from the full mode (the
  removed models' scores against the b-block Schur complement of the remaining information): the error is
  second order in the removed share of the data; ``test_one_step_loo_matches_exact_refits`` bounds it.
- :func:`compare_models` (C.5, Table 8): BIC of the 1PL against the 2PL and 2- and 3-dimensional MIRT, each at
  its posterior mode under N(0, 1) priors (slopes N(1, 1) on the first dimension, N(0, 1) on the others),
  ``BIC = -2 log L + p log N`` with ``N`` the observed Bernoulli trials and ``p`` the abilities, difficulties
  and slopes (minus ``d (d - 1) / 2`` rotations). The paper fits these by NUTS; it reports BIC selecting the
  1PL for 21 of 25 benchmarks. ``one_pl_clearly_worse`` when ``BIC_1PL - min BIC > 10`` (Kass and Raftery's
  "very strong").
- :func:`prior_sensitivity` (C.3 "alternative prior structures"): the hierarchical priors the paper tried,
  ``theta ~ N(mu, sigma^2)``, ``mu ~ N(0, 1)``, ``sigma ~ HalfNormal(1)`` (or the same on ``b``), at the joint
  posterior mode (alternating the 1PL Newton fit and the closed-form conditional modes of ``mu`` and
  ``sigma``), with the effect on DDM, the max gap and the difficulties.
- :func:`calibration_experiment` (D.1, Table 11): rank agreement (Spearman, Kendall) of the source benchmark's
  model ranking with a leave-one-out reference ranking, for the full benchmark, 30 random prunings of size
  ``k`` (mean) and Algorithm 1's subset; :func:`calibration_curve` sweeps ``k`` with the W1 reduction.
- :func:`improvement_test` (E.2, Table 12): one-sided stratified randomisation test of a gain in mean accuracy
  between a pre- and a post-training model: within each item the rollout outcomes are reassigned between the
  two conditions. Only each item's number of post-condition successes changes the statistic, and under a
  random reassignment it is hypergeometric, so 100,000 permutations are 100,000 vectorised hypergeometric
  draws per item (exactly the permutation distribution).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import linalg, optimize, stats

from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.irt import OnePLConfig, OnePLResult, _chance_vector, fit_1pl

from .analysis import counts
from .calibration import quantile_match
from .core import _sorted_widths, as_target, gap_table, minmax_normalise

__all__ = [
    "LeaveOneOut",
    "ModelComparison",
    "PriorSensitivity",
    "calibration_curve",
    "calibration_experiment",
    "compare_models",
    "hierarchical_config",
    "improvement_test",
    "leave_one_out",
    "prior_sensitivity",
]


def _sig(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0, e) / (1.0 + e)


def _metrics_rows(b_rows: np.ndarray, k: int, locations: np.ndarray) -> dict[str, np.ndarray]:
    """DDM, max gap, top-k sum and per-location top-k persistence for each row of raw difficulties."""
    lo = b_rows.min(axis=1, keepdims=True)
    span = b_rows.max(axis=1, keepdims=True) - lo
    z = np.sort((b_rows - lo) / span, axis=1)
    n = z.shape[1]
    widths = _sorted_widths(z)
    top = np.sort(widths, axis=1)[:, ::-1]
    u = (np.arange(1, n + 1) - 0.5) / n
    kth = top[:, min(k, top.shape[1]) - 1]
    loc = (locations[None, :] - lo) / span
    kept = np.zeros((z.shape[0], locations.size), bool)
    at_max = np.zeros((z.shape[0], locations.size), bool)
    for r in range(z.shape[0]):
        pts = np.concatenate([[0.0], z[r], [1.0]])
        pos = np.clip(np.searchsorted(pts, loc[r], side="right"), 1, pts.size - 1)
        w = np.where((loc[r] >= 0) & (loc[r] <= 1), pts[pos] - pts[pos - 1], 0.0)
        kept[r] = w >= kth[r]
        at_max[r] = w >= top[r, 0]
    return {"ddm": np.mean(np.abs(z - u), axis=1), "max_gap": top[:, 0], "topk_sum": top[:, :k].sum(axis=1),
            "kept": kept, "at_max": at_max}


# ---------------------------------------------------------------------------------------------------------
# C.3 leave-one-out
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaveOneOut:
    """``table``: one row per refit (left_out, pearson, spearman, ddm, max_gap, topk_sum, max_gap_same_place);
    ``persistence``: for each top-k gap of the full fit, the fraction of refits where it is still top-k;
    ``summary``: the paper's mean / min correlations and the spreads; ``method``: exact or one-step."""

    table: pd.DataFrame
    persistence: np.ndarray
    summary: dict
    method: str


def tie_ranks(x: np.ndarray, tol: float = 1e-7) -> np.ndarray:
    """Average ranks with values closer than ``tol`` (after sorting) counted as ties."""
    order = np.argsort(x, kind="stable")
    level = np.concatenate([[0], np.cumsum(np.diff(x[order]) > tol)])
    out = np.empty(x.size)
    out[order] = stats.rankdata(level)
    return out


def _score_matrix(theta, b, c, t, g):
    eta = theta[:, None] - b[None, :]
    sig = _sig(eta)
    if np.all(g == 0):
        return c - t * sig
    p = g[None, :] + (1 - g[None, :]) * sig
    return (c - t * p) * sig / p


def leave_one_out(fit: OnePLResult, correct=None, mask=None, *, successes=None, trials=None, chance=None,
                  folds: int | None = None, k: int = 5, method: str = "auto", seed: int = 0,
                  config: OnePLConfig = OnePLConfig(), progress: Progress = no_progress,
                  cancel: threading.Event | None = None) -> LeaveOneOut:
    """C.3 leave-one-out over models (``folds=None``) or over ``folds`` random model folds."""
    c, t = counts(correct, mask, successes, trials)
    m, n = c.shape
    g = _chance_vector(chance, n) if chance is not None else fit.chance
    rng = np.random.default_rng(seed)
    if folds is None:
        groups = [np.array([j]) for j in range(m)]
    else:
        if not 2 <= folds <= m:
            raise EngineError(f"folds must be between 2 and the number of models ({m}); got {folds}")
        groups = np.array_split(rng.permutation(m), folds)
    if m - max(len(gr) for gr in groups) < 2:
        raise EngineError("leave-one-out needs at least three models")
    if method == "auto":
        method = "exact" if len(groups) * c.size <= 3e7 else "one-step"
    if method not in ("exact", "one-step"):
        raise EngineError(f"unknown leave-one-out method {method!r}; use auto, exact or one-step")
    b_rows = np.empty((len(groups), n))
    if method == "exact":
        for r, gr in enumerate(groups):
            check_cancel(cancel)
            keep = np.ones(m, bool)
            keep[gr] = False
            refit = fit_1pl(None, successes=c[keep], trials=t[keep], chance=g, config=config,
                            init=(fit.theta[keep], fit.b))
            b_rows[r] = refit.b
            progress(r + 1, len(groups), f"leave-one-out refit {r + 1} of {len(groups)}")
    else:
        lap = fit.laplace
        if lap is None:
            raise EngineError("the one-step leave-one-out needs a MAP fit")
        score = _score_matrix(fit.theta, fit.b, c, t, g)
        w = lap.dense_w()
        ws = w / np.sqrt(lap.h_theta)[:, None]
        s_full = np.diag(lap.h_b) - ws.T @ ws
        for r, gr in enumerate(groups):
            if r % 50 == 0:
                check_cancel(cancel)
            wr = w[gr]
            s_r = s_full - np.diag(wr.sum(axis=0)) + (wr / lap.h_theta[gr, None]).T @ wr
            rhs = score[gr].sum(axis=0)
            b_rows[r] = fit.b + linalg.solve(s_r, rhs, assume_a="pos")
            if r % 100 == 0 or r == len(groups) - 1:
                progress(r + 1, len(groups), f"leave-one-out one-step refit {r + 1} of {len(groups)}")
    z_full, _, _ = minmax_normalise(fit.b)
    gaps = gap_table(z_full).head(k)
    span = fit.b.max() - fit.b.min()
    locations = fit.b.min() + gaps["midpoint"].to_numpy() * span
    met = _metrics_rows(b_rows, k, locations)
    bc = b_rows - b_rows.mean(axis=1, keepdims=True)
    fc = fit.b - fit.b.mean()
    pearson = (bc @ fc) / np.sqrt((bc**2).sum(axis=1) * (fc @ fc))
    rf = tie_ranks(fit.b)  # lattice difficulties tie exactly; solver noise must not break the ties
    rr = np.stack([tie_ranks(row) for row in b_rows])
    rc = rr - rr.mean(axis=1, keepdims=True)
    rfc = rf - rf.mean()
    spearman = (rc @ rfc) / np.sqrt((rc**2).sum(axis=1) * (rfc @ rfc))
    full = _metrics_rows(fit.b[None, :], k, locations)
    table = pd.DataFrame({"left_out": [",".join(map(str, gr)) for gr in groups], "pearson": pearson,
                          "spearman": spearman, "ddm": met["ddm"], "max_gap": met["max_gap"],
                          "topk_sum": met["topk_sum"], "max_gap_same_place": met["at_max"][:, 0]})
    persistence = met["kept"].mean(axis=0)
    summary = {"method": method, "refits": len(groups), "pearson_mean": float(pearson.mean()),
               "pearson_min": float(pearson.min()), "spearman_mean": float(spearman.mean()),
               "spearman_min": float(spearman.min()), "ddm_full": float(full["ddm"][0]),
               "ddm_sd": float(met["ddm"].std()), "ddm_range": [float(met["ddm"].min()), float(met["ddm"].max())],
               "max_gap_full": float(full["max_gap"][0]), "max_gap_sd": float(met["max_gap"].std()),
               "max_gap_range": [float(met["max_gap"].min()), float(met["max_gap"].max())],
               "max_gap_same_place": float(met["at_max"][:, 0].mean()),
               "topk_gap_persistence": [float(x) for x in persistence]}
    return LeaveOneOut(table=table, persistence=persistence, summary=summary, method=method)


# ---------------------------------------------------------------------------------------------------------
# C.5 model comparison by BIC
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelComparison:
    """``table``: model, dims, params, loglik, bic, delta_bic (against the 1PL; positive favours the 1PL),
    converged; ``selected``; ``one_pl_clearly_worse``; ``summary`` for the run metrics."""

    table: pd.DataFrame
    selected: str
    one_pl_clearly_worse: bool
    summary: dict


def _loglik(c, t, g, eta):
    sig = _sig(eta)
    p = np.clip(g[None, :] + (1 - g[None, :]) * sig, 1e-300, 1 - 1e-16)
    return float(np.sum(c * np.log(p) + (t - c) * np.log1p(-p)))


def _fit_mirt(c, t, g, dims, theta0, b0, *, max_iter=500, seed=0):
    """Posterior mode of the d-dimensional 2PL (d = 1: the 2PL) by L-BFGS: ``eta = theta a^T - b``."""
    m, n = c.shape
    rng = np.random.default_rng(seed)
    th0 = np.column_stack([theta0] + [0.1 * rng.standard_normal(m) for _ in range(dims - 1)])
    a0 = np.column_stack([np.ones(n)] + [0.1 * rng.standard_normal(n) for _ in range(dims - 1)])
    a_mean = np.zeros(dims)
    a_mean[0] = 1.0
    free_g = np.any(g > 0)

    def unpack(x):
        th = x[: m * dims].reshape(m, dims)
        a = x[m * dims: m * dims + n * dims].reshape(n, dims)
        return th, a, x[m * dims + n * dims:]

    def fun(x):
        th, a, b = unpack(x)
        eta = th @ a.T - b[None, :]
        sig = _sig(eta)
        if free_g:
            p = np.clip(g[None, :] + (1 - g[None, :]) * sig, 1e-300, 1 - 1e-16)
            ll = np.sum(c * np.log(p) + (t - c) * np.log1p(-p))
            d_eta = (c - t * p) * (1 - g[None, :]) * sig * (1 - sig) / (p * (1 - p))
        else:
            e = np.exp(-np.abs(eta))
            ll = np.sum(c * eta - t * (np.log1p(e) + np.maximum(eta, 0)))
            d_eta = c - t * sig
        f = -ll + 0.5 * (np.sum(th**2) + np.sum((a - a_mean) ** 2) + np.sum(b**2))
        g_th = -(d_eta @ a) + th
        g_a = -(d_eta.T @ th) + (a - a_mean)
        g_b = d_eta.sum(axis=0) + b
        return f, np.concatenate([g_th.ravel(), g_a.ravel(), g_b])

    x0 = np.concatenate([th0.ravel(), a0.ravel(), b0])
    res = optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "gtol": 1e-6})
    th, a, b = unpack(res.x)
    return _loglik(c, t, g, th @ a.T - b[None, :]), bool(res.success)


def compare_models(correct=None, mask=None, *, successes=None, trials=None, chance=None,
                   models: tuple[str, ...] = ("1pl", "2pl", "mirt2", "mirt3"), max_iter: int = 500,
                   progress: Progress = no_progress, cancel: threading.Event | None = None) -> ModelComparison:
    """C.5: BIC of the 1PL against the 2PL and MIRT-2/3 at their posterior modes (module docstring)."""
    c, t = counts(correct, mask, successes, trials)
    m, n = c.shape
    g = _chance_vector(chance, n)
    big_n = float(t.sum())
    base = fit_1pl(None, successes=c, trials=t, chance=g)
    rows = []
    for i, name in enumerate(models):
        check_cancel(cancel)
        progress(i, len(models), f"C.5 model comparison: {name}")
        if name == "1pl":
            ll = _loglik(c, t, g, base.theta[:, None] - base.b[None, :])
            p, dims, ok = m + n, 1, base.converged
        else:
            dims = 1 if name == "2pl" else int(name.removeprefix("mirt"))
            if dims < 1 or name not in ("2pl", "mirt2", "mirt3"):
                raise EngineError(f"unknown model {name!r}; use 1pl, 2pl, mirt2 or mirt3")
            ll, ok = _fit_mirt(c, t, g, dims, base.theta, base.b, max_iter=max_iter)
            p = m * dims + n * dims + n - dims * (dims - 1) // 2
        rows.append((name, dims, p, ll, -2 * ll + p * np.log(big_n), ok))
    table = pd.DataFrame(rows, columns=["model", "dims", "params", "loglik", "bic", "converged"])
    bic_1pl = float(table.loc[table.model == "1pl", "bic"].iloc[0]) if "1pl" in models else np.nan
    table["delta_bic"] = table["bic"] - bic_1pl
    best = table.loc[table["bic"].idxmin()]
    worse = bool(np.isfinite(bic_1pl) and bic_1pl - float(best["bic"]) > 10.0)
    summary = {"selected": str(best["model"]), "n_obs": big_n, "one_pl_clearly_worse": worse,
               **{f"bic_{r.model}": float(r.bic) for r in table.itertuples()}}
    if worse:
        summary["warning"] = (f"C.5: BIC prefers {best['model']} over the 1PL by {bic_1pl - best['bic']:.0f}; "
                              "the coverage metrics rest on the 1PL difficulties")
    progress(len(models), len(models), "C.5 model comparison done")
    return ModelComparison(table=table, selected=str(best["model"]), one_pl_clearly_worse=worse, summary=summary)


# ---------------------------------------------------------------------------------------------------------
# C.3 prior variants
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PriorSensitivity:
    """``table``: one row per prior variant (prior, mu, sigma, ddm, max_gap, topk_sum, pearson, spearman,
    max_abs_dz against the N(0, 1) fit, iterations); ``fits``: the variant fits; ``summary``."""

    table: pd.DataFrame
    fits: dict
    summary: dict


def _hyper_mode(x: np.ndarray, mu: float, sigma: float) -> tuple[float, float]:
    """Conditional modes of mu ~ N(0, 1) and sigma ~ HalfNormal(1) given x ~ N(mu, sigma^2)."""
    mu = float(x.sum() / sigma**2 / (x.size / sigma**2 + 1.0))
    ss = float(np.sum((x - mu) ** 2))
    sigma = float(np.sqrt((-x.size + np.sqrt(x.size**2 + 4 * ss)) / 2))
    return mu, max(sigma, 1e-3)


def hierarchical_config(correct=None, mask=None, *, successes=None, trials=None, chance=None,
                        variant: str = "hierarchical_theta", start: OnePLResult | None = None, max_rounds: int = 100,
                        cancel: threading.Event | None = None) -> tuple[OnePLConfig, OnePLResult, int, bool]:
    """The 1PL prior of a C.3 hierarchical variant at its joint posterior mode: (config with the fitted mu and
    sigma, the fit under it, rounds, converged). Alternates the 1PL fit and the conditional modes of mu, sigma."""
    if variant not in ("hierarchical_theta", "hierarchical_b"):
        raise EngineError(f"unknown prior variant {variant!r}; use normal, hierarchical_theta or hierarchical_b")
    c, t = counts(correct, mask, successes, trials)
    g = _chance_vector(chance, c.shape[1])
    cur = start if start is not None else fit_1pl(None, successes=c, trials=t, chance=g)
    on_theta = variant == "hierarchical_theta"
    mu, sigma, rounds, converged = 0.0, 1.0, 0, False
    cfg = OnePLConfig()
    while rounds < max_rounds:
        rounds += 1
        check_cancel(cancel)
        mu_new, sigma_new = _hyper_mode(cur.theta if on_theta else cur.b, mu, sigma)
        converged = abs(mu_new - mu) < 1e-5 and abs(sigma_new - sigma) < 1e-5
        mu, sigma = mu_new, sigma_new
        cfg = (OnePLConfig(prior_mean_theta=mu, prior_sd_theta=sigma) if on_theta
               else OnePLConfig(prior_mean_b=mu, prior_sd_b=sigma))
        cur = fit_1pl(None, successes=c, trials=t, chance=g, config=cfg, init=(cur.theta, cur.b))
        if converged:
            break
    return cfg, cur, rounds, converged


def prior_sensitivity(fit: OnePLResult, correct=None, mask=None, *, successes=None, trials=None, chance=None,
                      variants: tuple[str, ...] = ("hierarchical_theta", "hierarchical_b"), k: int = 5,
                      max_rounds: int = 100, progress: Progress = no_progress,
                      cancel: threading.Event | None = None) -> PriorSensitivity:
    """Refit under the paper's hierarchical prior variants and compare with the N(0, 1) fit ``fit``."""
    c, t = counts(correct, mask, successes, trials)
    g = fit.chance if chance is None else _chance_vector(chance, c.shape[1])
    z0, _, _ = minmax_normalise(fit.b)
    rows, fits = [], {}

    def row(name, f, mu, sigma, rounds):
        z, _, _ = minmax_normalise(f.b)
        w = np.sort(_sorted_widths(np.sort(z)))[::-1]
        u = (np.arange(1, z.size + 1) - 0.5) / z.size
        return (name, mu, sigma, float(np.mean(np.abs(np.sort(z) - u))), float(w[0]), float(w[:k].sum()),
                float(np.corrcoef(f.b, fit.b)[0, 1]), float(stats.spearmanr(f.b, fit.b)[0]),
                float(np.max(np.abs(z - z0))), rounds, rounds <= max_rounds)

    rows.append(row("normal(0,1)", fit, 0.0, 1.0, 0))  # the paper's choice, the reference
    for v, name in enumerate(variants):
        if name not in ("hierarchical_theta", "hierarchical_b"):
            raise EngineError(f"unknown prior variant {name!r}; use hierarchical_theta or hierarchical_b")
        cfg, cur, rounds, converged = hierarchical_config(None, successes=c, trials=t, chance=g, variant=name,
                                                          start=fit, max_rounds=max_rounds, cancel=cancel)
        mu = cfg.prior_mean_theta if name == "hierarchical_theta" else cfg.prior_mean_b
        sigma = cfg.prior_sd_theta if name == "hierarchical_theta" else cfg.prior_sd_b
        if not converged:
            rounds = max_rounds + 1  # the alternation converges linearly; flagged in the table
        fits[name] = cur
        rows.append(row(name, cur, mu, sigma, rounds))
        progress(v + 1, len(variants), f"prior variant {name}")
    table = pd.DataFrame(rows, columns=["prior", "mu", "sigma", "ddm", "max_gap", "topk_sum", "pearson",
                                        "spearman", "max_abs_dz", "rounds", "converged"])
    base = table.iloc[0]
    summary = {r.prior: {"mu": r.mu, "sigma": r.sigma, "ddm": r.ddm, "max_gap": r.max_gap, "spearman": r.spearman,
                         "max_abs_dz": r.max_abs_dz, "converged": bool(r.converged)} for r in table.itertuples()}
    summary["ddm_shift_max"] = float((table.ddm - base.ddm).abs().max())
    summary["max_gap_shift_max"] = float((table.max_gap - base.max_gap).abs().max())
    return PriorSensitivity(table=table, fits=fits, summary=summary)


# ---------------------------------------------------------------------------------------------------------
# D.1 calibration experiment
# ---------------------------------------------------------------------------------------------------------


def _agreement(scores: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    return float(stats.spearmanr(scores, reference)[0]), float(stats.kendalltau(scores, reference)[0])


def _w1(z: np.ndarray, target) -> float:
    zs = np.sort(z)
    q = np.asarray(as_target(target).quantile((np.arange(1, zs.size + 1) - 0.5) / zs.size), float)
    return float(np.mean(np.abs(zs - q)))


def calibration_experiment(item_scores: np.ndarray, z: np.ndarray, reference: np.ndarray, *, k: int | None = None,
                           target=None, n_random: int = 30, seed: int = 0) -> pd.DataFrame:
    """D.1 (Table 11): agreement of the source benchmark's model ranking with the reference ranking.

    ``item_scores``: models x items mean scores on the source benchmark (NaN = missing); ``z``: the source's
    normalised difficulties; ``reference``: each model's mean score over the other benchmarks. Rows Full,
    Random (mean over ``n_random`` random subsets of size ``k``, with SDs), Cal. (Algorithm 1)."""
    s = np.asarray(item_scores, float)
    ref = np.asarray(reference, float)
    zz = np.asarray(z, float)
    if s.ndim != 2 or s.shape[1] != zz.size or s.shape[0] != ref.size:
        raise EngineError("item_scores must be models x items matching z (items) and reference (models)")
    if ref.size < 3:
        raise EngineError("the calibration experiment needs at least three shared models")
    plan = quantile_match(zz, target, k=k)
    rng = np.random.default_rng(seed)

    def row(cols):
        return (*_agreement(np.nanmean(s[:, cols], axis=1), ref), _w1(zz[cols], target))

    full = row(np.arange(zz.size))
    cal = row(plan.keep)
    rand = np.array([row(rng.choice(zz.size, plan.k, replace=False)) for _ in range(n_random)])
    return pd.DataFrame({"variant": ["Full", "Random", "Cal."], "k": [zz.size, plan.k, plan.k],
                         "spearman": [full[0], rand[:, 0].mean(), cal[0]],
                         "kendall": [full[1], rand[:, 1].mean(), cal[1]],
                         "w1": [full[2], rand[:, 2].mean(), cal[2]],
                         "spearman_sd": [0.0, rand[:, 0].std(ddof=1), 0.0],
                         "kendall_sd": [0.0, rand[:, 1].std(ddof=1), 0.0]})


def calibration_curve(z: np.ndarray, target=None, ks=None, *, item_scores=None, reference=None,
                      n_random: int = 30, seed: int = 0) -> pd.DataFrame:
    """W1 to the target after Algorithm 1 for each ``k`` with the reduction ``1 - W1_after / W1_before`` and,
    given ``item_scores`` and ``reference``, the D.1 agreement of the calibrated and random subsets."""
    zz = np.asarray(z, float)
    if ks is None:
        ks = sorted({max(2, int(round(f * zz.size))) for f in np.linspace(0.1, 1.0, 10)})
    rows = []
    for kk in ks:
        plan = quantile_match(zz, target, k=int(kk))
        rec = {"k": int(kk), "w1_before": plan.w1_before, "w1_after": plan.w1_after,
               "w1_reduction": 1.0 - plan.w1_after / plan.w1_before if plan.w1_before > 0 else 0.0,
               "ddm_after_renormalised": plan.ddm_after_renormalised}
        if item_scores is not None and reference is not None:
            ex = calibration_experiment(item_scores, zz, reference, k=int(kk), target=target, n_random=n_random,
                                        seed=seed).set_index("variant")
            rec.update({"spearman_cal": ex.loc["Cal.", "spearman"], "spearman_random": ex.loc["Random", "spearman"],
                        "kendall_cal": ex.loc["Cal.", "kendall"], "kendall_random": ex.loc["Random", "kendall"]})
        rows.append(rec)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------------
# E.2 localised-improvement test
# ---------------------------------------------------------------------------------------------------------


def improvement_test(pre_successes, pre_trials, post_successes, post_trials, *, n_permutations: int = 100_000,
                     seed: int = 0, chunk: int = 10_000) -> dict:
    """E.2: one-sided stratified randomisation test that the post model's mean accuracy over all rollouts
    exceeds the pre model's. Returns gain, p_value ((1 + #{T* >= T}) / (1 + B)), n_items, n_permutations."""
    a = [np.asarray(x, dtype=np.int64).ravel() for x in (pre_successes, pre_trials, post_successes, post_trials)]
    s1, n1, s2, n2 = a
    if not (s1.shape == n1.shape == s2.shape == n2.shape):
        raise EngineError("pre and post successes / trials must be one value per item, all of one length")
    keep = (n1 > 0) & (n2 > 0)
    if not keep.any():
        raise EngineError("no item has rollouts under both conditions")
    if np.any(s1 < 0) or np.any(s2 < 0) or np.any(s1 > n1) or np.any(s2 > n2):
        raise EngineError("successes must lie between 0 and the number of rollouts")
    s1, n1, s2, n2 = s1[keep], n1[keep], s2[keep], n2[keep]
    if n_permutations < 1:
        raise EngineError("n_permutations must be at least 1")
    tot1, tot2 = n1.sum(), n2.sum()
    pooled = s1 + s2
    observed = s2.sum() / tot2 - s1.sum() / tot1
    rng = np.random.default_rng(seed)
    exceed = 0
    done = 0
    step = max(1, min(chunk, int(5e7 // max(s1.size, 1))))
    while done < n_permutations:
        size = min(step, n_permutations - done)
        post = rng.hypergeometric(pooled, n1 + n2 - pooled, n2, size=(size, s1.size)).sum(axis=1)
        gain = post / tot2 - (pooled.sum() - post) / tot1
        exceed += int(np.sum(gain >= observed - 1e-12))
        done += size
    return {"gain": float(observed), "p_value": (1 + exceed) / (1 + n_permutations), "n_items": int(s1.size),
            "n_permutations": int(n_permutations)}
