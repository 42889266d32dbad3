"""Posterior uncertainty of the coverage metrics (paper 003 Appendix C.6): Laplace draws or a parametric
bootstrap of the 1PL difficulties, with the metrics and each tracked gap location recomputed per draw.

The draws are replicates (issue 36, :mod:`benchloupe.engine.replicates`): draw d comes from its own generator,
``SeedSequence(seed).spawn(draws)[d]``, and a replicate is a fixed run of ``chunk`` Laplace draws (their linear
algebra is one matrix product) or one bootstrap refit, so ``--jobs 1``, N processes and a Dask cluster store the
same numbers bit for bit.  The uniform baseline's samples come from ``default_rng(seed)`` itself."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import pandas as pd

from benchloupe.engine import dense, replicates
from benchloupe.engine.backend import Backend
from benchloupe.engine.common import EngineError, Progress, no_progress
from benchloupe.engine.irt import OnePLResult, fit_1pl
from benchloupe.engine.irt.onepl import LaplacePosterior

from .core import _sorted_location_widths, _target_points, _uniform_max_gap_draws, as_target

__all__ = ["MetricUncertainty", "UncertaintyConfig", "metric_uncertainty"]


@dataclass(frozen=True)
class UncertaintyConfig:
    """C.6: recompute DDM, max gap and top-k sum on posterior draws of the 1PL difficulties.

    ``method="laplace"`` draws from the Gaussian approximation at the MAP (the paper uses NUTS draws);
    ``"bootstrap"`` simulates responses from the fitted 1PL and refits (slower: one fit per draw).
    ``max_values`` caps draws x items (Laplace draws): at most ``max_values // items`` draws, never under 200
    (41,871 items: 477 draws; the Monte Carlo error of a 95% interval end is then about 1% of the spread).
    ``chunk`` Laplace draws make one replicate (a worker's unit; part of what fixes the numbers' rounding).
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
    added_b: np.ndarray | None = None,
    added_se: np.ndarray | None = None,
    progress: Progress = no_progress,
    cancel: threading.Event | None = None,
    device: str | Backend | None = None,
) -> MetricUncertainty:
    """Posterior uncertainty of DDM / max gap / top-k sum (C.6) from a MAP :func:`fit_1pl` result.

    The bootstrap needs the observation pattern: pass ``mask`` (0/1 data) or ``trials`` (binomial).
    Inside ``dense.use`` with a torch backend the per-draw metrics (sort, gaps, DDM, location widths) run on its
    device (the replicates then stay in this process); the draws themselves come from the same CPU generators,
    so a seed gives the same draws on every backend and the metrics agree to rounding (the sums' order:
    <= 1e-12 relative).  ``device`` ("cpu", "cuda", "auto" or a ``backend.Backend``; ``None``: the current
    context) chooses it.

    ``added_b`` (raw logits) are items with no responses in the matrix, placed on its scale by another
    calibration: the accepted BenchFill items, at the difficulty their online calibration gave (paper 003
    §4.1). Every draw holds them too, each drawn from N(b, se²) with ``added_se`` (0 where unknown: held at b),
    so the metrics and the gap intervals are those of the benchmark as it now stands (issue 21 item 7: the
    recompute after an accept had none).
    """
    if device is not None:
        with dense.use(dense.resolve(device, int(fit.b.size) * config.n_draws)):
            return metric_uncertainty(fit, target=target, config=config, correct=correct, mask=mask,
                                      successes=successes, trials=trials, locations=locations, added_b=added_b,
                                      added_se=added_se, progress=progress, cancel=cancel)
    if config.n_draws < 2:
        raise EngineError("need at least two draws for an uncertainty estimate")
    if config.method not in ("laplace", "bootstrap"):
        raise EngineError(f"unknown uncertainty method {config.method!r}; use 'laplace' or 'bootstrap'")
    if config.method == "laplace" and fit.laplace is None:
        raise EngineError("the Laplace method needs a MAP fit (fit_1pl with method='map')")
    tgt = as_target(target)
    extra = np.zeros(0) if added_b is None else np.asarray(added_b, float).ravel()
    if not np.isfinite(extra).all():
        raise EngineError("added item difficulties must be finite numbers")
    extra_se = np.zeros(extra.size) if added_se is None else np.nan_to_num(
        np.asarray(added_se, float).ravel(), nan=0.0, posinf=0.0, neginf=0.0).clip(min=0.0)
    if extra_se.size != extra.size:
        raise EngineError(f"{extra.size} added difficulties but {extra_se.size} standard errors")
    n = fit.b.size + extra.size
    n_draws = config.n_draws
    if config.method == "laplace":
        n_draws = min(n_draws, max(200, config.max_values // max(n, 1)))
        fit.laplace._cholesky()  # once, here: every worker receives it with the posterior
        inputs = _DrawInputs(laplace=fit.laplace)
    else:
        inputs = _DrawInputs(fit=fit, trials=_observed_trials(fit, mask, correct, trials))
    inputs = replace(inputs, extra=extra, extra_se=extra_se, target_pts=_target_points(n, tgt), k=config.k,
                     locations=None if locations is None else np.asarray(locations, float))
    # one same-size uniform sample per draw up to 200, from the seed's own stream; draw d is paired with
    # baseline d mod 200, and the exceedance probability averages over all (draw, baseline) pairs
    baseline = _uniform_max_gap_draws(n, min(n_draws, 200), np.random.default_rng(config.seed), config.baseline)
    # draw d from its own child seed; a replicate is a fixed run of ``chunk`` draws (one bootstrap refit)
    size = config.chunk if config.method == "laplace" else 1
    children = replicates.seeds(config.seed, n_draws)
    parts = replicates.run(_draw_chunk, [children[i:i + size] for i in range(0, n_draws, size)], inputs,
                           progress=progress, cancel=cancel, label="C.6 uncertainty draw batch")
    ddm, max_gap, topk_sum, widths = zip(*parts, strict=True)
    d = pd.DataFrame({"ddm": np.concatenate(ddm), "max_gap": np.concatenate(max_gap),
                      "topk_sum": np.concatenate(topk_sum),
                      "baseline_max_gap": baseline[np.arange(n_draws) % baseline.size]})
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
        location_widths=None if locations is None else np.concatenate(widths),
        max_gap_ci=(float(d.max_gap.quantile(0.025)), float(d.max_gap.quantile(0.975))),
    )


@dataclass(frozen=True)
class _DrawInputs:
    """What every draw reads (sent to each worker once per batch): the Laplace posterior, or the fit and its
    observation counts (bootstrap); the added items with their SEs; the target points, k and tracked locations."""

    laplace: LaplacePosterior | None = None
    fit: OnePLResult | None = None
    trials: np.ndarray | None = None
    extra: np.ndarray = field(default_factory=lambda: np.zeros(0))
    extra_se: np.ndarray = field(default_factory=lambda: np.zeros(0))
    target_pts: np.ndarray = field(default_factory=lambda: np.zeros(0))
    k: int = 5
    locations: np.ndarray | None = None


def _draw_chunk(inputs: _DrawInputs, seeds) -> tuple:
    """One replicate: the draws of ``seeds`` (one generator each: its matrix items' difficulties, then its
    added items'), and their metrics (ddm, max_gap, topk_sum, location widths or None)."""
    rngs = [np.random.default_rng(s) for s in seeds]
    if inputs.laplace is not None:
        b_draws = inputs.laplace.sample_b(rngs)
    else:
        b_draws = np.stack([_bootstrap_b(inputs.fit, inputs.trials, r) for r in rngs])
    if inputs.extra.size:  # the added items in every draw, each from N(b, se^2)
        b_draws = np.concatenate([b_draws, np.stack([inputs.extra + inputs.extra_se * r.standard_normal(
            inputs.extra.size) for r in rngs])], axis=1)
    if dense.on_torch():  # in this process (replicates stay on the device): the same draws, metrics there
        from benchloupe.engine import backend_torch

        return backend_torch.draw_metrics(b_draws, inputs.target_pts, inputs.k, inputs.locations,
                                          dense.active().device)
    # one sort per draw: min-max normalisation is monotone, and its end gaps are empty (width 0)
    bs = np.sort(b_draws, axis=1)
    lo = bs[:, :1]
    span = bs[:, -1:] - lo
    zs = (bs - lo) / span
    del bs
    widths = None
    if inputs.locations is not None:
        widths = _sorted_location_widths(zs, (inputs.locations[None, :] - lo) / span)
    gaps = np.diff(zs, axis=1)
    kk = min(inputs.k, gaps.shape[1])
    top = np.partition(gaps, gaps.shape[1] - kk, axis=1)[:, gaps.shape[1] - kk:]
    return np.mean(np.abs(zs - inputs.target_pts[None, :]), axis=1), top.max(axis=1), top.sum(axis=1), widths


def _observed_trials(fit: OnePLResult, mask, correct, trials) -> np.ndarray:
    """The bootstrap's observation pattern: trials per cell (binomial data), else 1 where a 0/1 cell was seen."""
    if trials is not None:
        return np.asarray(trials, dtype=float)
    if correct is None and mask is None:
        raise EngineError("the bootstrap needs the observation pattern: pass correct/mask or trials")
    obs = np.ones((fit.theta.size, fit.b.size), bool)
    if correct is not None:
        obs &= np.isfinite(np.asarray(correct, dtype=float))
    if mask is not None:
        obs &= np.asarray(mask, dtype=bool)
    return obs.astype(float)


def _bootstrap_b(fit: OnePLResult, k: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One parametric-bootstrap replicate: simulate from the fitted 1PL with the observed pattern, refit."""
    eta = fit.theta[:, None] - fit.b[None, :]
    p = fit.chance[None, :] + (1 - fit.chance[None, :]) / (1 + np.exp(-eta))
    c = rng.binomial(k.astype(np.int64), np.clip(p, 0, 1)).astype(float)
    refit = fit_1pl(None, successes=c, trials=k, chance=fit.chance)
    return refit.b
