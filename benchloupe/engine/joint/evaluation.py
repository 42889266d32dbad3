"""Evaluations that refit (paper 000, section 4 and Table 2): held-out calibration and ranking agreement against
the static-only and arena-only fits and an external ranking."""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np

from benchloupe.engine.common import Progress, check_cancel, no_progress
from benchloupe.engine.joint.fitmetrics import ece, pair_probabilities
from benchloupe.engine.joint.inputs import ArenaData, JointConfig, JointResult, StaticData, build_pairs
from benchloupe.engine.joint.optimise import fit_joint
from benchloupe.engine.stats import spearman


def heldout_calibration(static: StaticData | None, arena: ArenaData | None, config: JointConfig = JointConfig(),
                        *, seeds=(0, 1, 2), holdout: float = 0.2, bins: int = 10,
                        progress: Progress = no_progress, cancel: threading.Event | None = None) -> dict:
    """Appendix E: a cell-level 80/20 holdout per seed (static cells; arena pairs, flags from all data), refit,
    ECE of p on held-out static cells and of mu against the soft (and binarised) targets on held-out decisive pairs;
    averaged over seeds.  As the reference's calibration.py, one seed draws both the static and the pair split."""
    pairs = build_pairs(arena, config) if (arena is not None and config.uses_arena) else None
    rows: list[dict] = []
    for k, seed in enumerate(seeds):
        check_cancel(cancel)
        progress(k, len(seeds), f"held-out calibration seed {seed}")
        row: dict = {}
        smask = None
        if static is not None and config.uses_static:
            obs = np.flatnonzero(static.mask.ravel())
            held = np.zeros(static.mask.size, bool)
            held[obs[np.random.default_rng(seed).random(obs.size) < holdout]] = True
            held = held.reshape(static.mask.shape)
            smask = static.mask & ~held
        keep = None
        if pairs is not None:
            keep = np.random.default_rng(seed).random(len(pairs)) >= holdout
        res = fit_joint(static, arena, config, pairs=pairs, pair_keep=keep, static_mask=smask, cancel=cancel)
        if smask is not None:
            ok = held & np.isfinite(res.b_static)[None, :] & np.isfinite(res.theta)[:, None]
            row["static_ece"] = ece(res.p_static()[ok], static.correct[ok], bins)
        if pairs is not None:
            mu = pair_probabilities(res)
            test = ~keep & pairs.decisive & np.isfinite(mu)
            row["arena_ece_soft"] = ece(mu[test], pairs.target[test], bins)
            row["arena_ece_binary"] = ece(mu[test], (pairs.target[test] >= 0.5).astype(float), bins)
        rows.append(row)
    progress(len(seeds), len(seeds), "held-out calibration done")
    return {key: float(np.mean([r[key] for r in rows])) for key in rows[0]}


def ranking_agreement(result: JointResult, static: StaticData | None, arena: ArenaData | None,
                      external: np.ndarray | None = None) -> dict:
    """Spearman of the joint abilities with the static-only and arena-only fits (same config otherwise) and with a
    user-supplied external score per model (NaN where unknown), over models present in both (section 4.1)."""
    out: dict = {}
    if static is not None and result.config.mode != "static":
        st = fit_joint(static, None, replace(result.config, mode="static"))
        out["spearman_vs_static_only"] = spearman(result.theta, st.theta)
    if arena is not None and result.config.mode != "arena":
        ar = fit_joint(None, arena, replace(result.config, mode="arena"))
        out["spearman_vs_arena_only"] = spearman(result.theta, ar.theta)
    if external is not None:
        out["spearman_vs_external"] = spearman(result.theta, np.asarray(external, float))
    return out


def metrics(result: JointResult, static: StaticData | None, arena: ArenaData | None, *,
            external: np.ndarray | None = None, heldout: bool = True, seeds=(0, 1, 2),
            progress: Progress = no_progress, cancel: threading.Event | None = None) -> dict:
    """All run metrics: in-sample fit metrics, held-out ECE (Appendix E) and ranking agreements."""
    out = dict(result.metrics)
    out.update(ranking_agreement(result, static, arena, external))
    if heldout:
        out.update(heldout_calibration(static if result.config.uses_static else None,
                                       arena if result.config.uses_arena else None, result.config,
                                       seeds=seeds, progress=progress, cancel=cancel))
    return out
