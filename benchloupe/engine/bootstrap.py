"""Question-level cluster bootstrap of DualEval abilities (paper 000, Appendix D).

Each replicate resamples questions with replacement, stratified by source (every static ``item_source`` label and
the arena), so every replicate keeps the per-source item counts.  A question drawn twice becomes two independent
columns (the reference's ``__r{k}`` suffix).  Rewards are re-standardised per replicate (``build_pairs`` on the
replicate's columns), and the model is refitted with the same config.  Reported per model: the bootstrap standard
deviation of theta, the symmetric 95 % interval ``theta_hat +/- 1.96 sd`` (the paper's Figure 8) and the 2.5/97.5 %
percentiles of the model's rank across replicates (Table 4's rank interval).

Replicate ``b`` draws its columns from its own generator, ``default_rng(SeedSequence(seed).spawn(B)[b])``
(issue 36: the same numbers on any ``--jobs`` or cluster; until then the replicates drew in turn from one
``default_rng(seed)``, so stored bootstraps from before differ once); the reference derives its seeds from
Python's salted ``hash`` and is therefore not reproducible (A.7 item 6).  Replicates start from the full-data fit (warm start) and
stop at a relative objective tolerance of ``REPLICATE_FTOL`` (the Newton decrement test of ``fit_joint``) instead of
the full fit's 1e-12: the objective is the same, only the start and the last digits differ, and those digits are
far below the bootstrap spread being estimated (metabench GSM8K static, 5,041 x 249: the largest |theta| deviation
from the float64 optimum is 3e-4 over 12 replicates, median 7e-5, against a median SE of 0.058).

Static-only replicates (block-coordinate Newton) fit each *distinct* drawn column once, weighted by how often it
was drawn (``optimise.fit_static_weighted``): the same objective and the same iterates as the matrix with the
repeats (repeated columns start equal and take equal item steps), on ~63 % of the cells.

Table 4 (Appendix D) compares methods under the same resampling: :func:`method_bootstrap` draws the same replicate
columns for the arena Bradley-Terry baseline (``"arena_bt"``: arena prompts only) and the static-only 2PL
(``"static_2pl"``: static items only) as for DualEval, and :func:`table4` reports per method the median bootstrap
SE and the median width of the 95 % rank interval.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import numpy as np

from benchloupe.engine import replicates
from benchloupe.engine.common import EngineError, Progress, no_progress
from benchloupe.engine.joint import (
    ArenaData,
    JointConfig,
    JointResult,
    StaticData,
    fit_bradley_terry,
    fit_joint,
)
from benchloupe.engine.joint.optimise import fit_static_weighted
from benchloupe.engine.joint.subsets import static_columns

REPLICATE_FTOL = 1e-9


@dataclass
class BootstrapResult:
    """Per-model bootstrap summary; ``thetas`` is B x n_models (NaN where a replicate could not fit a model)."""

    theta: np.ndarray
    se: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    rank_low: np.ndarray
    rank_high: np.ndarray
    thetas: np.ndarray
    B: int
    seed: int
    failed: int


def _strata(static: StaticData | None) -> list[np.ndarray]:
    if static is None:
        return []
    n = static.shape[1]
    src = np.zeros(n, int) if static.item_source is None else np.unique(static.item_source, return_inverse=True)[1]
    return [np.flatnonzero(src == s) for s in np.unique(src)]


def _ranks(theta: np.ndarray) -> np.ndarray:
    """Rank 1 = best; NaN stays NaN."""
    out = np.full(theta.shape, np.nan)
    ok = np.isfinite(theta)
    order = np.argsort(-theta[ok], kind="stable")
    r = np.empty(ok.sum())
    r[order] = np.arange(1, ok.sum() + 1)
    out[ok] = r
    return out


def _nan_percentiles(a: np.ndarray, qs) -> tuple[np.ndarray, ...]:
    """``np.nanpercentile(a, q, axis=0)`` (linear interpolation) for each q, vectorised over the columns: numpy's
    own loops over the columns in Python when NaNs are present (1.3 s of a 5,000-model bootstrap)."""
    s = np.sort(a, axis=0)  # NaN sort last
    n = np.sum(np.isfinite(a), axis=0)
    cols = np.arange(a.shape[1])
    out = []
    for q in qs:
        pos = (n - 1) * (q / 100.0)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, np.maximum(n - 1, 0))
        lo = np.clip(lo, 0, None)
        frac = pos - lo
        v = s[lo, cols] * (1 - frac) + s[hi, cols] * frac
        out.append(np.where(n > 0, v, np.nan))
    return tuple(out)


def _draw(rng: np.random.Generator, strata: list[np.ndarray], n_arena: int):
    """One replicate's resampled static columns (per source stratum) and arena prompts."""
    s_idx = np.concatenate([rng.choice(s, len(s), replace=True) for s in strata]) if strata else None
    a_idx = rng.choice(n_arena, n_arena, replace=True) if n_arena else None
    return s_idx, a_idx


@dataclass(frozen=True)
class _Shared:
    """What every replicate of one bootstrap reads (sent to each worker once per batch)."""

    static: StaticData | None
    arena: ArenaData | None
    config: JointConfig
    full: JointResult | None
    strata: list[np.ndarray]
    n_arena: int
    weighted: bool
    method: str = "dualeval"


def _replicate(sh: _Shared, seed: np.random.SeedSequence) -> np.ndarray | None:
    """One bootstrap replicate: its draws from its own seed, the refit; None when the refit cannot fit."""
    s_idx, a_idx = _draw(np.random.default_rng(seed), sh.strata, sh.n_arena)
    static, arena, full, cfg = sh.static, sh.arena, sh.full, sh.config
    try:
        if sh.method == "arena_bt":
            return fit_bradley_terry(ArenaData(arena.rewards[:, a_idx]), cfg).scores
        if s_idx is not None and a_idx is None and sh.weighted:  # static only: each distinct column once, weighted
            cols, counts = np.unique(s_idx, return_counts=True)
            init = None if full is None else {"theta": full.theta, "b_static": full.b_static[cols],
                                              "k_static": full.k_static[cols]}
            return fit_static_weighted(static_columns(static, cols), counts, cfg, init=init)
        st = None if s_idx is None else static_columns(static, s_idx)
        ar = None if a_idx is None else ArenaData(arena.rewards[:, a_idx])
        if full is None:  # the static-only 2PL of method_bootstrap, cold start as its full fit
            return fit_joint(st, None, cfg).theta
        init = {"theta": full.theta, "gamma": full.gamma,
                "b_static": None if s_idx is None else full.b_static[s_idx],
                "k_static": None if s_idx is None else full.k_static[s_idx],
                "b_arena": None if a_idx is None else full.b_arena[a_idx],
                "k_arena": None if a_idx is None else full.k_arena[a_idx]}
        return fit_joint(st, ar, cfg, init=init).theta
    except EngineError:
        return None


def _collect(rows: list, n_models: int) -> tuple[np.ndarray, int]:
    thetas = np.full((len(rows), n_models), np.nan)
    failed = 0
    for b, row in enumerate(rows):
        if row is None:
            failed += 1
        else:
            thetas[b] = row
    return thetas, failed


def cluster_bootstrap(static: StaticData | None, arena: ArenaData | None, config: JointConfig = JointConfig(), *,
                      B: int = 100, seed: int = 0, full: JointResult | None = None,
                      progress: Progress = no_progress, cancel: threading.Event | None = None) -> BootstrapResult:
    """Appendix D cluster bootstrap of ``fit_joint(static, arena, config)``; the replicates run on the current
    :mod:`~benchloupe.engine.replicates` workers, replicate ``b`` drawing from ``seeds(seed, B)[b]``."""
    if B < 2:
        raise EngineError("the bootstrap needs B >= 2 replicates")
    full = full or fit_joint(static, arena, config, cancel=cancel)
    shared = _Shared(static if config.uses_static else None, arena if config.uses_arena else None,
                     replace(config, ftol=max(config.ftol, REPLICATE_FTOL)), full,
                     _strata(static if config.uses_static else None),
                     arena.shape[1] if (arena is not None and config.uses_arena) else 0,
                     config.optimizer in ("newton", "block"))
    rows = replicates.run(_replicate, replicates.seeds(seed, B), shared, progress=progress, cancel=cancel,
                          label="bootstrap replicate")
    thetas, failed = _collect(rows, len(full.theta))
    return _summarise(full.theta, thetas, B, seed, failed)


METHODS = ("dualeval", "arena_bt", "static_2pl")


def method_bootstrap(static: StaticData | None, arena: ArenaData | None, config: JointConfig = JointConfig(), *,
                     method: str = "dualeval", B: int = 100, seed: int = 0, progress: Progress = no_progress,
                     cancel: threading.Event | None = None) -> BootstrapResult:
    """The Appendix D bootstrap of one method's scores with the replicate draws of :func:`cluster_bootstrap`
    (same seed: same resampled columns per source).  ``"dualeval"`` is :func:`cluster_bootstrap` itself."""
    if method not in METHODS:
        raise EngineError(f"method must be one of {METHODS}, got {method!r}")
    if method == "dualeval":
        return cluster_bootstrap(static, arena, config, B=B, seed=seed, progress=progress, cancel=cancel)
    if B < 2:
        raise EngineError("the bootstrap needs B >= 2 replicates")
    if method == "arena_bt" and arena is None:
        raise EngineError("the arena BT bootstrap needs arena rewards")
    if method == "static_2pl" and static is None:
        raise EngineError("the static 2PL bootstrap needs static results")
    arena_cfg = replace(config, mode="arena")
    static_cfg = replace(config, mode="static", ftol=max(config.ftol, REPLICATE_FTOL))

    def score(st, ar):
        return fit_bradley_terry(ar, arena_cfg).scores if method == "arena_bt" else fit_joint(st, None,
                                                                                              static_cfg).theta

    full = score(static, arena)
    shared = _Shared(static if config.uses_static else None, arena if config.uses_arena else None,
                     arena_cfg if method == "arena_bt" else static_cfg, None,
                     _strata(static if config.uses_static else None),
                     arena.shape[1] if (arena is not None and config.uses_arena) else 0,
                     method == "static_2pl" and config.optimizer in ("newton", "block"), method)
    rows = replicates.run(_replicate, replicates.seeds(seed, B), shared, progress=progress, cancel=cancel,
                          label=f"{method} bootstrap replicate")
    thetas, failed = _collect(rows, len(full))
    return _summarise(full, thetas, B, seed, failed)


def _summarise(full: np.ndarray, thetas: np.ndarray, B: int, seed: int, failed: int) -> BootstrapResult:
    se = np.nanstd(thetas, axis=0, ddof=1)
    ranks = np.vstack([_ranks(t) for t in thetas])
    rank_low, rank_high = _nan_percentiles(ranks, (2.5, 97.5))
    return BootstrapResult(theta=full, se=se, ci_low=full - 1.96 * se, ci_high=full + 1.96 * se,
                           rank_low=rank_low, rank_high=rank_high, thetas=thetas, B=B, seed=seed, failed=failed)


def table4(results: dict[str, BootstrapResult]) -> list[dict]:
    """Per method: median bootstrap SE of the score and median width of the 95 % rank interval (Table 4).  Scores
    of different methods are on different scales, so the rank-interval width is the comparable column."""
    return [{"method": name, "median_se": float(np.nanmedian(r.se)),
             "median_rank_ci_width": float(np.nanmedian(r.rank_high - r.rank_low)), "B": r.B, "failed": r.failed}
            for name, r in results.items()]
