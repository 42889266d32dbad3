"""Posterior uncertainty of the coverage metrics (paper 003 Appendix C.6): Laplace draws or a parametric
bootstrap of the 1PL difficulties, with the metrics and each tracked gap location recomputed per draw."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from benchloupe.engine import dense
from benchloupe.engine.backend import Backend
from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.irt import OnePLResult, fit_1pl

from .core import _sorted_location_widths, _target_points, _uniform_max_gap_draws, as_target

__all__ = ["MetricUncertainty", "UncertaintyConfig", "metric_uncertainty"]


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
    added_b: np.ndarray | None = None,
    added_se: np.ndarray | None = None,
    progress: Progress = no_progress,
    cancel: threading.Event | None = None,
    device: str | Backend | None = None,
) -> MetricUncertainty:
    """Posterior uncertainty of DDM / max gap / top-k sum (C.6) from a MAP :func:`fit_1pl` result.

    The bootstrap needs the observation pattern: pass ``mask`` (0/1 data) or ``trials`` (binomial).
    Inside ``dense.use`` with a torch backend the per-draw metrics (sort, gaps, DDM, location widths) run on its
    device; the draws themselves come from the same CPU generator, so a seed gives the same draws on every
    backend and the metrics agree to rounding (the sums' order: <= 1e-12 relative).  ``device`` ("cpu", "cuda",
    "auto" or a ``backend.Backend``; ``None``: the current context) chooses it.

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
    rng = np.random.default_rng(config.seed)
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
        if extra.size:  # the added items in every draw (their own draw, after the matrix items' for the seed)
            b_draws = np.concatenate([b_draws, extra[None, :] + extra_se[None, :] * rng.standard_normal(
                (size, extra.size))], axis=1)
        if dense.on_torch():  # the same draws (CPU RNG), their metrics on the device
            from benchloupe.engine import backend_torch

            dd, mg, ts, lw = backend_torch.draw_metrics(b_draws, target_pts, config.k, locations, dense.active().device)
            if lw is not None:
                loc_chunks.append(lw)
            chunks.append(pd.DataFrame({"ddm": dd, "max_gap": mg, "topk_sum": ts,
                                        "baseline_max_gap": baseline[np.arange(done, done + size) % baseline.size]}))
            done += size
            progress(done, n_draws, f"C.6 uncertainty: {done} of {n_draws} draws")
            continue
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
