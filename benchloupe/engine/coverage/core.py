"""Difficulty coverage of a benchmark: DDM, gaps, response-matrix diagnostics and calibration.

Implements paper 3 ("Your Benchmark Is an Empirical Measure Over Difficulty"): a benchmark of ``n`` items is
the empirical measure ``nu_B = 1/n sum delta_{z_i}`` of its min-max normalised 1PL difficulties ``z_i``.

- **DDM** (section 3.1, Appendix C.4): ``1/n sum |z_(i) - u_i|`` with ``u_i = (i - 1/2)/n``, the 1-Wasserstein
  distance to the same-size uniform midpoints. Against a curator-chosen target ``mu`` we use the same
  construction with the target's quantiles ``u_i = Q_mu((i - 1/2)/n)`` (for the uniform target this *is* C.4).
- **Maximum gap** (section 2.2, eq. 1, C.4) with end points ``z_(0) = 0`` and ``z_(n+1) = 1``; the top-k gap
  sum (section 3.1 reports k = 5); all gaps as a table (the BenchFill targets are their midpoints).
- **Same-size uniform-sampling baseline** for the max gap (C.6). The paper does not say whether the baseline
  sample is itself min-max normalised. ``baseline="normalised"`` (default) rescales ``n`` iid U(0, 1) points like
  the benchmark: the benchmark's own smallest and largest difficulties sit *at* 0 and 1 after min-max
  normalisation, so its ``n + 1`` gaps are two empty end gaps and ``n - 1`` spacings, and the like-for-like
  baseline is ``n - 1`` uniform spacings, E = ``H_{n-1} / (n - 1)``. ``"raw"`` (the literal reading: ``n``
  points plus the end points, ``n + 1`` spacings, E = ``H_{n+1} / (n + 1)``) compares ``n - 1`` spacings with
  ``n + 1`` and so overstates the observed / baseline ratio of a perfectly uniform benchmark (by 8% at n = 20).
- **Response-matrix diagnostics** (Appendix C.3): model / item information (mean of ``4 p (1 - p)``) and model /
  item inversion rates, thresholds 0.3 and pass/fail. The paper leaves two details open; we count pairs with
  tied overall rates as unordered (excluded) and tied cell values as non-inversions (kept in the denominator).
- **Quantile-matching calibration** (Appendix D, Algorithm 1) toward uniform or any target; the subset size
  ``k`` is the curator's (the paper does not fix it), :func:`calibration_sweep` tabulates W1 against ``k``.
- **Posterior uncertainty of the metrics** (C.6): the paper recomputes the metrics on NUTS draws; we draw from
  the Laplace approximation of the 1PL posterior (default) or run a parametric bootstrap (refit per draw).

Difficulties enter raw (IRT ``b``); every function that needs them normalised says so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.irt import OnePLConfig, OnePLResult, fit_1pl

__all__ = [
    "CalibrationPlan",
    "CoverageAnalysis",
    "CoverageReport",
    "Diagnostics",
    "DiagnosticsConfig",
    "MetricUncertainty",
    "TargetDistribution",
    "UncertaintyConfig",
    "analyse",
    "as_target",
    "calibration_sweep",
    "coverage_report",
    "ddm",
    "diagnostics",
    "gap_table",
    "max_gap",
    "metric_uncertainty",
    "minmax_normalise",
    "normalise_new",
    "quantile_match",
    "topk_gap_sum",
    "uniform_max_gap_expectation",
]


# ---------------------------------------------------------------------------------------------------------
# target distributions on [0, 1]
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetDistribution:
    """A target difficulty distribution ``mu`` on [0, 1], given by its quantile function and CDF."""

    name: str
    quantile: Callable[[np.ndarray], np.ndarray]
    cdf: Callable[[np.ndarray], np.ndarray]

    @staticmethod
    def uniform() -> TargetDistribution:
        return TargetDistribution("uniform", lambda t: np.asarray(t, float), lambda x: np.clip(x, 0.0, 1.0))

    @staticmethod
    def from_scipy(dist, name: str | None = None) -> TargetDistribution:
        """A frozen ``scipy.stats`` distribution (e.g. ``stats.beta(2, 2)``) supported on [0, 1]."""
        lo, hi = dist.support()
        if lo < 0 or hi > 1:
            raise EngineError("the target distribution must live on [0, 1] (e.g. scipy.stats.beta(a, b))")
        label = f"{dist.dist.name}({', '.join(f'{a:g}' for a in dist.args)})"
        return TargetDistribution(name or label, dist.ppf, dist.cdf)

    @staticmethod
    def from_samples(samples: np.ndarray, name: str = "empirical") -> TargetDistribution:
        """An empirical target: the measure of normalised difficulties in ``samples`` (e.g. another benchmark)."""
        s = np.sort(np.asarray(samples, dtype=float).ravel())
        if s.size == 0 or np.any(~np.isfinite(s)) or s[0] < 0 or s[-1] > 1:
            raise EngineError("target samples must be finite normalised difficulties in [0, 1]")

        def quantile(t):
            idx = np.clip(np.ceil(np.asarray(t) * s.size).astype(int) - 1, 0, s.size - 1)
            return s[idx]

        return TargetDistribution(name, quantile, lambda x: np.searchsorted(s, x, side="right") / s.size)


def as_target(target) -> TargetDistribution:
    """None -> uniform (the paper's neutral default, Theorem 2.2); scipy frozen distribution; sample array."""
    if target is None:
        return TargetDistribution.uniform()
    if isinstance(target, TargetDistribution):
        return target
    if hasattr(target, "ppf") and hasattr(target, "cdf"):
        return TargetDistribution.from_scipy(target)
    return TargetDistribution.from_samples(np.asarray(target))


# ---------------------------------------------------------------------------------------------------------
# normalisation, DDM, gaps
# ---------------------------------------------------------------------------------------------------------


def _finite_1d(b: np.ndarray, what: str = "difficulties") -> np.ndarray:
    x = np.asarray(b, dtype=float).ravel()
    if x.size < 2:
        raise EngineError(f"need at least two item {what} to measure coverage")
    if not np.all(np.isfinite(x)):
        raise EngineError(f"item {what} contain NaN or infinity; refit the difficulties")
    return x


def minmax_normalise(b_raw: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Min-max normalisation to [0, 1] (section 3.1, C.4); returns (z, min, max) so new items can be placed."""
    b = _finite_1d(b_raw)
    lo, hi = float(b.min()), float(b.max())
    if hi - lo <= 0:
        raise EngineError("all items have the same difficulty; min-max normalisation is undefined")
    return (b - lo) / (hi - lo), lo, hi


def normalise_new(b_raw_new: float, ref_min: float, ref_max: float) -> float:
    """Place an online-calibrated item (section 4.1) on a benchmark's normalised scale.

    Not clipped: a value outside [0, 1] means the item is easier/harder than every existing item (inserting
    it would change the benchmark's min-max range and so every normalised difficulty).
    """
    if not ref_max > ref_min:
        raise EngineError(
            "reference range must have ref_max > ref_min (the benchmark's raw difficulty range)"
        )
    return float((b_raw_new - ref_min) / (ref_max - ref_min))


def _target_points(n: int, target: TargetDistribution) -> np.ndarray:
    return np.asarray(target.quantile((np.arange(1, n + 1) - 0.5) / n), dtype=float)


def ddm(z: np.ndarray, target=None) -> float:
    """DDM (C.4): W1 between the normalised difficulties and the same-size target midpoint measure."""
    zs = np.sort(_finite_1d(z))
    return float(np.mean(np.abs(zs - _target_points(zs.size, as_target(target)))))


def gap_table(z: np.ndarray) -> pd.DataFrame:
    """All ``n + 1`` adjacent gaps of the sorted normalised difficulties with end points 0 and 1 (eq. 1),
    sorted by width descending: lo, hi, width, midpoint, lo_item, hi_item (input positions; -1 = end point).
    """
    x = _finite_1d(z)
    order = np.argsort(x, kind="stable")
    pts = np.concatenate([[0.0], x[order], [1.0]])
    ids = np.concatenate([[-1], order, [-1]])
    df = pd.DataFrame(
        {
            "lo": pts[:-1],
            "hi": pts[1:],
            "width": np.diff(pts),
            "midpoint": 0.5 * (pts[:-1] + pts[1:]),
            "lo_item": ids[:-1],
            "hi_item": ids[1:],
        }
    )
    return df.sort_values("width", ascending=False, kind="stable").reset_index(drop=True)


def _sorted_widths(z: np.ndarray) -> np.ndarray:
    """Gap widths (with the 0/1 end points) along the last axis, for one or many difficulty vectors."""
    zs = np.sort(z, axis=-1)
    shape = zs.shape[:-1] + (1,)
    pts = np.concatenate([np.zeros(shape), zs, np.ones(shape)], axis=-1)
    return np.diff(pts, axis=-1)


def max_gap(z: np.ndarray) -> float:
    """G(B) = max_j (z_(j+1) - z_(j)) with z_(0) = 0, z_(n+1) = 1 (section 2.2, eq. 1)."""
    return float(_sorted_widths(_finite_1d(z)).max())


def topk_gap_sum(z: np.ndarray, k: int = 5) -> float:
    """Sum of the ``k`` largest adjacent gaps (section 3.1 reports k = 5; Table 2 uses k = 3)."""
    if k < 1:
        raise EngineError("k must be at least 1")
    w = _sorted_widths(_finite_1d(z))
    return float(np.sort(w)[::-1][:k].sum())


def uniform_max_gap_expectation(n: int, baseline: Literal["raw", "normalised"] = "normalised") -> float:
    """Exact E[max gap] of the same-size uniform-sampling baseline (C.6).

    ``raw``: ``n`` iid U(0,1) points plus the end points 0 and 1, i.e. ``n + 1`` spacings,
    E = H_{n+1} / (n + 1). ``normalised``: the sample is min-max normalised like the benchmark, leaving
    ``n - 2`` interior points and ``n - 1`` spacings, E = H_{n-1} / (n - 1).
    """
    if n < 2:
        raise EngineError("need at least two items for the uniform baseline")
    spacings = n + 1 if baseline == "raw" else n - 1
    if baseline not in ("raw", "normalised"):
        raise EngineError("baseline must be 'raw' or 'normalised'")
    return float(np.sum(1.0 / np.arange(1, spacings + 1)) / spacings)


def _uniform_max_gap_draws(n: int, draws: int, rng: np.random.Generator, baseline: str) -> np.ndarray:
    """Max gap of same-size uniform samples without sorting: the ``s`` spacings of uniform order statistics are
    ``E / sum(E)`` for ``s`` iid standard exponentials ``E`` (``s = n + 1`` raw; ``n - 1`` once the sample is
    min-max normalised, whose inner spacings rescaled by their sum are again uniform spacings)."""
    s = n + 1 if baseline == "raw" else n - 1
    out = np.empty(draws)
    step = max(1, int(4e6 // s))
    for i in range(0, draws, step):
        e = rng.standard_exponential((min(step, draws - i), s))
        out[i: i + e.shape[0]] = e.max(axis=1) / e.sum(axis=1)
    return out


def _sorted_location_widths(zs: np.ndarray, loc: np.ndarray) -> np.ndarray:
    """Per row of sorted normalised difficulties ``zs`` (0 first, 1 last), the width of the empty interval that
    contains each location in the same row of ``loc`` (0 outside [0, 1])."""
    out = np.zeros(loc.shape)
    last = zs.shape[1] - 1
    for d in range(zs.shape[0]):
        pos = np.clip(np.searchsorted(zs[d], loc[d], side="right"), 1, last)
        w = zs[d, pos] - zs[d, pos - 1]
        out[d] = np.where((loc[d] >= 0) & (loc[d] <= 1), w, 0.0)
    return out


def _ecdf(z: np.ndarray, target: TargetDistribution) -> pd.DataFrame:
    zs = np.sort(z)
    return pd.DataFrame(
        {
            "z": zs,
            "ecdf": np.arange(1, zs.size + 1) / zs.size,
            "target_cdf": np.asarray(target.cdf(zs), float),
        }
    )


@dataclass(frozen=True)
class CoverageReport:
    """Coverage metrics of one benchmark (section 3.1, C.4, C.6).

    ``normalised`` is in input order; ``ddm`` is against ``target`` (``ddm_uniform`` always against the
    uniform midpoints); ``gaps`` is :func:`gap_table`; ``uniform_baseline_max_gap`` the exact expectation,
    ``max_gap_ratio`` observed / baseline, ``uniform_exceed_prob`` the Monte Carlo probability (seeded,
    ``baseline_draws`` samples) that a same-size uniform sample has a max gap at least the observed one;
    ``ecdf`` has columns z, ecdf, target_cdf for plotting.
    """

    normalised: np.ndarray
    b_min: float
    b_max: float
    target: str
    ddm: float
    ddm_uniform: float
    max_gap: float
    gaps: pd.DataFrame
    k: int
    topk_sum: float
    uniform_baseline_max_gap: float
    max_gap_ratio: float
    uniform_exceed_prob: float
    baseline: str
    ecdf: pd.DataFrame


def coverage_report(
    b_raw: np.ndarray,
    *,
    target=None,
    k: int = 5,
    seed: int = 0,
    baseline: Literal["raw", "normalised"] = "normalised",
    baseline_draws: int = 200,
) -> CoverageReport:
    """All coverage metrics from raw difficulties (min-max normalised here)."""
    z, lo, hi = minmax_normalise(b_raw)
    tgt = as_target(target)
    widths = np.sort(_sorted_widths(z))[::-1]
    expected = uniform_max_gap_expectation(z.size, baseline)
    draws = _uniform_max_gap_draws(z.size, baseline_draws, np.random.default_rng(seed), baseline)
    g = float(widths[0])
    zs = np.sort(z)
    ddm_u = float(np.mean(np.abs(zs - (np.arange(1, z.size + 1) - 0.5) / z.size)))
    return CoverageReport(
        normalised=z,
        b_min=lo,
        b_max=hi,
        target=tgt.name,
        ddm=float(np.mean(np.abs(zs - _target_points(z.size, tgt)))),
        ddm_uniform=ddm_u,
        max_gap=g,
        gaps=gap_table(z),
        k=k,
        topk_sum=float(widths[:k].sum()),
        uniform_baseline_max_gap=expected,
        max_gap_ratio=g / expected,
        uniform_exceed_prob=float(np.mean(draws >= g)),
        baseline=baseline,
        ecdf=_ecdf(z, tgt),
    )


# ---------------------------------------------------------------------------------------------------------
# response-matrix diagnostics (C.3)
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiagnosticsConfig:
    """Thresholds of Appendix C.3: information >= 0.3, inversion rates <= 0.3.

    ``ordering="rates"`` ranks models and items by their overall success rates (the paper); ``"irt"`` ranks
    them by fitted ``theta`` and ``-b`` instead (needs both).
    """

    min_model_information: float = 0.3
    min_item_information: float = 0.3
    max_model_inversion: float = 0.3
    max_item_inversion: float = 0.3
    ordering: Literal["rates", "irt"] = "rates"


@dataclass(frozen=True)
class Diagnostics:
    """C.3 response-matrix diagnostics with per-check pass flags and the overall verdict ``passed``."""

    model_information: float
    item_information: float
    model_inversion_rate: float
    item_inversion_rate: float
    checks: dict[str, bool]
    passed: bool
    n_models: int
    n_items: int
    ordering: str


def _inversion_rate(values: np.ndarray, observed: np.ndarray, strength: np.ndarray) -> float:
    """Fraction of (context, ordered unit pair) with the stronger unit's value below the weaker one's.

    ``values``/``observed``: units x contexts. Pairs with equal ``strength`` are unordered and skipped; pairs
    need both cells observed. Counting uses cumulative sums per distinct value level: O(levels * size).
    """
    order = np.argsort(strength, kind="stable")
    v = values[order]
    o = observed[order]
    s = strength[order]
    group_start = np.searchsorted(s, s, side="left")  # first position with the same strength
    zeros = np.zeros((1, v.shape[1]))
    cum_obs = np.concatenate([zeros, np.cumsum(o, axis=0, dtype=float)])
    pairs = float(np.sum(o * cum_obs[group_start]))
    if pairs == 0:
        return 0.0
    levels = np.unique(v[o])
    inversions = 0.0
    for level in levels[:-1]:
        above = np.concatenate([zeros, np.cumsum(o & (v > level), axis=0, dtype=float)])
        inversions += float(np.sum((o & (v == level)) * above[group_start]))
    return inversions / pairs


def diagnostics(
    correct: np.ndarray | None,
    mask: np.ndarray | None = None,
    theta: np.ndarray | None = None,
    b: np.ndarray | None = None,
    *,
    successes: np.ndarray | None = None,
    trials: np.ndarray | None = None,
    config: DiagnosticsConfig = DiagnosticsConfig(),
) -> Diagnostics:
    """Response-matrix diagnostics of Appendix C.3 on a models x items matrix (0/1 or successes/trials).

    ``p_ij = successes / trials`` per observed cell; ``p_j`` / ``p_i`` are means over the observed cells of a
    model / an item; information is the mean of ``4 p (1 - p)``.
    """
    if successes is not None or trials is not None:
        if successes is None or trials is None:
            raise EngineError("successes and trials must be given together")
        c = np.asarray(successes, dtype=float)
        t = np.asarray(trials, dtype=float)
    else:
        if correct is None:
            raise EngineError("give either correct (0/1) or successes and trials")
        c = np.asarray(correct, dtype=float)
        t = np.ones_like(c)
    if c.ndim != 2 or c.shape != t.shape:
        raise EngineError("responses must be a models x items matrix")
    obs = np.isfinite(c) & np.isfinite(t) & (t > 0)
    if mask is not None:
        obs &= np.asarray(mask, dtype=bool)
    p = np.where(obs, c / np.where(obs, t, 1.0), 0.0)
    n_obs_model = obs.sum(axis=1)
    n_obs_item = obs.sum(axis=0)
    if np.sum(n_obs_model > 0) < 2 or np.sum(n_obs_item > 0) < 2:
        raise EngineError("diagnostics need at least two models and two items with observed results")
    pm = p.sum(axis=1)[n_obs_model > 0] / n_obs_model[n_obs_model > 0]
    pi = p.sum(axis=0)[n_obs_item > 0] / n_obs_item[n_obs_item > 0]
    model_info = float(np.mean(4 * pm * (1 - pm)))
    item_info = float(np.mean(4 * pi * (1 - pi)))
    if config.ordering == "irt":
        if theta is None or b is None:
            raise EngineError("ordering='irt' needs the fitted theta and b")
        model_strength = np.asarray(theta, dtype=float)
        item_easiness = -np.asarray(b, dtype=float)
    else:
        model_strength = np.where(n_obs_model > 0, p.sum(axis=1) / np.maximum(n_obs_model, 1), np.nan)
        item_easiness = np.where(n_obs_item > 0, p.sum(axis=0) / np.maximum(n_obs_item, 1), np.nan)
    keep_m = np.isfinite(model_strength)
    keep_i = np.isfinite(item_easiness)
    pk = p[np.ix_(keep_m, keep_i)]
    ok = obs[np.ix_(keep_m, keep_i)]
    model_inv = _inversion_rate(pk, ok, model_strength[keep_m])
    item_inv = _inversion_rate(pk.T, ok.T, item_easiness[keep_i])
    checks = {
        "model_information": model_info >= config.min_model_information,
        "item_information": item_info >= config.min_item_information,
        "model_inversion_rate": model_inv <= config.max_model_inversion,
        "item_inversion_rate": item_inv <= config.max_item_inversion,
    }
    return Diagnostics(
        model_information=model_info,
        item_information=item_info,
        model_inversion_rate=model_inv,
        item_inversion_rate=item_inv,
        checks=checks,
        passed=all(checks.values()),
        n_models=int(keep_m.sum()),
        n_items=int(keep_i.sum()),
        ordering=config.ordering,
    )


# ---------------------------------------------------------------------------------------------------------
# quantile-matching calibration (Appendix D, Algorithm 1)
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CalibrationPlan:
    """Algorithm 1's subset: ``keep`` (item positions in selection order t = 1..k), ``keep_mask``,
    ``weights`` (1/k on kept items: the calibrated benchmark's measure), the target locations ``q``, and W1 to
    the target before (all items) and after (kept items, same normalised scale; ``ddm_after_renormalised``
    re-normalises the kept items as a fresh coverage report would).
    """

    keep: np.ndarray
    keep_mask: np.ndarray
    weights: np.ndarray
    q: np.ndarray
    k: int
    target: str
    w1_before: float
    w1_after: float
    ddm_after_renormalised: float


def _greedy_nearest(z: np.ndarray, q: np.ndarray) -> np.ndarray:
    """For q_1..q_k in turn pick the unused item closest to q_t (a tie goes to the smaller difficulty).
    Sorted array + two union-find "next unused" pointers: O(n log n + k log n)."""
    order = np.argsort(z, kind="stable")
    zs = z[order]
    n = zs.size
    right = list(range(n + 1))  # right[i]: smallest unused index >= i (n = none)
    left = list(range(n + 1))  # node i + 1 stands for index i; root node r -> largest unused index r - 1

    def find(parent, i):
        root = i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:
            parent[i], i = root, parent[i]
        return root

    chosen = np.empty(q.size, dtype=int)
    pos = np.searchsorted(zs, q, side="left")
    for t, (qt, p) in enumerate(zip(q, pos, strict=True)):
        r = find(right, int(p))
        lft = find(left, int(p)) - 1  # left is offset by one: index i stored at i + 1
        if r == n or (lft >= 0 and qt - zs[lft] <= zs[r] - qt):
            pick = lft
        else:
            pick = r
        right[pick] = pick + 1
        left[pick + 1] = pick
        chosen[t] = order[pick]
    return chosen


def quantile_match(b_norm: np.ndarray, target=None, *, k: int | None = None) -> CalibrationPlan:
    """Appendix D, Algorithm 1: keep ``k`` items matched greedily to the target quantiles
    ``q_t = Q_mu((t - 1/2) / k)``. ``k`` defaults to half the benchmark (the paper leaves it open; see
    :func:`calibration_sweep`)."""
    z = _finite_1d(b_norm, "normalised difficulties")
    n = z.size
    k = n // 2 if k is None else int(k)
    if not 1 <= k <= n:
        raise EngineError(f"subset size k must be between 1 and the number of items ({n}); got {k}")
    tgt = as_target(target)
    q = _target_points(k, tgt)
    keep = _greedy_nearest(z, q)
    keep_mask = np.zeros(n, dtype=bool)
    keep_mask[keep] = True
    kept = np.sort(z[keep])
    renorm = (kept - kept[0]) / (kept[-1] - kept[0]) if k > 1 and kept[-1] > kept[0] else kept
    return CalibrationPlan(
        keep=keep,
        keep_mask=keep_mask,
        weights=keep_mask / k,
        q=q,
        k=k,
        target=tgt.name,
        w1_before=ddm(z, tgt),
        w1_after=float(np.mean(np.abs(kept - q))),
        ddm_after_renormalised=float(np.mean(np.abs(renorm - _target_points(k, tgt)))),
    )


def calibration_sweep(b_norm: np.ndarray, target=None, ks=None) -> pd.DataFrame:
    """W1 to the target after Algorithm 1 for each subset size in ``ks`` (default 10%, 20%, ..., 100%)."""
    z = _finite_1d(b_norm, "normalised difficulties")
    if ks is None:
        ks = sorted({max(2, int(round(f * z.size))) for f in np.linspace(0.1, 1.0, 10)})
    rows = []
    for k in ks:
        plan = quantile_match(z, target, k=k)
        rows.append((k, plan.w1_after, plan.ddm_after_renormalised))
    return pd.DataFrame(rows, columns=["k", "w1_after", "ddm_after_renormalised"])


# ---------------------------------------------------------------------------------------------------------
# posterior uncertainty of the metrics (C.6)
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UncertaintyConfig:
    """C.6: recompute DDM, max gap and top-k sum on posterior draws of the 1PL difficulties.

    ``method="laplace"`` draws from the Gaussian approximation at the MAP (the paper uses NUTS draws);
    ``"bootstrap"`` simulates responses from the fitted 1PL and refits (slower: one fit per draw).
    ``max_values`` caps draws x items (Laplace draws): at most ``max_values // items`` draws, never under 200
    (41,871 items: 477 draws; the Monte Carlo error of a 95% interval end is then about 1% of the spread).
    """

    method: Literal["laplace", "bootstrap"] = "laplace"
    n_draws: int = 1000
    seed: int = 0
    k: int = 5
    baseline: Literal["raw", "normalised"] = "normalised"
    chunk: int = 100
    max_values: int = 20_000_000


@dataclass(frozen=True)
class MetricUncertainty:
    """Posterior summaries (C.6). ``draws`` has one row per draw: ddm, max_gap, topk_sum, baseline_max_gap
    (the max gap of a same-size uniform sample: 200 are drawn and cycled; ``prob_max_gap_exceeds_uniform``
    compares every draw with every one of them). ``location_widths`` (draws x locations, when
    ``locations`` were given): the width of the empty interval containing each raw-logit location in each draw
    (the per-gap C.6 intervals of :func:`~benchloupe.engine.coverage.resolution.readout`)."""

    method: str
    ddm_mean: float
    ddm_sd: float
    max_gap_mean: float
    max_gap_sd: float
    topk_sum_sd: float
    prob_max_gap_exceeds_uniform: float
    max_gap_ratio_median: float
    draws: pd.DataFrame
    location_widths: np.ndarray | None = None
    max_gap_ci: tuple[float, float] = (float("nan"), float("nan"))


def metric_uncertainty(
    fit: OnePLResult,
    *,
    target=None,
    config: UncertaintyConfig = UncertaintyConfig(),
    correct: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    successes: np.ndarray | None = None,
    trials: np.ndarray | None = None,
    locations: np.ndarray | None = None,
    progress: Progress = no_progress,
    cancel: threading.Event | None = None,
) -> MetricUncertainty:
    """Posterior uncertainty of DDM / max gap / top-k sum (C.6) from a MAP :func:`fit_1pl` result.

    The bootstrap needs the observation pattern: pass ``mask`` (0/1 data) or ``trials`` (binomial).
    """
    if config.n_draws < 2:
        raise EngineError("need at least two draws for an uncertainty estimate")
    rng = np.random.default_rng(config.seed)
    tgt = as_target(target)
    n = fit.b.size
    n_draws = config.n_draws
    if config.method == "laplace":
        n_draws = min(n_draws, max(200, config.max_values // max(n, 1)))
    chunks = []
    loc_chunks = []
    target_pts = _target_points(n, tgt)
    # one same-size uniform sample per draw up to 200; draw d is paired with baseline d mod 200, and the
    # exceedance probability averages over all (draw, baseline) pairs
    baseline = _uniform_max_gap_draws(n, min(n_draws, 200), rng, config.baseline)
    done = 0
    while done < n_draws:
        check_cancel(cancel)
        size = min(config.chunk, n_draws - done)
        if config.method == "laplace":
            if fit.laplace is None:
                raise EngineError("the Laplace method needs a MAP fit (fit_1pl with method='map')")
            b_draws = fit.laplace.sample_b(size, rng)
        elif config.method == "bootstrap":
            b_draws = np.stack([_bootstrap_b(fit, mask, correct, trials, rng) for _ in range(size)])
        else:
            raise EngineError(f"unknown uncertainty method {config.method!r}; use 'laplace' or 'bootstrap'")
        # one sort per draw: min-max normalisation is monotone, and its end gaps are empty (width 0)
        bs = np.sort(b_draws, axis=1)
        lo = bs[:, :1]
        span = bs[:, -1:] - lo
        zs = (bs - lo) / span
        del bs
        if locations is not None:
            loc_chunks.append(_sorted_location_widths(zs, (np.asarray(locations, float)[None, :] - lo) / span))
        widths = np.diff(zs, axis=1)
        kk = min(config.k, widths.shape[1])
        top = np.partition(widths, widths.shape[1] - kk, axis=1)[:, widths.shape[1] - kk:]
        chunks.append(
            pd.DataFrame(
                {
                    "ddm": np.mean(np.abs(zs - target_pts[None, :]), axis=1),
                    "max_gap": top.max(axis=1),
                    "topk_sum": top.sum(axis=1),
                    "baseline_max_gap": baseline[np.arange(done, done + size) % baseline.size],
                }
            )
        )
        done += size
        progress(done, n_draws, f"C.6 uncertainty: {done} of {n_draws} draws")
    d = pd.concat(chunks, ignore_index=True)
    return MetricUncertainty(
        method=config.method,
        ddm_mean=float(d.ddm.mean()),
        ddm_sd=float(d.ddm.std(ddof=1)),
        max_gap_mean=float(d.max_gap.mean()),
        max_gap_sd=float(d.max_gap.std(ddof=1)),
        topk_sum_sd=float(d.topk_sum.std(ddof=1)),
        prob_max_gap_exceeds_uniform=float(np.mean(d.max_gap.to_numpy()[:, None] > baseline[None, :])),
        max_gap_ratio_median=float(np.median(d.max_gap / d.baseline_max_gap)),
        draws=d,
        location_widths=np.concatenate(loc_chunks) if loc_chunks else None,
        max_gap_ci=(float(d.max_gap.quantile(0.025)), float(d.max_gap.quantile(0.975))),
    )


def _bootstrap_b(fit: OnePLResult, mask, correct, trials, rng: np.random.Generator) -> np.ndarray:
    """One parametric-bootstrap replicate: simulate from the fitted 1PL with the observed pattern, refit."""
    if trials is not None:
        k = np.asarray(trials, dtype=float)
    elif correct is not None or mask is not None:
        obs = np.ones((fit.theta.size, fit.b.size), bool)
        if correct is not None:
            obs &= np.isfinite(np.asarray(correct, dtype=float))
        if mask is not None:
            obs &= np.asarray(mask, dtype=bool)
        k = obs.astype(float)
    else:
        raise EngineError("the bootstrap needs the observation pattern: pass correct/mask or trials")
    eta = fit.theta[:, None] - fit.b[None, :]
    p = fit.chance[None, :] + (1 - fit.chance[None, :]) / (1 + np.exp(-eta))
    c = rng.binomial(k.astype(np.int64), np.clip(p, 0, 1)).astype(float)
    refit = fit_1pl(None, successes=c, trials=k, chance=fit.chance)
    return refit.b


# ---------------------------------------------------------------------------------------------------------
# one run: fit + metrics + diagnostics
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoverageAnalysis:
    """What ``benchloupe coverage`` shows: the 1PL fit, the coverage report, the C.3 diagnostics, the trust
    readout (:mod:`.resolution`: lattice, tails, gap intervals, detectability) and, when asked, the C.6
    uncertainty of the metrics."""

    fit: OnePLResult
    report: CoverageReport
    diagnostics: Diagnostics
    resolution: object = None
    uncertainty: MetricUncertainty | None = None


def counts(correct, mask=None, successes=None, trials=None) -> tuple[np.ndarray, np.ndarray]:
    """(successes, trials) as float models x items arrays, zeros where a cell is missing."""
    from benchloupe.engine.irt import _as_counts

    return _as_counts(correct, mask, successes, trials)


def analyse(
    correct: np.ndarray | None,
    mask: np.ndarray | None = None,
    *,
    chance: float | np.ndarray | None = None,
    successes: np.ndarray | None = None,
    trials: np.ndarray | None = None,
    target=None,
    k: int = 5,
    seed: int = 0,
    fit_config: OnePLConfig = OnePLConfig(),
    diagnostics_config: DiagnosticsConfig = DiagnosticsConfig(),
    uncertainty: UncertaintyConfig | None = None,
    interval_gaps: int = 20,
    delta: float = 0.05,
    lipschitz: float = 1.0,
    progress: Progress = no_progress,
    cancel: threading.Event | None = None,
) -> CoverageAnalysis:
    """Fit the 1PL (C.3), then the coverage metrics (C.4), the response-matrix diagnostics (C.3), the lattice
    and tail readout and, with ``uncertainty``, the C.6 posterior draws with an interval for each of the
    ``interval_gaps`` widest gaps."""
    from . import resolution

    fit = fit_1pl(
        correct,
        mask,
        chance=chance,
        successes=successes,
        trials=trials,
        config=fit_config,
        progress=progress,
        cancel=cancel,
    )
    check_cancel(cancel)
    report = coverage_report(fit.b, target=target, k=k, seed=seed)
    diag = diagnostics(
        correct, mask, fit.theta, fit.b, successes=successes, trials=trials, config=diagnostics_config
    )
    c, t = counts(correct, mask, successes, trials)
    lat = None
    if fit.laplace is not None:
        lat = resolution.lattice(fit.theta, fit.b, c, t, chance=fit.chance, h_b=fit.laplace.h_b,
                                 var_b=fit_config.prior_sd_b**2, mean_b=fit_config.prior_mean_b)
    unc = None
    m = min(interval_gaps, len(report.gaps))
    if uncertainty is not None and fit.method == "map":
        unc = metric_uncertainty(fit, target=target, config=uncertainty, correct=correct, mask=mask,
                                 successes=successes, trials=trials,
                                 locations=resolution.gap_locations(report, m), progress=progress, cancel=cancel)
    observed = t > 0
    rollouts = float(t[observed].mean()) if observed.any() else 1.0
    res = resolution.readout(report, fit.theta, lattice_info=lat,
                             location_widths=None if unc is None else unc.location_widths, interval_gaps=m, k=k,
                             delta=delta, lipschitz=lipschitz, rollouts=rollouts,
                             max_gap_ci=None if unc is None else unc.max_gap_ci)
    return CoverageAnalysis(fit=fit, report=report, diagnostics=diag, resolution=res, uncertainty=unc)
