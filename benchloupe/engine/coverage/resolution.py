"""What a coverage report can be trusted for: lattice resolution, tail gaps, gap intervals, detectability.

Paper 003 reads the maximum gap as the benchmark's local resolution (Theorem 2.3) and DDM as a bound on score
distortion (Theorem 2.1 / B.2). Two properties of the 1PL difficulties can make those numbers mislead:

- **The sum-score lattice.** Under the 1PL without guessing, an item's conditional mode given the abilities
  depends on its responses only through its sum score ``s_i`` (and its trial pattern). With ``m`` models and one
  rollout every difficulty is one of ``m + 1`` values, so with many items the "gaps" are the spacing of those
  levels: no item *could* be measured between two adjacent levels. A gap is **below the lattice resolution**
  when no achievable level lies strictly inside it: neither its harder end with one success more nor its easier
  end with one success fewer would fall inside (solved exactly for ``g = 0``; linearised, ``1 / h_b``, with
  guessing). Such gaps are not coverage gaps; a benchmark whose items sit on few levels (at least two items per
  level on average) has the lattice **present**, and then DDM has a floor (``ddm_floor``: the DDM of the best
  same-size benchmark whose difficulties lie on the achievable levels) and the max gap a floor
  (``max_gap_floor``: the widest spacing of adjacent achievable levels).
- **Tail gaps.** The max gap is an extreme-order statistic; the widest gaps are usually between the hardest
  (or easiest) items, solved by almost no model, where the prior and the few successes decide the estimate.
  A gap **touches an end** when its easiest end is the easiest item or its hardest end the hardest item; it is a
  **tail** gap when it touches an end whose item lies outside the models' ability range ``[min theta, max
  theta]`` on the normalised scale (1PL: a model of ability ``theta`` has P = 1/2 at ``b = theta``), or when more
  than half of it lies outside that range.

Each gap's **C.6 interval**: across posterior draws of the difficulties, the width of the empty interval that
contains the gap's midpoint (fixed on the raw logit scale, re-normalised per draw like the metrics); a gap is
**confirmed** when its 2.5% width exceeds the mean spacing ``1 / (n - 1)`` of a same-size uniform benchmark.

**Detectability.** Theorem 2.3: a localised improvement of width ``w <= G(B)`` can be invisible to the benchmark
for every number of rollouts, so ``G(B)`` (and its interval) is the undetectable width; inside a given gap any
improvement narrower than that gap is invisible. Theorem B.2: with probability ``1 - delta`` the observed score
difference of two models is within ``L * W1 + sqrt(2 log(2 / delta) / (n k))`` of the target difference
(``k`` rollouts per item, ``L`` the Lipschitz constant of the difference curve): smaller differences may be
rank flips. ``delta`` and ``L`` are the curator's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchloupe.engine.common import EngineError

__all__ = ["Lattice", "Resolution", "conditional_levels", "gap_locations", "lattice", "readout"]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0, e) / (1.0 + e)


def conditional_levels(theta: np.ndarray, s: np.ndarray, trials: np.ndarray, b0: np.ndarray, *,
                       var_b: float = 1.0, mean_b: float = 0.0, max_iter: int = 50) -> np.ndarray:
    """Conditional posterior mode of ``b`` for sum scores ``s`` (one per column of ``trials``, models x columns)
    with the abilities fixed (1PL, no guessing): the root of ``s + (b - mean_b)/var_b = sum_j T_j sigmoid(theta_j
    - b)``, which is strictly increasing in ``b``; safeguarded Newton from ``b0``, vectorised over columns.

    ``trials`` may also be one vector (per model) shared by every column: complete data with one trial count.
    The root then depends on the column only through its sum score, so it is solved once per distinct score
    (a 5,000-model benchmark has at most 5,001 of them, whatever its items); otherwise the columns are solved in
    blocks (no float64 copy of the whole trials matrix)."""
    th = np.asarray(theta, float)
    s = np.asarray(s, float)
    b0 = np.asarray(b0, float)
    t = np.asarray(trials)
    step = max(1, _LEVEL_BLOCK // max(1, th.size))  # columns per block: no models x columns float64 matrices
    if t.ndim == 1:
        scores, first, inverse = np.unique(s, return_index=True, return_inverse=True)
        tf = t.astype(float)
        start = _grid_start(th, tf, scores, b0[first], var_b, mean_b)
        out = np.empty(scores.size)
        for c0 in range(0, scores.size, step):
            sl = slice(c0, c0 + step)
            out[sl] = _levels(th, scores[sl], tf[:, None], start[sl], var_b, mean_b, max_iter, shared=True)
        return out[inverse]
    out = np.empty(s.size)
    for c0 in range(0, s.size, step):
        sl = slice(c0, c0 + step)
        out[sl] = _levels(th, s[sl], t[:, sl].astype(float), b0[sl], var_b, mean_b, max_iter)
    return out


_LEVEL_BLOCK = 1 << 20  # models x columns cells per block of the level equations


def _grid_start(th, t, scores, b0, var_b, mean_b) -> np.ndarray:
    """Starts for the shared-trials level equations: the root of ``s + (b - mean_b)/var_b = F(b)`` on a grid of F
    (one sum per grid point for every score at once), where it lies inside the grid's range; ``b0`` elsewhere.
    Newton from there takes one or two steps to the same root (the equation has exactly one)."""
    lo, hi = float(np.min(b0)) - 4.0, float(np.max(b0)) + 4.0
    grid = np.linspace(lo, hi, int(min(4097, max(65, (hi - lo) / 0.005))))
    F = np.empty(grid.size)
    step = max(1, _LEVEL_BLOCK // max(1, th.size))
    for g0 in range(0, grid.size, step):
        F[g0:g0 + step] = t @ _sigmoid(th[:, None] - grid[None, g0:g0 + step])
    H = F - (grid - mean_b) / var_b  # strictly decreasing: its root in b is where H = s
    inside = (scores <= H[0]) & (scores >= H[-1])
    return np.where(inside, np.interp(-scores, -H, grid), b0)


def _levels(th, s, t, b0, var_b, mean_b, max_iter, shared: bool = False) -> np.ndarray:
    th = th[:, None]
    b = b0.copy()
    active = np.ones(b.size, bool)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        sig = _sigmoid(th - b[idx][None, :])
        tt = t if shared else t[:, idx]
        f = s[idx] + (b[idx] - mean_b) / var_b - np.sum(tt * sig, axis=0)
        fp = 1.0 / var_b + np.sum(tt * sig * (1.0 - sig), axis=0)
        step = np.clip(f / fp, -2.0, 2.0)
        b[idx] -= step
        active[idx] = np.abs(step) > 1e-9
    return b


@dataclass(frozen=True)
class Lattice:
    """The sum-score lattice of the difficulties (see the module docstring).

    ``n_levels``: distinct difficulty levels (a level holds the sorted difficulties within half a one-success step
    of its first item); ``sum_score_levels``: achievable sum scores per item (largest trial total + 1);
    ``tied_fraction``: items sharing their level with another item; ``present``: at least two items per level on
    average; ``levels_z``: the achievable levels of the common trial pattern on the normalised scale (empty when
    the lattice is absent); ``ddm_floor`` / ``max_gap_floor``: the smallest DDM / max gap any same-size benchmark
    on those levels could show (NaN when absent); ``step_down`` / ``step_up`` (raw, per item): the difficulty of
    the same item with one success more / one fewer (-inf / +inf where impossible; NaN = unknown, e.g. an item
    added by BenchFill without results, whose gaps are never called below resolution).
    """

    n_items: int
    n_levels: int
    sum_score_levels: int
    tied_fraction: float
    present: bool
    levels_z: np.ndarray
    ddm_floor: float
    max_gap_floor: float
    step_down: np.ndarray
    step_up: np.ndarray
    exact: bool


def lattice(theta: np.ndarray, b: np.ndarray, successes: np.ndarray, trials: np.ndarray, *,
            chance: np.ndarray | None = None, h_b: np.ndarray | None = None, var_b: float = 1.0,
            mean_b: float = 0.0, b_min: float | None = None, b_max: float | None = None) -> Lattice:
    """Detect the sum-score lattice of 1PL difficulties ``b`` fitted to ``successes`` / ``trials`` (models x
    items, zeros where missing; any numeric dtype, e.g. int8; ``trials`` None: every cell observed once) with
    abilities ``theta``. ``h_b`` (the posterior precision of each ``b``) is
    needed for items with guessing (linearised neighbour levels)."""
    b = np.asarray(b, float)
    c = np.asarray(successes)
    t = None if trials is None else np.asarray(trials)
    n = b.size
    if (t is not None and c.shape != t.shape) or c.ndim != 2 or c.shape[1] != n:
        raise EngineError("successes/trials must be models x items, one column per difficulty")
    g = np.zeros(n) if chance is None else np.broadcast_to(np.asarray(chance, float), (n,))
    s = c.sum(axis=0, dtype=float)
    total = np.full(n, float(c.shape[0])) if t is None else t.sum(axis=0, dtype=float)
    free = g == 0
    down = np.full(n, np.nan)
    up = np.full(n, np.nan)
    if free.any():
        idx = np.flatnonzero(free)
        guess = 1.0 / np.maximum(total[idx] * 0.25, 1.0)
        if h_b is not None:
            guess = 1.0 / np.asarray(h_b, float)[idx]
        can_down = s[idx] + 1 <= total[idx]
        can_up = s[idx] - 1 >= 0
        tc = np.ones(c.shape[0]) if t is None else t[:, idx]  # no trials: every cell one trial (one shared column)
        d = conditional_levels(theta, s[idx] + 1, tc, b[idx] - guess, var_b=var_b, mean_b=mean_b)
        u = conditional_levels(theta, s[idx] - 1, tc, b[idx] + guess, var_b=var_b, mean_b=mean_b)
        down[idx] = np.where(can_down, d, -np.inf)
        up[idx] = np.where(can_up, u, np.inf)
    if (~free).any():
        if h_b is None:
            raise EngineError("items with guessing need the posterior precision h_b for their lattice steps")
        idx = np.flatnonzero(~free)
        step = 1.0 / np.asarray(h_b, float)[idx]
        down[idx] = np.where(s[idx] + 1 <= total[idx], b[idx] - step, -np.inf)
        up[idx] = np.where(s[idx] >= 1, b[idx] + step, np.inf)
    order = np.argsort(b, kind="stable")
    bs = b[order]
    local_step = np.nanmin(np.stack([bs - down[order], up[order] - bs]), axis=0)
    local_step = np.where(np.isfinite(local_step), local_step, np.inf)
    # walk the sorted difficulties: a new level starts half a one-success step above the current level's first
    # item (anchored, so that a dense run of blurred levels is not chained into one)
    level_id = np.zeros(n, dtype=np.int64)
    anchor, anchor_step, lvl = bs[0], local_step[0], 0
    bl, sl = bs.tolist(), local_step.tolist()
    for i in range(1, n):
        if bl[i] - anchor > 0.5 * anchor_step:
            lvl += 1
            anchor, anchor_step = bl[i], sl[i]
        level_id[i] = lvl
    n_levels = lvl + 1
    sizes = np.bincount(level_id)
    tied = float(np.mean(sizes[level_id] > 1))
    sum_levels = int(total.max()) + 1
    present = n >= 2 * n_levels
    lo = float(b.min()) if b_min is None else b_min
    hi = float(b.max()) if b_max is None else b_max
    levels_z = np.empty(0)
    ddm_floor = max_gap_floor = float("nan")
    if present and hi > lo:
        common = np.ones(c.shape[0]) if t is None else _row_medians(t)
        scores = np.arange(int(common.sum()) + 1, dtype=float)
        lv = conditional_levels(theta, scores, common, np.full(scores.size, mean_b), var_b=var_b, mean_b=mean_b)
        z = np.sort((lv - lo) / (hi - lo))
        levels_z = z[(z >= -1e-9) & (z <= 1 + 1e-9)]
        if levels_z.size:
            u = (np.arange(1, n + 1) - 0.5) / n
            pos = np.clip(np.searchsorted(levels_z, u), 1, levels_z.size) if levels_z.size > 1 else None
            if pos is None:
                nearest = np.full(n, levels_z[0])
            else:
                left = levels_z[pos - 1]
                right = levels_z[np.minimum(pos, levels_z.size - 1)]
                nearest = np.where(np.abs(u - left) <= np.abs(right - u), left, right)
            ddm_floor = float(np.mean(np.abs(u - nearest)))
            pts = np.concatenate([[0.0], np.clip(levels_z, 0, 1), [1.0]])
            max_gap_floor = float(np.diff(pts).max())
    return Lattice(n_items=n, n_levels=n_levels, sum_score_levels=sum_levels, tied_fraction=tied, present=present,
                   levels_z=levels_z, ddm_floor=ddm_floor, max_gap_floor=max_gap_floor, step_down=down, step_up=up,
                   exact=bool(free.all()))


def _row_medians(t: np.ndarray) -> np.ndarray:
    """``np.median(t, axis=1)`` in row blocks (no float64 copy of the whole matrix)."""
    out = np.empty(t.shape[0])
    step = max(1, (1 << 21) // max(1, t.shape[1]))
    for r0 in range(0, t.shape[0], step):
        out[r0:r0 + step] = np.median(t[r0:r0 + step], axis=1)
    return out


@dataclass(frozen=True)
class Resolution:
    """The trust readout of one coverage report (module docstring).

    ``gaps``: the report's gap table plus ``touches_end``, ``outside_ability`` (fraction of the gap outside the
    ability range), ``tail``, ``below_resolution``, ``ci_lo`` / ``ci_hi`` (C.6 interval, NaN beyond
    ``interval_gaps`` or without draws), ``confirmed`` and ``status`` (one of ``lattice``, ``tail``,
    ``uncertain``, ``gap``). ``max_gap_trusted``: the widest gap that is neither a tail nor below resolution.
    ``warnings``: one line each; empty when the report can be read as the paper reads it.
    """

    lattice: Lattice | None
    ability_lo: float
    ability_hi: float
    gaps: pd.DataFrame
    max_gap_trusted: float
    max_gap_ci: tuple[float, float]
    undetectable_width: float
    b2_bound: float
    delta: float
    lipschitz: float
    rollouts: float
    n_tail_gaps_topk: int
    warnings: list[str]


def _location_widths(b_draws: np.ndarray, loc_raw: np.ndarray) -> np.ndarray:
    """Per draw (rows) the width of the empty interval containing each raw location, on the draw's own
    normalised scale (0 outside [0, 1])."""
    from .core import _sorted_location_widths

    bs = np.sort(b_draws, axis=1)
    lo = bs[:, :1]
    span = bs[:, -1:] - lo
    return _sorted_location_widths((bs - lo) / span, (loc_raw[None, :] - lo) / span)


def readout(report, theta: np.ndarray, *, lattice_info: Lattice | None = None, b_draws: np.ndarray | None = None,
            location_widths: np.ndarray | None = None, interval_gaps: int = 20, k: int = 5, delta: float = 0.05,
            lipschitz: float = 1.0, rollouts: float = 1.0, level: float = 0.95,
            max_gap_ci: tuple[float, float] | None = None) -> Resolution:
    """Annotate ``report`` (a :class:`~benchloupe.engine.coverage.CoverageReport`) with the trust readout.

    Give either ``b_draws`` (draws x items, raw) or ``location_widths`` (draws x ``interval_gaps``, as
    :func:`metric_uncertainty` returns for :func:`gap_locations`) for the C.6 intervals."""
    if not 0 < delta < 1:
        raise EngineError(f"delta must lie in (0, 1); got {delta}")
    if not lipschitz >= 0:
        raise EngineError(f"the Lipschitz constant must be non-negative; got {lipschitz}")
    span = report.b_max - report.b_min
    th = np.asarray(theta, float)
    a_lo = float((th.min() - report.b_min) / span)
    a_hi = float((th.max() - report.b_min) / span)
    gaps = report.gaps.copy()
    n = report.normalised.size
    zero = gaps["width"].to_numpy() <= 0
    lo_end = np.isclose(gaps["lo"].to_numpy(), 0.0) & ~zero
    hi_end = np.isclose(gaps["hi"].to_numpy(), 1.0) & ~zero
    gaps["touches_end"] = lo_end | hi_end
    overlap = np.clip(np.minimum(gaps["hi"], a_hi) - np.maximum(gaps["lo"], a_lo), 0, None)
    with np.errstate(invalid="ignore", divide="ignore"):
        gaps["outside_ability"] = np.where(zero, 0.0, 1.0 - overlap / gaps["width"])
    # an end gap is a tail gap when its end item lies beyond every model's ability (solved by almost all of
    # them, or by almost none); any gap is when more than half of it lies outside the ability range
    gaps["tail"] = (lo_end & (a_lo > 0)) | (hi_end & (a_hi < 1)) | (gaps["outside_ability"] > 0.5)
    below = zero.copy()
    if lattice_info is not None:
        b_raw = report.b_min + report.normalised * span
        lo_i = gaps["lo_item"].to_numpy()
        hi_i = gaps["hi_item"].to_numpy()
        ok = (lo_i >= 0) & (hi_i >= 0)
        b_lo = np.where(ok, b_raw[np.maximum(lo_i, 0)], np.nan)
        b_hi = np.where(ok, b_raw[np.maximum(hi_i, 0)], np.nan)
        down_hi = lattice_info.step_down[np.maximum(hi_i, 0)]
        up_lo = lattice_info.step_up[np.maximum(lo_i, 0)]
        tol_hi = 0.01 * np.abs(b_hi - down_hi)
        tol_lo = 0.01 * np.abs(up_lo - b_lo)
        known = ~np.isnan(down_hi) & ~np.isnan(up_lo)
        with np.errstate(invalid="ignore"):
            tol_hi = np.where(np.isfinite(down_hi), tol_hi, 0.0)
            tol_lo = np.where(np.isfinite(up_lo), tol_lo, 0.0)
            inside = ((down_hi > b_lo + tol_hi) & (down_hi < b_hi)) | ((up_lo < b_hi - tol_lo) & (up_lo > b_lo))
        below |= ok & known & ~inside
    gaps["below_resolution"] = below
    m = min(interval_gaps, len(gaps))
    ci_lo = np.full(len(gaps), np.nan)
    ci_hi = np.full(len(gaps), np.nan)
    alpha = (1 - level) / 2
    if location_widths is None and b_draws is not None:
        location_widths = _location_widths(np.asarray(b_draws, float), gap_locations(report, m))
    if location_widths is not None:
        w = np.asarray(location_widths, float)[:, :m]
        ci_lo[: w.shape[1]] = np.quantile(w, alpha, axis=0)
        ci_hi[: w.shape[1]] = np.quantile(w, 1 - alpha, axis=0)
    gaps["ci_lo"] = ci_lo
    gaps["ci_hi"] = ci_hi
    spacing = 1.0 / max(n - 1, 1)
    gaps["confirmed"] = np.where(np.isfinite(ci_lo), ci_lo > spacing, False) & ~below
    status = np.where(below, "lattice", np.where(gaps["tail"], "tail",
                                                 np.where(np.isfinite(ci_lo) & ~gaps["confirmed"], "uncertain",
                                                          "gap")))
    gaps["status"] = status
    trusted = gaps.loc[(status == "gap") | (status == "uncertain"), "width"]
    max_trusted = float(trusted.max()) if len(trusted) else 0.0
    g_ci = max_gap_ci if max_gap_ci is not None else (float("nan"), float("nan"))
    if b_draws is not None and max_gap_ci is None:
        from .core import _sorted_widths

        bd = np.asarray(b_draws, float)
        lo_d = bd.min(axis=1, keepdims=True)
        zd = (bd - lo_d) / (bd.max(axis=1, keepdims=True) - lo_d)
        gd = _sorted_widths(zd).max(axis=1)
        g_ci = (float(np.quantile(gd, alpha)), float(np.quantile(gd, 1 - alpha)))
    b2 = float(lipschitz * report.ddm + np.sqrt(2 * np.log(2 / delta) / (n * max(rollouts, 1e-12))))
    top = gaps.head(k)
    n_tail = int(top["tail"].sum())
    warnings: list[str] = []
    lat = lattice_info
    if lat is not None and lat.present:
        warnings.append(
            f"lattice: {n} items sit on {lat.n_levels} difficulty levels ({lat.sum_score_levels} achievable sum "
            f"scores); gaps between adjacent levels are the measurement resolution, not coverage gaps; DDM "
            f"cannot fall below {lat.ddm_floor:.3f} and the max gap below {lat.max_gap_floor:.3f} on these levels")
    n_below_top = int(top["below_resolution"].sum() - (top["width"] <= 0).sum())
    if n_below_top and not (lat is not None and lat.present):
        warnings.append(f"resolution: {n_below_top} of the top {k} gaps lie between adjacent sum-score levels "
                        "(no item could be measured inside them)")
    if n_tail:
        trusted_txt = (f"the widest trusted gap is {max_trusted:.3f}" if max_trusted > 0 else
                       "no gap inside the ability range is wider than the sum-score resolution")
        warnings.append(
            f"tail: {n_tail} of the top {k} gaps lie beyond the models' ability range "
            f"[{a_lo:.3f}, {a_hi:.3f}]; there the difficulties rest on very few successes or failures; "
            f"{trusted_txt}")
    return Resolution(lattice=lat, ability_lo=a_lo, ability_hi=a_hi, gaps=gaps, max_gap_trusted=max_trusted,
                      max_gap_ci=g_ci, undetectable_width=float(report.max_gap), b2_bound=b2, delta=delta,
                      lipschitz=lipschitz, rollouts=float(rollouts), n_tail_gaps_topk=n_tail, warnings=warnings)


def gap_locations(report, m: int) -> np.ndarray:
    """Raw-logit midpoints of the report's ``m`` widest gaps (the locations whose C.6 widths are tracked)."""
    span = report.b_max - report.b_min
    return report.b_min + report.gaps["midpoint"].to_numpy()[:m] * span
