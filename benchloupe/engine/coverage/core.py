"""Coverage metrics of a benchmark: targets, normalisation, DDM, gaps, the uniform baseline, the report.

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
- The C.3 diagnostics, Algorithm 1, the C.6 draws and the trust readout live in the sibling modules
  :mod:`.diagnostics`, :mod:`.calibration`, :mod:`.uncertainty` and :mod:`.resolution`.

Difficulties enter raw (IRT ``b``); every function that needs them normalised says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from benchloupe.engine.common import EngineError

__all__ = ["CoverageReport", "TargetDistribution", "as_target", "coverage_report", "ddm", "gap_table", "max_gap", "minmax_normalise", "normalise_new", "topk_gap_sum", "uniform_max_gap_expectation"]


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
