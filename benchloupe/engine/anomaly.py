"""Residual anomaly detection (paper 000, section 4.3; metrics of Appendix K).

* Static residual ``r = (y - p) / sqrt(p (1 - p) + 1e-6)`` with p clipped to [1e-6, 1 - 1e-6] (A.5); for a binomial
  cell (y successes of n trials) ``r = (y - n p) / sqrt(n p (1 - p) + 1e-6)`` (issue 14, fix 1).  p is the fit's
  prediction, which includes the items' known chance level c (``p = c + (1 - c) sigmoid(.)``) when the data carry
  one: a lucky guess on a four-way item then has p >= .25 and a residual of at most sqrt(3), not the dozens a 2PL
  gives a weak model's success on a hard item (guessing-aware detection).
* Arena residual of (model i, prompt q): the mean over i's decisive opponents j of ``sigmoid(z_i - z_j) - mu_ijq``.
* Synthetic contamination (A.5): static candidates are failed cells with the lowest model-accuracy x item-accuracy
  (pool = 30 % of all observed cells), flipped 0 -> 1; arena candidates are the cells in the bottom 30 % of z,
  which get z += 2.0 (not re-standardised; pairs and thresholds rebuilt).  ``ceil(rate * N_all)`` injections at
  rates 0.5/1/2/5 %, seeds 0..4 (arena seeds offset by 104729 as in the reference).
* Detectors: "clean_reference" scores the contaminated data against a fit on the clean data (the paper's
  operational setting); "contaminated_fit" refits on the contaminated data.  The score is the signed residual
  (positive = unexpected success); AUROC (ties halved) and AUPRC (average precision) over all observed cells.
* Item level (A.5, Fig. 3 / App. K): an item (arena: prompt) is positive when any of its cells is injected, its score
  is the maximum of its cells' scores; AUROC/AUPRC over items, and precision@k / recall@k with k = the number of
  injected cells (cell level) or of contaminated items (item level).
* Candidates for triage: static cells with |r| above the threshold (3.5, Table 8).  Arena residuals are bounded
  probabilities, so arena cells are flagged when their residual, divided by the standard deviation of all arena
  residuals, exceeds the threshold (our choice; the paper gives no arena threshold).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.special import expit

from benchloupe.engine import replicates
from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress, thread_pool
from benchloupe.engine.joint import (
    ArenaData,
    JointConfig,
    JointResult,
    PairSet,
    StaticData,
    build_pairs,
    fit_abilities,
    fit_joint,
    standardise_rewards,
)
from benchloupe.engine.joint.subsets import observed_rate, trials
from benchloupe.engine.stats import auprc, auroc

RATES = (0.005, 0.01, 0.02, 0.05)
SEEDS = (0, 1, 2, 3, 4)
ARENA_SEED_OFFSET = 104729


def static_residuals(p: np.ndarray, y: np.ndarray, mask: np.ndarray, trials: np.ndarray | None = None) -> np.ndarray:
    """Standardised static residuals (NaN where unobserved); ``trials`` makes ``y`` binomial successes."""
    p = np.clip(p, 1e-6, 1 - 1e-6)
    n = 1.0 if trials is None else np.asarray(trials, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (y - n * p) / np.sqrt(n * p * (1 - p) + 1e-6)
    return np.where(mask, r, np.nan)





def arena_residuals(result: JointResult, pairs: PairSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-cell mean of target - mu over decisive opponents; also the mean mu and mean target (NaN: no opponent)."""
    n_models, n_prompts = pairs.z.shape
    P = result.p_arena()
    dec = pairs.decisive
    i, j, q = pairs.i[dec], pairs.j[dec], pairs.prompt[dec]
    mu = expit(result.gamma * (P[i, q] - P[j, q]))
    t = pairs.target[dec]
    size = n_models * n_prompts
    ci, cj = i * n_prompts + q, j * n_prompts + q
    cnt = np.bincount(ci, minlength=size) + np.bincount(cj, minlength=size)

    def mean(vi, vj):
        tot = np.bincount(ci, vi, size) + np.bincount(cj, vj, size)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(cnt > 0, tot / cnt, np.nan).reshape(n_models, n_prompts)

    return mean(t - mu, mu - t), mean(mu, 1 - mu), mean(t, 1 - t)


@dataclass
class Residuals:
    """Static residuals (models x items) and arena residuals (models x prompts); None when a source is absent."""

    static: np.ndarray | None
    arena: np.ndarray | None
    static_expected: np.ndarray | None = None
    arena_expected: np.ndarray | None = None
    arena_observed: np.ndarray | None = None


def residuals(result: JointResult, static: StaticData | None, arena: ArenaData | None) -> Residuals:
    """Section 4.3 residuals of the data under a fit."""
    out = Residuals(None, None)
    if static is not None and np.isfinite(result.b_static).any():
        p = result.p_static()
        ok = static.mask & np.isfinite(p)
        out.static = static_residuals(np.nan_to_num(p), static.correct, ok, trials(static))
        out.static_expected = p
    if arena is not None and result.pairs is not None:
        out.arena, out.arena_expected, out.arena_observed = arena_residuals(result, result.pairs)
    return out


def anomaly_candidates(result: JointResult, static: StaticData | None, arena: ArenaData | None,
                       threshold: float = 3.5) -> pd.DataFrame:
    """Cells whose residual exceeds ``threshold`` in absolute value, largest first (see module docstring)."""
    res = residuals(result, None, arena)
    frames = []
    if static is not None and np.isfinite(result.b_static).any():
        frames.append(_static_candidates(result, static, threshold))
    if res.arena is not None:
        sd = float(np.nanstd(res.arena)) or 1.0
        std = res.arena / sd
        m, q = np.nonzero(np.abs(np.nan_to_num(std)) > threshold)
        frames.append(pd.DataFrame({"model_idx": m, "item_idx": q, "source": "arena", "residual": std[m, q],
                                    "expected_p": res.arena_expected[m, q], "observed": res.arena_observed[m, q]}))
    cols = ["model_idx", "item_idx", "source", "residual", "expected_p", "observed"]
    if not frames:
        return pd.DataFrame(columns=cols)
    out = pd.concat(frames, ignore_index=True)
    return out.reindex(out["residual"].abs().sort_values(ascending=False).index).reset_index(drop=True)[cols]


Z_MARGIN = 1e-3  # slack of the z bounds of _z_bounds: far above the rounding of p, the clip and the residual


def _z_bounds(threshold: float, chance: np.ndarray | None, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """Per item, ``(lo, hi)``: a 0/1 cell whose ``z = a (theta - b)`` lies within ``[lo, hi]`` cannot have a
    standardised residual above ``threshold`` in absolute value (issue 26: 92 % of the 70 M cells of the bench
    workspace are decided by this one comparison; the residual is computed for the rest only).

    Why: with p clipped to pc, ``|r| = |y - pc| / sqrt(pc (1 - pc) + 1e-6) < max(pc, 1 - pc) / sqrt(pc (1 - pc))``
    for y in {0, 1}, which is ``sqrt(odds)`` or ``sqrt(1 / odds)``; so ``|r| > T`` needs ``|logit pc| > L = log T^2``,
    i.e. ``pc < expit(-L)`` or ``pc > expit(L)``, and the clip only moves p towards 1/2 within those bounds, so
    the same holds for p. With a chance level c, ``p = c + (1 - c) s`` with ``s = expit(z)`` increasing in z:
    ``s < (expit(-L) - c) / (1 - c)`` or ``s > (expit(L) - c) / (1 - c)``, whose logits bound z. Each bound is
    moved out by :data:`Z_MARGIN`; with ``T <= 1`` (L <= 0) nothing is excluded."""
    L = 2.0 * math.log(threshold)
    if not L > Z_MARGIN:
        return np.full(n_items, np.inf), np.full(n_items, -np.inf)
    c = np.zeros(n_items) if chance is None else np.asarray(chance, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        s_lo = (expit(-L) - c) / (1.0 - c)
        s_hi = (expit(L) - c) / (1.0 - c)
        lo = np.log(s_lo) - np.log1p(-s_lo)  # logit; -inf where s_lo <= 0 (no cell below), NaN where c is not
        hi = np.log(s_hi) - np.log1p(-s_hi)
    lo = np.where(np.isnan(lo), np.inf, np.where(s_lo <= 0, -np.inf, lo + Z_MARGIN))
    hi = np.where(np.isnan(hi), -np.inf, np.where(s_hi <= 0, -np.inf, hi - Z_MARGIN))
    return lo, hi


def _zero_one(static: StaticData) -> bool:
    """Every observed cell is 0 or 1 (or between): what the bounds of :func:`_z_bounds` assume of y."""
    y, mask = static.correct, static.mask
    if not y.size:
        return True
    if y.dtype.kind in "iub":
        return bool(y.max() <= 1 and not (mask & (y < 0)).any())
    with np.errstate(invalid="ignore"):
        return bool(not (mask & ~((y >= 0) & (y <= 1))).any())


CANDIDATE_BLOCK_CELLS = 1 << 18  # cells per block of _static_candidates: its temporaries stay near the cache


def _static_candidates(result: JointResult, static: StaticData, threshold: float) -> pd.DataFrame:
    """The static cells of :func:`anomaly_candidates` (|residual| above ``threshold``, row-major order), computed a
    row block at a time with the cell arithmetic of :func:`residuals` (the same values, bit for bit) but without
    its models x items float64 matrices: p, the residuals and the rates of 70 M cells were ~2.8 GB (issue 26).

    For 0/1 cells, ``z = a (theta - b)`` of every cell is compared with the bounds of :func:`_z_bounds`, and p and
    the residual computed (the same elementwise operations, on the cells gathered) only where the residual could
    exceed the threshold; binomial cells take the whole computation. Blocks run on the usable cores (numpy and
    scipy's expit release the GIL) and are joined in order. tests/unit/test_anomaly.py checks the candidates are
    those of the whole-matrix computation, bit for bit."""
    theta, b, a, chance = result.theta, result.b_static, result.a_static, result.chance_static
    tri = trials(static)
    n_models, n_items = static.shape
    bounds = _z_bounds(threshold, chance, n_items) if tri is None and _zero_one(static) else None
    step = max(1, CANDIDATE_BLOCK_CELLS // max(1, n_items))

    def block(r0: int):
        sl = slice(r0, min(r0 + step, n_models))
        z = a[None, :] * (theta[sl, None] - b[None, :])
        if bounds is None:
            m, q = np.nonzero(static.mask[sl])
        else:
            m, q = np.nonzero(((z < bounds[0]) | (z > bounds[1])) & static.mask[sl])
        p = expit(z[m, q])
        if chance is not None:
            cq = chance[q]
            p = cq + (1.0 - cq) * p
        ok = np.isfinite(p)
        n = None if tri is None else tri[sl][m, q]
        y_int = static.correct[sl][m, q]
        r = static_residuals(np.nan_to_num(p), y_int, ok, n)
        keep = np.flatnonzero(np.abs(np.nan_to_num(r)) > threshold)
        m, q = m[keep], q[keep]
        y = y_int[keep].astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            obs = y if n is None else y / np.maximum(n[keep], 1)
        return m + r0, q, r[keep], p[keep], obs

    starts = range(0, n_models, step)
    parts = list(thread_pool("anomaly").map(block, starts)) if len(starts) > 1 else [block(0)] if n_models else []
    cols = list(zip(*parts)) if parts else [[] for _ in range(5)]
    out = [np.concatenate(c) if len(c) else np.zeros(0) for c in cols]
    return pd.DataFrame({"model_idx": out[0].astype(np.int64), "item_idx": out[1].astype(np.int64),
                         "source": "static", "residual": out[2], "expected_p": out[3], "observed": out[4]})


# --------------------------------------------------------------------------------------- contamination protocol
def static_candidates(static: StaticData, pool_fraction: float = 0.30) -> np.ndarray:
    """Flat indices of failed cells (rate below 1/2: the 0 cells of 0/1 data) sorted by model accuracy x item
    accuracy, first round(pool * N_all)."""
    m = static.mask
    y = observed_rate(static)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc_m = np.nan_to_num((y * m).sum(1) / m.sum(1))
        acc_q = np.nan_to_num((y * m).sum(0) / m.sum(0))
    fail = np.flatnonzero((m & (y < 0.5)).ravel())
    key = (acc_m[:, None] * acc_q[None, :]).ravel()[fail]
    n_pool = min(len(fail), int(round(pool_fraction * m.sum())))
    return fail[np.argsort(key, kind="stable")[:n_pool]]


def precision_at_k(scores: np.ndarray, labels: np.ndarray, k: int) -> tuple[float, float]:
    """Precision and recall among the ``k`` highest scores (stable order; NaN scores last)."""
    if k <= 0 or labels.sum() == 0:
        return float("nan"), float("nan")
    top = np.argsort(-np.nan_to_num(scores, nan=-np.inf), kind="stable")[:k]
    hits = int(labels[top].sum())
    return hits / k, hits / int(labels.sum())


def detection_metrics(score: np.ndarray, labels: np.ndarray, cells: np.ndarray, n_cols: int) -> dict:
    """Cell-level precision/recall@k and item-level AUROC, AUPRC, precision/recall@k (module docstring).
    ``score`` and ``labels`` are flat over the models x items grid, ``cells`` the observed flat indices."""
    s, y = score[cells], labels[cells]
    p_cell, r_cell = precision_at_k(s, y, int(y.sum()))
    item = cells % n_cols
    item_score = np.full(n_cols, -np.inf)
    np.maximum.at(item_score, item, np.nan_to_num(s, nan=-np.inf))
    item_pos = np.zeros(n_cols, bool)
    item_pos[item[y]] = True
    seen = np.zeros(n_cols, bool)
    seen[item] = True
    isc, ipos = item_score[seen], item_pos[seen]
    p_item, r_item = precision_at_k(isc, ipos, int(ipos.sum()))
    return {"precision_at_k": p_cell, "recall_at_k": r_cell, "item_auroc": auroc(isc, ipos),
            "item_auprc": auprc(isc, ipos), "item_precision_at_k": p_item, "item_recall_at_k": r_item,
            "n_items_contaminated": int(ipos.sum())}


def _n_inject(rate: float, n_all: int, n_cand: int) -> int:
    n = math.ceil(rate * n_all)
    return min(max(n, 1 if rate > 0 else 0), n_cand)


def inject_static(static: StaticData, cells: np.ndarray) -> StaticData:
    """The data with ``cells`` (flat indices) contaminated: a contaminated cell is always solved (all its trials)."""
    y = static.correct.astype(np.int32).ravel()
    t = trials(static)
    y[cells] = 1 if t is None else np.asarray(t).ravel()[cells]
    return replace(static, correct=y.reshape(static.shape))


def _injections(cand: np.ndarray, rate: float, n_all: int, seed: int) -> np.ndarray:
    """The protocol's injected cells at ``rate`` for ``seed`` (static seeds as given)."""
    return np.random.default_rng(seed).choice(cand, _n_inject(rate, n_all, len(cand)), replace=False)


ORACLE_SEED_OFFSET = 7919  # the simulated data of seed s are drawn from Generator(s + 7919): apart from injection's


def simulate_static(static: StaticData, p: np.ndarray, seed: int) -> StaticData:
    """0/1 (or binomial) responses drawn from probabilities ``p`` on the observed cells of ``static``, trials and
    chance kept."""
    rng = np.random.default_rng(seed + ORACLE_SEED_OFFSET)
    pp = np.clip(np.nan_to_num(p), 0.0, 1.0)
    t = trials(static)
    y = rng.binomial(np.where(static.mask, 1 if t is None else t, 0), pp).astype(np.int32)
    return replace(static, correct=np.where(static.mask, y, 0).astype(np.int32))


def oracle_ceiling(static: StaticData, p_true: np.ndarray, *, refits: dict | None = None, rates=RATES,
                   seeds=SEEDS, pool_fraction: float = 0.30, cancel: threading.Event | None = None) -> pd.DataFrame:
    """How well a cell-level detector can do on this benchmark (issues 23, 32): the section 4.3 protocol on data
    simulated from ``p_true`` (the probabilities of a model that fits the data, chance levels included), scored
    with ``p_true`` itself and, for each of ``refits`` (name -> ``fn(simulated clean data) -> p``), with a fit of
    the simulated clean data: the clean-reference detector as the run makes it, on data that follow the model.

    One simulated matrix per seed (the same observed cells and trials), candidates and injections drawn from it as
    :func:`contamination_experiment` draws them.  The true probabilities alone are no bound for the protocol's
    detector: a clean fit has seen the injected cells as failures, so its p there sits below the truth and its
    residuals find them a little better (.01 on 32 items); hence each row's ``auroc`` and ``auprc`` are the best
    of the scorers on that row (``auroc_true_p``, ``auroc_<name>`` beside them), and :func:`detection_metrics`
    are those of the scorer with the best AUROC (``scorer``).  An injected success where p is near its chance
    level c scores like a guess the model could have made, so under guessing no score reaches the paper's .995.
    One row per (rate, seed)."""
    rows = []
    cells = np.flatnonzero(static.mask.ravel())
    n_all = len(cells)
    pt = np.nan_to_num(p_true)
    for seed in seeds:
        check_cancel(cancel)
        sim = simulate_static(static, p_true, seed)
        cand = static_candidates(sim, pool_fraction)
        if len(cand) == 0:
            continue
        scorers = {"true_p": pt, **{name: np.nan_to_num(fn(sim)) for name, fn in (refits or {}).items()}}
        for rate in rates:
            inj = _injections(cand, rate, n_all, seed)
            data = inject_static(sim, inj)
            labels = np.zeros(static.mask.size, bool)
            labels[inj] = True
            row: dict = {"rate": rate, "seed": seed, "n_injected": len(inj)}
            best = None
            for name, p in scorers.items():
                score = static_residuals(p, data.correct, data.mask, trials(static)).ravel()
                auc, ap = auroc(score[cells], labels[cells]), auprc(score[cells], labels[cells])
                row[f"auroc_{name}"], row[f"auprc_{name}"] = auc, ap
                if best is None or auc > best[1]:
                    best = (name, auc, score)
            row.update({"auroc": max(row[f"auroc_{n}"] for n in scorers),
                        "auprc": max(row[f"auprc_{n}"] for n in scorers), "scorer": best[0],
                        **detection_metrics(best[2], labels, cells, n_cols=static.shape[1])})
            rows.append(row)
    return pd.DataFrame(rows)


def contamination_experiment(static: StaticData | None, arena: ArenaData | None,
                             config: JointConfig = JointConfig(), *, target: str = "static", rates=RATES,
                             seeds=SEEDS, pool_fraction: float = 0.30, boost: float = 2.0,
                             detectors=("clean_reference", "contaminated_fit"), clean: JointResult | None = None,
                             progress: Progress = no_progress,
                             cancel: threading.Event | None = None) -> pd.DataFrame:
    """Section 4.3 synthetic protocol; one row per (rate, seed, detector) with cell-level AUROC and AUPRC."""
    if target not in ("static", "arena"):
        raise EngineError("target must be 'static' or 'arena'")
    if target == "static" and static is None:
        raise EngineError("static contamination needs static data")
    if target == "arena" and arena is None:
        raise EngineError("arena contamination needs arena data")
    clean = clean or fit_joint(static, arena, config, cancel=cancel)
    z = obs = None
    if target == "static":
        cand = static_candidates(static, pool_fraction)
        n_all = int(static.mask.sum())
    else:
        z = standardise_rewards(arena.rewards)
        obs = np.flatnonzero(np.isfinite(z).ravel())
        zo = z.ravel()[obs]
        cand = obs[zo <= np.quantile(zo, pool_fraction)]
        n_all = len(obs)
    if len(cand) == 0:
        raise EngineError("no candidate cells for injection (no failures / rewards); nothing to contaminate")
    shared = (static, arena, config, clean, target, cand, n_all, z, obs, boost, tuple(detectors))
    check_cancel(cancel)
    parts = replicates.run(_contamination_rows, [(r, s) for r in rates for s in seeds], shared, progress=progress,
                           cancel=cancel, label=f"contamination {target} injection")
    return pd.DataFrame([row for part in parts for row in part])


def _contamination_rows(shared, job) -> list[dict]:
    """One (rate, seed) of the synthetic protocol (a replicate: its injections come from its own seed), one row
    per detector."""
    static, arena, config, clean, target, cand, n_all, z, obs, boost, detectors = shared
    rate, seed = job
    n_inj = _n_inject(rate, n_all, len(cand))
    inj = _injections(cand, rate, n_all, seed if target == "static" else seed + ARENA_SEED_OFFSET)
    rows = []
    for det in detectors:
        if target == "static":
            t = trials(static)
            data = inject_static(static, inj)  # a contaminated cell is always solved
            fit = clean if det == "clean_reference" else fit_joint(data, arena, config)
            score = static_residuals(np.nan_to_num(fit.p_static()), data.correct, data.mask, t).ravel()
            cells = np.flatnonzero(static.mask.ravel())
        else:
            zc = z.copy().ravel()
            zc[inj] += boost
            zc = zc.reshape(z.shape)
            pairs = build_pairs(arena, config, z=zc)
            fit = replace(clean, pairs=pairs) if det == "clean_reference" else \
                fit_joint(static, arena, config, pairs=pairs)
            score = np.nan_to_num(arena_residuals(fit, pairs)[0]).ravel()
            cells = obs
        labels = np.zeros(score.size, bool)
        labels[inj] = True
        rows.append({"target": target, "rate": rate, "seed": seed, "detector": det, "n_injected": n_inj,
                     "auroc": auroc(score[cells], labels[cells]), "auprc": auprc(score[cells], labels[cells]),
                     **detection_metrics(score, labels, cells, n_cols=static.shape[1] if target == "static"
                                         else z.shape[1])})
    return rows


# ------------------------------------------------------------------------------------------------- screening
@dataclass
class ScreenResult:
    """A new model's ability under frozen items and its unexpected cells (``item_idx``, residual, expected_p,
    observed), largest |residual| first."""

    theta: float
    residuals: np.ndarray
    candidates: pd.DataFrame


def screen_model(frozen: JointResult, new_correct: np.ndarray, new_mask: np.ndarray, *,
                 threshold: float = 3.5, new_trials: np.ndarray | None = None) -> ScreenResult:
    """Screen newly imported static results of one model against a frozen clean fit (section 4.3, operational
    setting): fit its ability with every item frozen, then flag cells with |standardised residual| > threshold.
    ``new_trials`` makes ``new_correct`` binomial successes; the frozen fit's ``chance_static`` (if any) is the
    items' guessing floor."""
    y = np.asarray(new_correct, float).reshape(1, -1)
    m = np.asarray(new_mask, bool).reshape(1, -1)
    if y.shape[1] != len(frozen.b_static):
        raise EngineError(f"the new row has {y.shape[1]} items but the frozen fit has {len(frozen.b_static)}")
    m = m & np.isfinite(frozen.b_static)[None, :]
    if new_trials is not None:
        t = np.asarray(new_trials).reshape(1, -1)
        m = m & (t > 0)
    if not m.any():
        raise EngineError("the new model has no observed cells on items of the frozen fit")
    data = StaticData(np.where(m, y, 0).astype(np.int32), m,
                      trials=None if new_trials is None else np.where(m, t, 0), chance=frozen.chance_static)
    cfg = replace(frozen.config, mode="static")
    theta = float(fit_abilities(data, None, frozen, cfg)[0])
    p = replace(frozen, theta=np.array([theta])).p_static()[0]
    r = static_residuals(np.nan_to_num(p), data.correct[0], m[0], None if new_trials is None else data.trials[0])
    flag = np.flatnonzero(np.abs(np.nan_to_num(r)) > threshold)
    flag = flag[np.argsort(-np.abs(r[flag]), kind="stable")]
    cand = pd.DataFrame({"item_idx": flag, "residual": r[flag], "expected_p": p[flag],
                         "observed": observed_rate(data)[0, flag]})
    return ScreenResult(theta, r, cand)
