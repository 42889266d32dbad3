"""Evaluations that refit (paper 000, section 4 and Table 2): held-out calibration, ranking agreement against the
static-only 2PL, the arena Bradley-Terry ranking and an external ranking, and the Table 2 held-out method comparison.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import numpy as np
import pandas as pd

from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.joint.baselines import average_reward, fit_bradley_terry
from benchloupe.engine.joint.fitmetrics import ece, heldout_cells, heldout_static_ece, pair_probabilities
from benchloupe.engine.joint.inputs import (
    ArenaData,
    JointConfig,
    JointResult,
    PairSet,
    StaticData,
    build_pairs,
)
from benchloupe.engine.joint.optimise import fit_joint
from benchloupe.engine.stats import spearman

HELDOUT_FAST_CELLS = 4_000_000  # from this many observed cells a warm held-out refit stops at HELDOUT_FTOL
HELDOUT_FTOL = 1e-5  # relative objective decrease per sweep at which such a refit stops


def heldout_calibration(static: StaticData | None, arena: ArenaData | None, config: JointConfig = JointConfig(),
                        *, seeds=(0, 1, 2), holdout: float = 0.2, bins: int = 10,
                        progress: Progress = no_progress, cancel: threading.Event | None = None,
                        init: JointResult | None = None, refits: dict | None = None) -> dict:
    """Appendix E: a cell-level 80/20 holdout per seed (static cells; arena pairs, flags from all data), refit,
    ECE of p on held-out static cells and of mu against the soft (and binarised) targets on held-out decisive pairs;
    averaged over seeds.  As the reference's calibration.py, one seed draws both the static and the pair split.

    ``init`` (the full-data fit of the same config; :func:`metrics` passes it) starts each static-only refit there
    instead of from the observed rates, and a refit with float32 passes then ends with its float32 sweeps (no float64
    polish): the same training objective and optimum, reached in about a third of the passes (issue 26).  The
    held-out ECE moves by less than 1e-6 (simulated 2,000 x 14,000: 1.2e-7; tests/unit/test_scale.py), far below
    the spread of the ECE between seeds.  The split draws the same cells as before (``fitmetrics.heldout_cells``)
    and the ECE gathers only the held-out cells (``fitmetrics.heldout_static_ece``).  A joint ``init`` fitted by
    the joint block Newton (leaderboard size) starts its refits there too (see the comment below).  ``refits``
    (a dict) gets ``"heldout"``: how many refits, warm or cold, their optimiser and sweeps.

    From ``HELDOUT_FAST_CELLS`` observed cells a warm static-only refit also stops when a sweep lowers its objective
    by less than ``HELDOUT_FTOL`` (relative) instead of float32's resolution: from the full fit that is after two
    sweeps (five passes instead of seven; issue 26) and the held-out ECE is within 2e-5 of the fully converged warm
    refit's (simulated 2,000 x 2,000: at most 1.6e-5 over three seeds; 5,000 x 14,000: at most 3e-6).  Below that
    size (every shared real data set) the refits are as before: there the two-sweep ECE moves by up to 4e-5
    (metabench ARC) or 6e-4 (ChemBench, 32 models, which converges slowly) and the refits are cheap anyway.  Joint
    refits keep their own stopping rule."""
    pairs = build_pairs(arena, config) if (arena is not None and config.uses_arena) else None
    # static-only: block-coordinate Newton reaches the cold refit's optimum from the full fit.  With arena pairs the
    # objective is nonconvex and a warm start can end in another optimum (a simulated 120-model joint fit by the full
    # Newton solver: a lower objective than the cold refit's, abilities 0.2 apart), so refits of a full-Newton joint
    # fit stay cold (small: seconds).  A joint block-Newton fit (leaderboard size, ``block_joint``) is refitted from
    # the full fit (issue 26) and, as the static refits, ends with its float32 sweeps (no float64 polish): a cold
    # refit crawls for ~200-300 sweeps (5,000 x 14,000: ~2 min each), a warm one converges in ~10; the held-out
    # ECEs agree with the cold refits' to 1e-4 (tests/unit/test_joint_heldout_warm.py; without the polish they
    # move by 2e-6 at 1,000 x 14,000)
    warm = init is not None and ((config.mode == "static" and arena is None)
                                 or (init.provenance or {}).get("optimizer") == "block_joint")
    init = init if warm else None
    refit_cfg = config
    if (warm and config.mode == "static" and arena is None and static is not None
            and int(np.count_nonzero(static.mask)) >= HELDOUT_FAST_CELLS):
        refit_cfg = replace(config, ftol=max(config.ftol, HELDOUT_FTOL))
    rows: list[dict] = []
    sweeps: list[int] = []
    for k, seed in enumerate(seeds):
        check_cancel(cancel)
        progress(k, len(seeds), f"held-out calibration seed {seed}")
        row: dict = {}
        smask = held = None
        if static is not None and config.uses_static:
            held = heldout_cells(static.mask, holdout, seed)
            smask = np.greater(static.mask, held)  # mask & ~held in one pass
        keep = None
        if pairs is not None:
            keep = np.random.default_rng(seed).random(len(pairs)) >= holdout
        res = fit_joint(static, arena, refit_cfg, pairs=pairs, pair_keep=keep, static_mask=smask, cancel=cancel,
                        init=init, polish=not warm)
        sweeps.append(int(res.iterations))
        if smask is not None:
            row["static_ece"] = heldout_static_ece(res, static, held, bins)
        if pairs is not None:
            mu = pair_probabilities(res)
            test = ~keep & pairs.decisive & np.isfinite(mu)
            row["arena_ece_soft"] = ece(mu[test], pairs.target[test], bins)
            row["arena_ece_binary"] = ece(mu[test], (pairs.target[test] >= 0.5).astype(float), bins)
        rows.append(row)
    progress(len(seeds), len(seeds), "held-out calibration done")
    out = {key: float(np.mean([r[key] for r in rows])) for key in rows[0]}
    if refits is not None:
        refits["heldout"] = {"refits": len(seeds), "start": "warm (the full-data fit)" if warm else "cold",
                             "optimizer": res.provenance.get("optimizer"), "iterations": sweeps}
    return out


def ranking_agreement(result: JointResult, static: StaticData | None, arena: ArenaData | None,
                      external: np.ndarray | None = None, refits: dict | None = None) -> dict:
    """Spearman of the abilities with reference rankings over models present in both (section 4.1, Table 2).

    * ``spearman_vs_static_only``: the full-data static-only 2PL (Table 2's Static rho);
    * ``spearman_vs_arena_bt``: the full-data arena Bradley-Terry ranking (Table 2's Arena rho);
    * ``spearman_vs_arena_only_dualeval``: arena-only DualEval (the pairwise IRT without static labels);
    * ``spearman_vs_external``: a user-supplied score per model (NaN where unknown).
    """
    out: dict = {}
    if static is not None and result.config.mode != "static":
        st = fit_joint(static, None, replace(result.config, mode="static"))
        out["spearman_vs_static_only"] = spearman(result.theta, st.theta)
    if arena is not None:
        bt = fit_bradley_terry(arena, replace(result.config, mode="arena"), pairs=result.pairs)
        out["spearman_vs_arena_bt"] = spearman(result.theta, bt.scores)
        if result.config.mode != "arena":
            ar = fit_joint(None, arena, replace(result.config, mode="arena"), pairs=result.pairs)
            out["spearman_vs_arena_only_dualeval"] = spearman(result.theta, ar.theta)
    if external is not None:
        out["spearman_vs_external"] = spearman(result.theta, np.asarray(external, float))
    if refits is not None:
        refits["comparison"] = [name for key, name in (("spearman_vs_static_only", "static-only 2PL"),
                                                       ("spearman_vs_arena_bt", "arena Bradley-Terry"),
                                                       ("spearman_vs_arena_only_dualeval", "arena-only DualEval"))
                                if key in out]
    return out


def metrics(result: JointResult, static: StaticData | None, arena: ArenaData | None, *,
            external: np.ndarray | None = None, heldout: bool = True, seeds=(0, 1, 2),
            progress: Progress = no_progress, cancel: threading.Event | None = None,
            timings: dict | None = None) -> dict:
    """All run metrics: in-sample fit metrics, held-out ECE (Appendix E) and ranking agreements; ``refits`` says
    which fits they made (the comparison fits of :func:`ranking_agreement`, the held-out refits).  ``timings`` (a
    dict) gets ``ranking_s`` and ``heldout_s``."""
    import time

    out = dict(result.metrics)
    refits: dict = {}
    t = time.perf_counter()
    out.update(ranking_agreement(result, static, arena, external, refits=refits))
    if timings is not None:
        timings["ranking_s"] = round(time.perf_counter() - t, 4)
    if heldout:
        t = time.perf_counter()
        out.update(heldout_calibration(static if result.config.uses_static else None,
                                       arena if result.config.uses_arena else None, result.config,
                                       seeds=seeds, progress=progress, cancel=cancel, init=result, refits=refits))
        if timings is not None:
            timings["heldout_s"] = round(time.perf_counter() - t, 4)
    out["refits"] = refits
    return out


# ------------------------------------------------------------------------------------- Table 2 method comparison
METHODS = ("dualeval", "static_2pl", "arena_bt", "arena_avg_reward")
METHOD_LABELS = {"dualeval": "DualEval", "static_2pl": "Static 2PL", "arena_bt": "Arena BT",
                 "arena_avg_reward": "Arena Avg Reward"}


def question_split(n: int, holdout: float, seed: int) -> np.ndarray:
    """True for the ``round(holdout * n)`` held-out questions of one seeded split (at least one when n > 1)."""
    k = int(round(holdout * n))
    k = min(max(k, 1 if n > 1 else 0), max(n - 1, 0))
    held = np.zeros(n, bool)
    held[np.random.default_rng(seed).choice(n, k, replace=False)] = True
    return held


def pair_accuracy(scores: np.ndarray, pairs: PairSet, use: np.ndarray) -> float:
    """Decisive-pair accuracy of a per-model score: i is predicted to win when score_i >= score_j (the reference's
    baseline_comparison rule for every method), scored against target >= 0.5; pairs with an unscored model skipped."""
    s = np.asarray(scores, float)
    ok = use & np.isfinite(s[pairs.i]) & np.isfinite(s[pairs.j])
    if not ok.any():
        return float("nan")
    return float(np.mean((s[pairs.i[ok]] >= s[pairs.j[ok]]) == (pairs.target[ok] >= 0.5)))


def subset_pairs(pairs: PairSet, keep: np.ndarray) -> PairSet:
    """The pairs where ``keep`` is True, flags and thresholds unchanged (thresholds pooled over all data)."""
    return replace(pairs, i=pairs.i[keep], j=pairs.j[keep], prompt=pairs.prompt[keep], z_gap=pairs.z_gap[keep],
                   target=pairs.target[keep], tie=pairs.tie[keep], both_bad=pairs.both_bad[keep])


def comparison_refits(methods, splits: int, *, warm: bool = True) -> dict:
    """Which fits :func:`heldout_comparison` makes (its run's ``metrics.refits``, issue 26): the full-data references
    and, per split, one fit per method, with how each starts."""
    methods = list(methods)
    static = "static_2pl" in methods or "dualeval" in methods
    arena = "arena_bt" in methods or "arena_avg_reward" in methods
    per_split = {}
    if "static_2pl" in methods or ("dualeval" in methods and warm):
        per_split["static_2pl"] = ("warm-started from the full-data static 2PL" if warm
                                   else "from the observed rates") + (
            "" if "static_2pl" in methods else " (DualEval's start only)")
    if "dualeval" in methods:
        per_split["dualeval"] = ("joint fit warm-started from the split's static 2PL (abilities, static items)"
                                 if warm else "joint fit from the observed rates")
    if "arena_bt" in methods:
        per_split["arena_bt"] = "Bradley-Terry fit on the training prompts' pairs"
    if "arena_avg_reward" in methods:
        per_split["arena_avg_reward"] = "no fit (mean reward)"
    reference = [name for name, have in (("static_2pl", static), ("arena_bt", arena)) if have]
    fits = len(reference) + splits * sum(1 for m in per_split if m != "arena_avg_reward")
    return {"reference_fits": reference, "splits": int(splits), "per_split": per_split,
            "joint_fits": splits if "dualeval" in methods else 0,
            "static_2pl_fits": (1 if static else 0) + (splits if "static_2pl" in per_split else 0),
            "fits": fits}


def heldout_comparison(static: StaticData | None, arena: ArenaData | None, config: JointConfig = JointConfig(), *,
                       splits: int = 3, holdout: float = 0.2, seed: int = 0, external: np.ndarray | None = None,
                       methods=METHODS, progress: Progress = no_progress,
                       cancel: threading.Event | None = None, warm: bool = True,
                       timings: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 2 of paper 000: every method trained on 80 % of the questions and scored on the rest.

    Per split ``s`` (seed + s) the static items are split with that seed and the arena prompts with seed + s + 1
    (the reference's baseline_comparison), ``holdout`` of each held out.  Pair flags and thresholds come from all
    data.  Methods: DualEval joint (the config, mode joint), static-only 2PL, arena Bradley-Terry and average
    reward, each trained on the training questions only.  Columns: ``pair_acc`` (held-out decisive-pair accuracy,
    :func:`pair_accuracy`), ``static_rho`` (Spearman with the full-data static-only 2PL), ``arena_rho`` (with the
    full-data arena BT), ``external_rho`` (with ``external``, Table 2's Public rho).  Returns (per-split rows,
    the table: mean and sd over splits per method, in the paper's row order).

    ``warm`` (issue 26): each split's static 2PL starts from the full-data static 2PL (fitted anyway for Static
    rho; block-coordinate Newton reaches the same optimum, as the held-out refits of :func:`heldout_calibration`),
    and the split's DualEval joint fit starts from that split's static 2PL (its abilities and static items; the
    arena prompts and gamma start where a cold fit starts them) instead of from the observed rates.  The joint
    objective is nonconvex, so this is checked, not assumed: on the simulated 1,000 x 14,000 bench workspace the warm
    joint fit ends at a *lower* objective than the cold one (1.149376 vs 1.149436: the cold sweeps stop on the
    relative-decrease test in a slow tail), abilities within 4e-3, Spearman with the cold fit 0.9999996, no decisive
    pair reordered, in 65 passes instead of 147 (the three splits: 193 passes instead of 454; the table the same but
    DualEval's Static rho, 1.3e-5 higher); at 5,000 x 14,000 533 passes instead of 763 (per split 110 / 332 / 91
    against 342 / 222 / 199: a warm start is not faster on every split; where both were compared the warm fit ends
    lower, split 1 by 4.6e-5, Spearman with the cold fit 0.99999998); tests/unit/test_evaluate.py holds the table to
    the cold one's.
    ``warm=False``: every fit from the observed rates, as before.  ``timings`` (a dict, filled in): seconds of the
    reference fits and per method over the splits, and ``dualeval_passes`` (each split's joint fit's passes over the
    static cells, as its provenance counts them)."""
    if arena is None and static is None:
        raise EngineError("the method comparison needs static results, arena rewards or both")
    if not 0 < holdout < 1 or splits < 1:
        raise EngineError("holdout must be in (0, 1) and splits >= 1")
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise EngineError(f"unknown methods {sorted(unknown)}; choose from {METHODS}")
    methods = [m for m in METHODS if m in methods
               and (static is not None or m not in ("dualeval", "static_2pl"))
               and (arena is not None or m not in ("arena_bt", "arena_avg_reward"))]
    if static is None or arena is None:
        methods = [m for m in methods if m != "dualeval"]
    arena_cfg = replace(config, mode="arena")
    pairs = build_pairs(arena, config) if arena is not None else None
    timings = {} if timings is None else timings
    lap = time.perf_counter()
    full_static = fit_joint(static, None, replace(config, mode="static"), cancel=cancel) \
        if static is not None else None
    ref_static = full_static.theta if full_static is not None else None
    ref_bt = fit_bradley_terry(arena, arena_cfg, pairs=pairs).scores if arena is not None else None
    timings["reference_fits_s"] = round(time.perf_counter() - lap, 4)
    rows = []
    passes = timings.setdefault("dualeval_passes", [])  # per split: passes over the static cells (provenance)
    total = splits * len(methods)
    for s in range(splits):
        held_s = question_split(static.shape[1], holdout, seed + s) if static is not None else None
        held_a = question_split(arena.shape[1], holdout, seed + s + 1) if arena is not None else None
        smask = static.mask & ~held_s[None, :] if static is not None else None
        keep = ~held_a[pairs.prompt] if pairs is not None else None
        test = (held_a[pairs.prompt] & pairs.decisive) if pairs is not None else None
        scores: dict = {}
        split_static = None
        # the static 2PL first: DualEval's joint fit starts from its optimum (theta, static items)
        for k, method in enumerate(sorted(methods, key=lambda m: m != "static_2pl")):
            check_cancel(cancel)
            progress(s * len(methods) + k, total, f"split {s + 1}/{splits}: {METHOD_LABELS[method]}")
            lap = time.perf_counter()
            if method == "dualeval":
                if warm and split_static is None:  # a joint-only comparison: the static fit is its start
                    split_static = fit_joint(static, None, replace(config, mode="static"), static_mask=smask,
                                             cancel=cancel, init=full_static)
                init = None if not warm else {"theta": split_static.theta, "b_static": split_static.b_static,
                                              "k_static": split_static.k_static}
                fit = fit_joint(static, arena, replace(config, mode="joint"), pairs=pairs, pair_keep=keep,
                                static_mask=smask, cancel=cancel, init=init)
                score = fit.theta
                passes.append(fit.provenance.get("passes"))
            elif method == "static_2pl":
                split_static = fit_joint(static, None, replace(config, mode="static"), static_mask=smask,
                                         cancel=cancel, init=full_static if warm else None)
                score = split_static.theta
            elif method == "arena_bt":
                score = fit_bradley_terry(arena, arena_cfg, pairs=subset_pairs(pairs, keep)).scores
            else:
                score = average_reward(ArenaData(np.where(held_a[None, :], np.nan, arena.rewards))).scores
            timings[f"{method}_s"] = round(timings.get(f"{method}_s", 0.0) + time.perf_counter() - lap, 4)
            scores[method] = score
        for method in methods:
            score = scores[method]
            rows.append({"split": s, "method": method,
                         "pair_acc": pair_accuracy(score, pairs, test) if pairs is not None else float("nan"),
                         "static_rho": spearman(score, ref_static) if ref_static is not None else float("nan"),
                         "arena_rho": spearman(score, ref_bt) if ref_bt is not None else float("nan"),
                         "external_rho": spearman(score, external) if external is not None else float("nan"),
                         "heldout_pairs": int(test.sum()) if test is not None else 0})
    progress(total, total, "method comparison done")
    raw = pd.DataFrame(rows)
    cols = ["pair_acc", "static_rho", "arena_rho", "external_rho"]
    agg = raw.groupby("method", sort=False)[cols].agg(["mean", "std"])
    table = pd.DataFrame({"method": [METHOD_LABELS[m] for m in agg.index]})
    for c in cols:
        table[c] = agg[(c, "mean")].to_numpy()
        table[c + "_sd"] = agg[(c, "std")].to_numpy()
    if external is None:
        table = table.drop(columns=["external_rho", "external_rho_sd"])
    return raw, table


# ------------------------------------------------------------------------------ Appendix I pair-treatment ablation
ABLATIONS = (  # (name, both-bad loss, both-bad flags, tie filter)
    ("Full DualEval", True, True, True),
    ("No both-bad loss", False, True, True),
    ("No both-bad filtering", False, False, True),
    ("No tie filter", True, True, False),
    ("No both-bad / no tie", False, False, False),
)


def pair_treatment_ablation(static: StaticData | None, arena: ArenaData, config: JointConfig = JointConfig(), *,
                            holdout: float = 0.2, seed: int = 0, progress: Progress = no_progress,
                            cancel: threading.Event | None = None) -> pd.DataFrame:
    """Appendix I / Table 5: refit with each pair treatment and score on one held-out pair set built with the full
    configuration's thresholds.

    Variants: both-bad pairs in the both-bad loss (full), dropped (``lambda_bb = 0``), or pooled with the decisive
    pairs in the preference BCE (no both-bad filtering); ties dropped (full) or kept in the BCE with their soft
    target (no tie filter; equal-reward pairs then enter with target 0.5).  ``pair_acc``: held-out decisive pairs
    (full flags), predicted by ``mu >= 0.5``; ``bb_auc``: AUROC of ``1 - min(p_i, p_j)`` for held-out both-bad vs
    other held-out non-tie pairs (does the fit know where both responses are bad)."""
    from benchloupe.engine.joint.fitmetrics import pair_probabilities as _mu
    from benchloupe.engine.stats import auroc

    if arena is None:
        raise EngineError("the pair-treatment ablation needs arena rewards")
    mode = "joint" if static is not None else "arena"
    pairs = build_pairs(arena, replace(config, mode=mode))
    test = np.random.default_rng(seed).random(len(pairs)) < holdout
    keep = ~test
    eval_dec = test & pairs.decisive
    eval_nt = test & ~pairs.tie
    rows = []
    for k, (name, bb_loss, bb_flags, tie_filter) in enumerate(ABLATIONS):
        check_cancel(cancel)
        progress(k, len(ABLATIONS), f"pair-treatment ablation: {name}")
        var = replace(pairs, tie=pairs.tie if tie_filter else np.zeros(len(pairs), bool),
                      both_bad=pairs.both_bad if bb_flags else np.zeros(len(pairs), bool))
        cfg = replace(config, mode=mode, lambda_bb=config.lambda_bb if bb_loss else 0.0)
        res = fit_joint(static, arena, cfg, pairs=var, pair_keep=keep, cancel=cancel)
        mu = _mu(res, pairs)
        P = res.p_arena()
        lo = np.minimum(P[pairs.i, pairs.prompt], P[pairs.j, pairs.prompt])
        ok = eval_dec & np.isfinite(mu)
        rows.append({"variant": name, "bb_loss": bb_loss, "bb_filter": bb_flags, "tie_filter": tie_filter,
                     "pair_acc": float(np.mean((mu[ok] >= 0.5) == (pairs.target[ok] >= 0.5))),
                     "bb_auc": auroc(1 - lo[eval_nt], pairs.both_bad[eval_nt]),
                     "heldout_pairs": int(ok.sum())})
    progress(len(ABLATIONS), len(ABLATIONS), "pair-treatment ablation done")
    return pd.DataFrame(rows)


# ------------------------------------------------------------------- Appendices F and C: reward-model agreement
def cross_reward_agreement(results: dict[str, JointResult]) -> pd.DataFrame:
    """Appendix F: for every pair of fits of the same data under different reward models, Spearman of the model
    abilities and of the item parameters (arena b and log a; static b and log a when the fits are joint)."""
    names = list(results)
    rows = []
    for x in range(len(names)):
        for y in range(x + 1, len(names)):
            r1, r2 = results[names[x]], results[names[y]]
            row = {"reward_model_a": names[x], "reward_model_b": names[y],
                   "spearman_theta": spearman(r1.theta, r2.theta),
                   "spearman_b_arena": spearman(r1.b_arena, r2.b_arena),
                   "spearman_log_a_arena": spearman(r1.k_arena, r2.k_arena)}
            if len(r1.b_static) and np.isfinite(r1.b_static).any():
                row["spearman_b_static"] = spearman(r1.b_static, r2.b_static)
                row["spearman_log_a_static"] = spearman(r1.k_static, r2.k_static)
            rows.append(row)
    return pd.DataFrame(rows)


def preference_agreement(rewards: np.ndarray, model_a: np.ndarray, model_b: np.ndarray, prompt: np.ndarray,
                         prob_a: np.ndarray) -> dict:
    """Appendix C: how often a reward model's scores agree with human pairwise preferences on the same prompt.

    Over preference rows with a winner (``prob_a != 0.5``) where both models have a reward on the prompt: the
    share where the higher reward belongs to the preferred model (equal rewards count one half).  ``n`` rows
    scored, ``ties_skipped`` human ties, ``missing`` rows without both rewards."""
    ra = rewards[model_a, prompt]
    rb = rewards[model_b, prompt]
    have = np.isfinite(ra) & np.isfinite(rb)
    decided = prob_a != 0.5
    use = have & decided
    if not use.any():
        return {"agreement": float("nan"), "n": 0, "ties_skipped": int((~decided).sum()),
                "missing": int((~have).sum())}
    human_a = prob_a[use] > 0.5
    diff = ra[use] - rb[use]
    score = np.where(diff == 0, 0.5, ((diff > 0) == human_a).astype(float))
    return {"agreement": float(score.mean()), "n": int(use.sum()), "ties_skipped": int((have & ~decided).sum()),
            "missing": int((~have).sum())}
