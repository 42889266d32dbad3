"""Item informativeness and benchmark compression (paper 000, section 4.2).

Fisher score per item, in "expected information about the ability vector" units:

* static item: ``S_q = lam_static * mean_i a_q^2 p_iq (1 - p_iq)`` over the fitted models;
* arena prompt: ``S_q = lam_pref * mean_{decisive (i,j)} mu(1-mu) gamma^2 [(a p_i(1-p_i))^2 + (a p_j(1-p_j))^2]``.

Items without data score 0.  Scores are returned concatenated: static items first, then arena prompts.

Subset recovery: for each fraction (the reference's grid, A.4) take ``ceil(frac * N)`` items by a strategy, refit the
abilities with item parameters frozen (:func:`benchloupe.engine.joint.fit_abilities`), and compare with the full-data
ranking by Spearman and Kendall.  Strategies: ``top_fisher``, ``top_sharpness`` (a_q), ``difficulty_matched``
(smallest |b_q - median theta|), ``random`` (seeded uniform subset, same frozen refit), ``random_2pl_bt`` (a
from-scratch static 2PL plus arena Bradley-Terry on the random subset, scored against the full-data DualEval ranking
as the paper's Fig. 2 does; ``baseline_reference="own"`` scores it against the same baseline on all data, as the
reference code does), ``targeted`` (the default selection) and ``targeted_log`` (below).

Targeted selection (beyond the paper).  Top Fisher ranks items by information *averaged* over the models, so on a
leaderboard where most models sit in one ability band it fills the subset with items at that band's difficulty and
leaves the rest of the ranking without information; on real leaderboards it loses to random selection from about
20 % of items upward (docs/DUALEVAL.md).  The targeted strategies build the subset greedily from ``I_i(S)``, model
i's Fisher information about its own ability from the subset S (static ``a^2 p (1-p)`` on the cells it answered;
arena: its share of the decisive-pair information of the prompt), for the models the curator cares about
(weights ``w``: every model, the top N, or an ability range; :func:`target_weights`):

* ``targeted`` minimises ``sum_i w_i f(theta_i)^2 / (tau + I_i(S))``, with f the density of the target abilities:
  a model's rank error is its ability error (posterior variance ``1 / (tau + I_i)``) times the number of models per
  unit of ability around it, so this is the expected squared rank error, i.e. what Spearman recovery measures;
* ``targeted_log`` maximises ``sum_i w_i log(tau + I_i(S))`` (D-optimal over the models, no density weighting).

``tau`` is the prior precision of an ability, ``1 / var(theta)`` over the target models: a model the subset tells
nothing about is still known to lie somewhere in the leaderboard's spread, so its rank error is bounded by that
spread, not infinite.  (Until issue 23 it was a tenth of the mean per-cell information, a prior 10-50 times weaker:
then any item that gives an uncovered model a little information looks almost infinitely valuable, the greedy
covers models instead of separating them, and the first items land next to each other; ARC with chance .25 at
2.5 %: Spearman .807 against random .820, now .890.)

Chance (issue 23).  ``I_i`` is the Fisher information of the model the fit used, the 3PL's
``a^2 ((1 - c) s (1 - s))^2 / (p (1 - p))`` when the items carry a known chance level c (:func:`static_cell_information`;
the 2PL's ``a^2 p (1 - p)`` without one).  The paper's ``a^2 p (1 - p)`` evaluated at the guessing-aware p stays at
``a^2 c (1 - c)`` for a model far below the item, where a success is a guess and the item says nothing: with it the
targeted selection fell to Spearman .74 against random .93 on metabench ARC at 10 % (c = .25).  ``top_fisher`` keeps
the paper's score (:func:`fisher_scores`, the paper's rule, unchanged) and loses to random there; docs/DUALEVAL.md
has the table for every shared multiple-choice set.

Both gains fall as a model's information grows, so the subset spreads over the difficulty range the target
models occupy (stratified by construction) and prefers sharp items within each band.  Both objectives are monotone
submodular, so the lazy greedy is within 1 - 1/e of the optimum, and its order is nested: one greedy pass gives
the subset for every fraction.

Paper vs reference: the reference's CLI default criterion is "effective" a p(1-p) at the median theta; we use the
paper's Fisher score (its ``--selection-criterion fisher`` objective mode).  Its frozen refit runs Adam for 700 epochs
with reg 1e-4 and centres theta without moving b; we minimise the config's objective over theta exactly, uncentred.
How the 2PL and BT scores are combined for ``random_2pl_bt`` is not specified: we average their per-model z-scores.
"""

from __future__ import annotations

import math
import threading
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy.special import expit

from benchloupe.engine import replicates
from benchloupe.engine.common import EngineError, Progress, check_cancel, no_progress
from benchloupe.engine.joint import (
    ArenaData,
    JointConfig,
    JointResult,
    StaticData,
    fit_abilities,
    fit_joint,
    pair_probabilities,
)
from benchloupe.engine.joint.subsets import cell_weight, static_columns
from benchloupe.engine.stats import kendall, spearman

FRACTIONS = (0.025, 0.05, 0.075, 0.10, 0.15, 0.20, 0.30, 0.50, 0.80, 1.00)
STRATEGIES = ("targeted", "targeted_log", "top_fisher", "top_sharpness", "difficulty_matched", "random",
              "random_2pl_bt")
DEFAULT_STRATEGY = "targeted"


def fisher_scores(result: JointResult, static: StaticData | None = None, arena: ArenaData | None = None,
                  config: JointConfig | None = None) -> np.ndarray:
    """Section 4.2 Fisher score of every static item then every arena prompt (0 where an item has no data)."""
    config = config or result.config
    fitted = np.isfinite(result.theta)
    parts = []
    n_static = len(result.b_static)
    if n_static:
        parts.append(np.nan_to_num(config.lambda_static * _mean_static_information(result, fitted)))
    n_arena = len(result.b_arena)
    if n_arena:
        s = np.zeros(n_arena)
        pairs = result.pairs
        if pairs is not None:
            dec = pairs.decisive
            P = result.p_arena()
            q = pairs.prompt[dec]
            pi, pj = P[pairs.i[dec], q], P[pairs.j[dec], q]
            mu = pair_probabilities(result)[dec]
            a = result.a_arena[q]
            info = mu * (1 - mu) * result.gamma ** 2 * ((a * pi * (1 - pi)) ** 2 + (a * pj * (1 - pj)) ** 2)
            cnt = np.bincount(q, minlength=n_arena)
            tot = np.bincount(q, info, n_arena)
            s = np.where(cnt > 0, config.lambda_pref * tot / np.maximum(cnt, 1), 0.0)
        parts.append(np.nan_to_num(s))
    return np.concatenate(parts) if parts else np.zeros(0)


def _mean_static_information(result: JointResult, fitted: np.ndarray) -> np.ndarray:
    """``mean_i a^2 p (1 - p)`` per static item over the ``fitted`` models (p with the fit's chance level), in
    row blocks: the values of the dense expression without its models x items float64 temporaries (issue 26)."""
    theta, b, a = result.theta[fitted], result.b_static, result.a_static
    chance = result.chance_static
    total = np.zeros(len(b))
    step = max(1, (1 << 20) // max(1, len(b)))
    with np.errstate(invalid="ignore"):
        for r0 in range(0, len(theta), step):
            p = expit(a[None, :] * (theta[r0:r0 + step, None] - b[None, :]))
            if chance is not None:
                p = chance + (1.0 - chance) * p
            total += np.sum(p * (1 - p), axis=0)
        return a ** 2 * total / len(theta) if len(theta) else np.full(len(b), np.nan)


def static_cell_information(result: JointResult, rows: slice | None = None) -> np.ndarray:
    """Fisher information about theta_i of one 0/1 response to static item q (models x items), with the item's
    known chance level c: ``p = c + (1 - c) s``, ``s = sigmoid(a (theta - b))``, so
    ``I = (dp/dtheta)^2 / (p (1 - p)) = a^2 ((1 - c) s (1 - s))^2 / (p (1 - p))``.  Without a chance level this is
    the 2PL's ``a^2 p (1 - p)`` (the paper's formula); with one it falls to 0 where ``p`` sinks to the floor c,
    whereas ``a^2 p (1 - p)`` stays at ``a^2 c (1 - c)`` there: a weak model's guess on a hard item tells little
    about its ability, and a selection that counts it as information fills the subset with items no model in
    that band can be told apart on (issue 23). ``rows``: only those models (a block of :func:`information_matrix`)."""
    theta = result.theta if rows is None else result.theta[rows]
    a = result.a_static[None, :]
    s = expit(a * (theta[:, None] - result.b_static[None, :]))
    if result.chance_static is None:
        with np.errstate(invalid="ignore"):
            return np.nan_to_num(a ** 2 * s * (1 - s))
    c = np.asarray(result.chance_static, float)[None, :]
    p = c + (1 - c) * s
    with np.errstate(invalid="ignore", divide="ignore"):
        info = a ** 2 * ((1 - c) * s * (1 - s)) ** 2 / np.maximum(p * (1 - p), 1e-300)
    return np.nan_to_num(info)


def information_matrix(result: JointResult, static: StaticData | None = None, arena: ArenaData | None = None,
                       config: JointConfig | None = None) -> np.ndarray:
    """Per-model Fisher information about its ability from each item (models x [static items, arena prompts]),
    scaled so that its mean over the fitted models is the item's :func:`fisher_scores` score on 0/1 data; a binomial
    cell carries its trials' worth (n a^2 p (1-p))."""
    config = config or result.config
    n_models = len(result.theta)
    fitted = np.isfinite(result.theta)
    n_static, n_arena = len(result.b_static), len(result.b_arena)
    # Column-major: each item's information over the models is contiguous, so targeted_order reads the items as the
    # rows of the transpose without a copy; the static block is filled a block of models at a time (issue 26: the
    # whole-matrix expression held five models x items float64 temporaries, 3 GB at 5,000 x 14,000)
    out = np.zeros((n_models, n_static + n_arena), order="F")
    if n_static:
        step = max(1, (1 << 20) // n_static)
        for r0 in range(0, n_models, step):
            sl = slice(r0, r0 + step)
            info = config.lambda_static * static_cell_information(result, sl)
            if static is not None:
                info = np.nan_to_num(info) * cell_weight(static, sl)
            out[sl, :n_static] = np.nan_to_num(info)
    if n_arena:
        pairs = result.pairs
        if pairs is not None:
            dec = pairs.decisive
            P = result.p_arena()
            q, i, j = pairs.prompt[dec], pairs.i[dec], pairs.j[dec]
            pi, pj = P[i, q], P[j, q]
            mu = pair_probabilities(result)[dec]
            a = result.a_arena[q]
            base = mu * (1 - mu) * result.gamma ** 2
            cnt = np.bincount(q, minlength=n_arena).astype(float)
            scale = config.lambda_pref * fitted.sum() / np.maximum(cnt[q], 1)
            size = n_models * n_arena
            tot = (np.bincount(i * n_arena + q, scale * base * (a * pi * (1 - pi)) ** 2, size)
                   + np.bincount(j * n_arena + q, scale * base * (a * pj * (1 - pj)) ** 2, size))
            out[:, n_static:] = np.nan_to_num(tot.reshape(n_models, n_arena))
    out[~fitted] = 0.0
    return out


def target_weights(theta: np.ndarray, target: str = "all") -> np.ndarray:
    """Weights over models for :func:`targeted_order`: ``"all"`` (every fitted model), ``"top:N"`` (the N highest
    abilities) or ``"theta:LO,HI"`` (models with LO <= theta <= HI)."""
    theta = np.asarray(theta, float)
    ok = np.isfinite(theta)
    spec = str(target).strip()
    if spec == "all":
        w = ok.astype(float)
    elif spec.startswith("top:"):
        try:
            n = int(spec[4:])
        except ValueError:
            raise EngineError(f"target {spec!r}: write top:N with N a whole number, e.g. top:20") from None
        if n < 2:
            raise EngineError(f"target {spec!r}: the top N needs N >= 2 models")
        order = np.argsort(-np.where(ok, theta, -np.inf), kind="stable")[:n]
        w = np.zeros(len(theta))
        w[order] = 1.0
        w[~ok] = 0.0
    elif spec.startswith("theta:"):
        try:
            lo, hi = (float(v) for v in spec[6:].split(","))
        except ValueError:
            raise EngineError(f"target {spec!r}: write theta:LO,HI, e.g. theta:0.5,3") from None
        w = (ok & (theta >= lo) & (theta <= hi)).astype(float)
    else:
        raise EngineError(f"target {spec!r}: choose all, top:N or theta:LO,HI")
    if w.sum() < 1:
        raise EngineError(f"target {spec!r} selects no fitted model")
    return w


def rank_weights(theta: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``w_i f(theta_i)^2`` with f a Gaussian kernel density of the target abilities (Silverman bandwidth): the
    weight of model i's ability variance in the expected squared rank error (:func:`targeted_order`)."""
    theta = np.asarray(theta, float)
    w = np.asarray(weights, float) * np.isfinite(theta)
    t = np.nan_to_num(theta)
    sel = t[w > 0]
    sd = float(np.std(sel)) if len(sel) > 1 else 1.0
    h = 1.06 * (sd or 1.0) * len(sel) ** (-0.2)
    dens = np.zeros(len(t))
    for start in range(0, len(t), 2048):  # blocks: thousands of models x thousands of targets stay small
        d = (t[start:start + 2048, None] - sel[None, :]) / h
        dens[start:start + 2048] = np.exp(-0.5 * d * d).mean(axis=1)
    return w * dens ** 2


def prior_precision(theta: np.ndarray, weights: np.ndarray) -> float:
    """``1 / var(theta)`` over the models with weight > 0 (weighted): the precision of what is known about a
    target model's ability before any item is chosen (module docstring, ``tau``); 1 when it cannot be estimated."""
    theta = np.asarray(theta, float)
    w = np.asarray(weights, float) * np.isfinite(theta)
    if w.sum() <= 0:
        return 1.0
    t = np.nan_to_num(theta)
    mean = float(np.sum(w * t) / w.sum())
    var = float(np.sum(w * (t - mean) ** 2) / w.sum())
    return 1.0 / var if var > 1e-12 else 1.0


_LAZY_FIRST = 8  # stale gains re-evaluated together by targeted_order's first batch of a step


def targeted_order(info: np.ndarray, weights: np.ndarray, eps: float | None = None, *,
                   criterion: str = "log", limit: int | None = None) -> np.ndarray:
    """Greedy (lazy) order of items for the targeted selection (module docstring); the first k items are the
    targeted subset of size k.  ``criterion``: "log" maximises ``sum_i w_i log(eps + I_i(S))``; "rank" minimises
    ``sum_i w_i / (eps + I_i(S))``, the expected squared rank error when ``w`` = :func:`rank_weights` (a model's
    rank error is its ability error times the density of abilities around it).  ``eps`` is the prior precision
    of an ability (:func:`prior_precision`; :func:`selection_order` passes it); None: 1, the precision of the
    fit's unit-scale abilities.  ``limit``: stop after that many items (the order is nested: its first ``limit``
    items are the same; ``compress --validate`` needs 100 of 14,000)."""
    import heapq

    if criterion not in ("log", "rank"):
        raise EngineError(f"criterion must be 'log' or 'rank', got {criterion!r}")
    w = np.asarray(weights, float)
    keep = w > 0
    # items as contiguous rows (items x models): a gain gathers whole rows, not strided columns of every model; the
    # transpose of information_matrix's column-major matrix is that already (no copy when every model counts)
    info = np.asarray(info, float)
    rows = np.ascontiguousarray(info.T if keep.all() else info[keep].T)
    w = w[keep] / w[keep].sum()
    n_items = rows.shape[0]
    if eps is None:
        eps = 1.0
    cur = np.full(rows.shape[1], max(eps, 1e-12))

    def gain(items) -> np.ndarray:
        x = rows[items]  # a copy (fancy index): the gains are computed in it, no temporaries (issue 26)
        if criterion == "log":
            np.divide(x, cur, out=x)
            np.log1p(x, out=x)  # log1p(x / cur)
        else:
            np.add(x, cur, out=x)
            np.divide(1.0, x, out=x)
            np.subtract(1 / cur, x, out=x)  # 1 / cur - 1 / (cur + x)
        return x @ w

    chunk = max(1, (1 << 20) // max(1, rows.shape[1]))  # the first gains a block of items at a time (no copy of all)
    first = np.concatenate([gain(np.arange(q0, min(q0 + chunk, n_items))) for q0 in range(0, n_items, chunk)]) \
        if n_items else np.zeros(0)
    heap = [(-g, q) for q, g in enumerate(first)]
    heapq.heapify(heap)
    stamp = np.zeros(n_items, int)  # stamp[q] == len(order): q's gain in the heap is exact for this step
    order: list[int] = []
    step, batch = -1, 1
    while heap and (limit is None or len(order) < limit):
        if stamp[heap[0][1]] == len(order):  # the best bound is an exact gain: no other item can beat it
            _, q = heapq.heappop(heap)
            order.append(q)
            cur += rows[q]
            continue
        # Re-evaluate the stale bounds at the top in one batch (issue 26: one at a time was ~270,000 small
        # products on a 2,000 x 5,000 compress). A gain only falls as items are added (submodular), so the item
        # taken is still the one whose exact gain tops every other bound, with ties to the smallest index.
        # The batch doubles while a step's top stays stale (8, 16, 32, ... up to a block): a few calls where a step
        # needs many evaluations, and at most 8 wasted where it needs one.
        batch = min(batch * 2, chunk) if step == len(order) else _LAZY_FIRST  # at most a block of 2^20 values
        step = len(order)
        stale: list[int] = []
        while heap and len(stale) < batch and stamp[heap[0][1]] != step:
            stale.append(heapq.heappop(heap)[1])
        stamp[stale] = step
        for q, g in zip(stale, gain(stale)):
            heapq.heappush(heap, (-float(g), q))
    return np.asarray(order, int)


SELECTIONS = ("targeted", "targeted_log", "top_fisher", "top_sharpness")


def select_subset(result: JointResult, static: StaticData | None, arena: ArenaData | None,
                  config: JointConfig | None, strategy: str, fraction: float, *, target: str = "all") -> np.ndarray:
    """Indices (static items first, then arena prompts) of the ``ceil(fraction * N)`` items a deterministic
    strategy selects, in selection order."""
    config = config or result.config
    if not 0 < fraction <= 1:
        raise EngineError(f"fraction must be in (0, 1], got {fraction}")
    if strategy == "top_fisher":
        return top_fisher_subset(fisher_scores(result, static, arena, config), fraction)
    n = len(result.b_static) + len(result.b_arena)
    k = max(1, min(n, math.ceil(fraction * n)))
    if strategy == "top_sharpness":
        return np.argsort(-np.nan_to_num(result.a, nan=-np.inf), kind="stable")[:k]
    if strategy not in ("targeted_log", "targeted"):
        raise EngineError(f"strategy must be one of {', '.join(SELECTIONS)}, got {strategy!r}")
    return selection_order(result, static, arena, config, strategy, target=target)[:k]


def selection_order(result: JointResult, static: StaticData | None, arena: ArenaData | None,
                    config: JointConfig | None, strategy: str, *, target: str = "all",
                    info: np.ndarray | None = None, limit: int | None = None) -> np.ndarray:
    """The nested greedy order of a targeted strategy ("targeted" or "targeted_log"): chance-aware information
    (:func:`information_matrix`, or ``info`` when the caller has it), the ``target`` models' weights, and the
    prior precision of their abilities; its first ``limit`` items only when given."""
    if strategy not in ("targeted", "targeted_log"):
        raise EngineError(f"selection_order is for the targeted strategies, got {strategy!r}")
    config = config or result.config
    info = information_matrix(result, static, arena, config) if info is None else info
    w = target_weights(result.theta, target)
    tau = prior_precision(result.theta, w)
    if strategy == "targeted":
        return targeted_order(info, rank_weights(result.theta, w), tau, criterion="rank", limit=limit)
    return targeted_order(info, w, tau, limit=limit)


STRATEGY_RULES = {
    "targeted": "targeted (default): greedy on the target models' expected squared rank error, chance-aware "
                "information, prior precision 1/var(theta)",
    "targeted_log": "targeted_log: greedy D-optimal sum of log(prior + information) over the target models",
    "top_fisher": "top_fisher: the paper's rule, the highest mean a^2 p(1-p) (section 4.2)",
    "top_sharpness": "top_sharpness: the sharpest items (largest a)",
}


def describe_strategy(strategy: str) -> str:
    """One line naming a selection rule (what the compress summary prints)."""
    return STRATEGY_RULES.get(strategy, strategy)


def mean_information(result: JointResult, static: StaticData | None = None, arena: ArenaData | None = None,
                     config: JointConfig | None = None) -> np.ndarray:
    """Each item's information averaged over the fitted models, chance-aware (:func:`information_matrix`): the
    paper's :func:`fisher_scores` where no item carries a chance level; lower where guessing hides ability."""
    info = information_matrix(result, static, arena, config)
    fitted = np.isfinite(result.theta)
    # the unfitted models' rows are 0: the sum over all rows is the fitted ones' (no copy of the fitted rows)
    return info.sum(axis=0) / fitted.sum() if fitted.any() else np.zeros(info.shape[1])


def random_se(summary: pd.DataFrame) -> pd.Series:
    """Per fraction, the standard error of the random mean's Spearman (sd over the draws / sqrt(draws)); empty
    when the summary has no random rows or no spread columns."""
    rnd = summary[summary["strategy"] == "random"]
    if rnd.empty or "spearman_std" not in rnd or "draws" not in rnd:
        return pd.Series(dtype=float)
    rnd = rnd.set_index("fraction")
    return (rnd["spearman_std"].fillna(0) / np.sqrt(rnd["draws"].clip(lower=1))).astype(float)


NOISE_Z = 1.96  # a margin within 1.96 standard errors of the random mean is "within noise"


def versus_random(summary: pd.DataFrame) -> dict:
    """Per deterministic strategy of a :func:`summarise_recovery` table: its smallest margin over the random mean
    (``min_margin``, at ``at``; Spearman differences to 4 decimals) and the fractions where it is below the random
    mean (``below``: fraction, own, random).  When the summary carries the draws' spread (issue 34.5), every
    ``below`` entry also says whether the loss is within noise (``within_noise``: |margin| < 1.96 x the random
    mean's standard error, ``se``), and ``within_noise`` lists every fraction whose margin, either way, is.
    Empty without a random row."""
    rnd = summary[summary["strategy"] == "random"].set_index("fraction")["spearman_mean"]
    if rnd.empty:
        return {}
    se = random_se(summary)
    out = {}
    for strategy, g in summary[~summary["strategy"].str.startswith("random")].groupby("strategy", sort=False):
        g = g.set_index("fraction")["spearman_mean"]
        common = [f for f in g.index if f in rnd.index and np.isfinite(g[f]) and np.isfinite(rnd[f])]
        if not common:
            continue
        # to 4 decimals: below that, a difference is the refit's tolerance (at 100 % every strategy has every item)
        margin = pd.Series({f: round(float(g[f] - rnd[f]), 4) for f in common})
        worst = float(margin.idxmin())
        below = []
        for f in common:
            if margin[f] < 0:
                row = {"fraction": float(f), "spearman": round(float(g[f]), 4), "random": round(float(rnd[f]), 4)}
                if len(se):
                    row.update({"se": round(float(se[f]), 4), "within_noise": bool(abs(margin[f]) < NOISE_Z * se[f])})
                below.append(row)
        out[strategy] = {"min_margin": float(margin.min()), "at": worst, "below": below}
        if len(se):
            out[strategy]["within_noise"] = [float(f) for f in common
                                             if margin[f] != 0 and abs(margin[f]) < NOISE_Z * se[f]]
    return out


def losses_to_random(versus: dict, strategy: str) -> list[str]:
    """Warnings for the run: the chosen strategy and the paper's top Fisher wherever they fall below the random
    mean (the lines name the fractions and both Spearman values; a loss within the random mean's noise says so)."""
    lines = []
    for name in dict.fromkeys((strategy, "top_fisher")):
        below = versus.get(name, {}).get("below", [])
        if not below:
            continue
        worst = min(below, key=lambda r: r["spearman"] - r["random"])
        fr = ", ".join(f"{r['fraction']:.1%}" + (" (within noise)" if r.get("within_noise") else "") for r in below)
        who = "the paper's top-Fisher rule" if name == "top_fisher" else f"the {name} selection"
        se = f" \u00b1 {NOISE_Z * worst['se']:.3f}" if "se" in worst else ""
        lines.append(f"{who} is below the random mean at {fr} (worst {worst['fraction']:.1%}: Spearman "
                     f"{worst['spearman']:.3f} vs random {worst['random']:.3f}{se})")
    return lines


RANDOM_MIN_DRAWS, RANDOM_BATCH = 10, 5


def more_random_draws(result: JointResult, static: StaticData | None, arena: ArenaData | None,
                      config: JointConfig | None, table: pd.DataFrame, *, strategy: str, max_draws: int = 50,
                      target: str = "all", progress: Progress = no_progress,
                      cancel: threading.Event | None = None) -> pd.DataFrame:
    """``table`` with more ``random`` draws (issue 34.5: three draws made a "random 95 %" band that meant little,
    and the targeted subset's margin flipped sign between 3 and 10 draws): at least ``RANDOM_MIN_DRAWS`` per
    fraction, then batches of 5 at each fraction where the random mean's standard error is not yet below a quarter
    of ``strategy``'s margin over it (nor below 0.001), up to ``max_draws``.  A margin still within 1.96 standard
    errors after that is reported as within noise (:func:`versus_random`)."""
    while True:
        check_cancel(cancel)
        summ = summarise_recovery(table)
        rnd = summ[summ["strategy"] == "random"].set_index("fraction")
        if rnd.empty:
            return table
        se = random_se(summ)
        own = summ[summ["strategy"] == strategy].set_index("fraction")["spearman_mean"]
        margin = (own.reindex(rnd.index) - rnd["spearman_mean"]).abs().fillna(0)
        draws = rnd["draws"].astype(int)
        need = (draws < max_draws) & ((draws < RANDOM_MIN_DRAWS) | (se > np.maximum(margin / 4, 0.001)))
        if not need.any():
            return table
        new = []
        for f in rnd.index[need]:
            n = int(draws[f])
            batch = min(max(RANDOM_MIN_DRAWS - n, RANDOM_BATCH), max_draws - n)
            progress(0, 1, f"random baseline: draws {n + 1}-{n + batch} at {f:.1%}")
            new.append(subset_recovery(result, static, arena, config, fractions=(f,), strategies=("random",),
                                       seeds=tuple(range(n, n + batch)), target=target, cancel=cancel))
        table = pd.concat([table, *new], ignore_index=True)


def top_fisher_subset(scores: np.ndarray, fraction: float) -> np.ndarray:
    """Indices of the ``ceil(fraction * N)`` highest-scoring items (at least one), best first."""
    if not 0 < fraction <= 1:
        raise EngineError(f"fraction must be in (0, 1], got {fraction}")
    n = len(scores)
    k = max(1, min(n, math.ceil(fraction * n)))
    return np.argsort(-np.asarray(scores, float), kind="stable")[:k]


def lowest_information(scores: np.ndarray, count: int) -> np.ndarray:
    """Indices of the ``count`` least informative items (candidates for retirement, section 4.2 "Implications")."""
    return np.argsort(np.asarray(scores, float), kind="stable")[:max(0, count)]


def _split(idx: np.ndarray, n_static: int, n_arena: int) -> tuple[np.ndarray, np.ndarray]:
    s = np.zeros(n_static, bool)
    a = np.zeros(n_arena, bool)
    s[idx[idx < n_static]] = True
    a[idx[idx >= n_static] - n_static] = True
    return s, a


def _baseline_scores(static, arena, config, s_sel, a_sel) -> np.ndarray:
    """random_2pl_bt: mean of the per-model z-scores of a static 2PL and an arena BT fitted on the selection.
    The 2PL starts from the observed rates, not from the full-data fit: on a small subset the 2PL's objective has
    more than one optimum, and a start at the full fit's items can end in another (issue 26 tried it: 24 of 120
    items moved Spearman from .988 to .983, tests/unit/test_informativeness.py)."""
    cols = []
    if static is not None and s_sel.any():
        sub = static_columns(static, s_sel)
        cols.append(fit_joint(sub, None, replace(config, mode="static")).theta)
    if arena is not None and a_sel.any():
        # imported here: it loads scipy.optimize (~0.2 s of every diagnostics command's start, issue 26)
        from benchloupe.engine.joint import fit_bradley_terry

        r = arena.rewards[:, a_sel]
        try:
            cols.append(fit_bradley_terry(ArenaData(r), replace(config, mode="arena")).scores)
        except EngineError:
            pass
    if not cols:
        raise EngineError("the random subset has no usable data for the 2PL+BT baseline")
    z = [(c - np.nanmean(c)) / (np.nanstd(c) or 1.0) for c in cols]
    with np.errstate(invalid="ignore"):
        return np.nanmean(np.vstack(z), axis=0) if len(z) > 1 else z[0]


def subset_recovery(result: JointResult, static: StaticData | None, arena: ArenaData | None,
                    config: JointConfig | None = None, *, fractions=FRACTIONS, strategies=STRATEGIES,
                    seeds=(0, 1, 2), target: str = "all", baseline_reference: str = "dualeval",
                    progress: Progress = no_progress, cancel: threading.Event | None = None) -> pd.DataFrame:
    """Section 4.2 subset-recovery experiment; one row per (strategy, fraction, seed) with n_items, spearman,
    kendall (deterministic strategies have seed -1).  ``target`` is the targeted strategy's model weighting
    (:func:`target_weights`); ``baseline_reference`` "dualeval" (Fig. 2) or "own" (the reference code)."""
    config = config or result.config
    if baseline_reference not in ("dualeval", "own"):
        raise EngineError("baseline_reference must be 'dualeval' (the paper's Fig. 2) or 'own' (the reference code)")
    unknown = set(strategies) - set(STRATEGIES)
    if unknown:
        raise EngineError(f"unknown strategies {sorted(unknown)}; choose from {STRATEGIES}")
    n_static, n_arena = len(result.b_static), len(result.b_arena)
    scores = fisher_scores(result, static, arena, config)
    n = len(scores)
    med = float(np.nanmedian(result.theta))
    orders = {
        "top_fisher": np.argsort(-scores, kind="stable"),
        "top_sharpness": np.argsort(-np.nan_to_num(result.a, nan=-np.inf), kind="stable"),
        "difficulty_matched": np.argsort(np.nan_to_num(np.abs(result.b - med), nan=np.inf), kind="stable"),
    }
    targeted = [s for s in ("targeted_log", "targeted") if s in strategies]
    info = information_matrix(result, static, arena, config) if targeted else None
    for strategy in targeted:
        orders[strategy] = selection_order(result, static, arena, config, strategy, target=target, info=info)
    del info  # models x items float64: not held through the refits
    full_baseline = None
    if "random_2pl_bt" in strategies and baseline_reference == "own":
        full_baseline = _baseline_scores(static, arena, config, np.ones(n_static, bool), np.ones(n_arena, bool))
    # One refit per distinct subset and kind: every strategy and seed selects every item at 100 % (and a
    # small benchmark's fractions can round to one subset), and a refit of the same cells is the same numbers
    # (issue 26: 8 of the default curve's 80 ability refits and 2 of its 30 subset 2PLs at 5,000 x 14,000).
    # Each random draw has its own seed (default_rng(seed)), so the distinct refits are replicates (issue 36).
    plan, fits = [], {}
    for strategy, frac, seed in [(s, f, seed) for f in fractions for s in strategies
                                 for seed in (seeds if s.startswith("random") else (-1,))]:
        k = max(1, min(n, math.ceil(frac * n)))
        idx = np.random.default_rng(seed).choice(n, k, replace=False) if strategy.startswith("random") \
            else orders[strategy][:k]
        s_sel, a_sel = _split(idx, n_static, n_arena)
        key = (strategy == "random_2pl_bt", s_sel.tobytes(), a_sel.tobytes())
        plan.append((strategy, frac, seed, k, key, key in fits))
        fits.setdefault(key, (strategy == "random_2pl_bt", s_sel, a_sel))
    check_cancel(cancel)
    shared = (result, static, arena, config, full_baseline if baseline_reference == "own" else None)
    done = dict(zip(fits, replicates.run(_recovery_fit, list(fits.values()), shared, progress=progress,
                                         cancel=cancel, label="subset recovery refit"), strict=True))
    rows = [{"strategy": strategy, "fraction": frac, "seed": seed, "n_items": k, "spearman": done[key][0],
             "kendall": done[key][1], "reused": reused} for strategy, frac, seed, k, key, reused in plan]
    return pd.DataFrame(rows)


def _recovery_fit(shared, task) -> tuple[float, float]:
    """One subset's refit (a replicate): Spearman and Kendall against the reference ranking, NaN if it cannot
    fit.  ``own_baseline`` is the full-data 2PL+BT score of ``baseline_reference="own"``, else None."""
    result, static, arena, config, own_baseline = shared
    baseline, s_sel, a_sel = task
    try:
        if baseline:
            est = _baseline_scores(static, arena, config, s_sel, a_sel)
            ref = own_baseline if own_baseline is not None else result.theta
        else:
            est, ref = fit_abilities(static, arena, result, config, static_items=s_sel,
                                     arena_items=a_sel), result.theta
        return spearman(est, ref), kendall(est, ref)
    except EngineError:
        return float("nan"), float("nan")


def recovery_refits(table: pd.DataFrame) -> dict:
    """What a :func:`subset_recovery` table cost in refits: ability refits on frozen items (one per row of the
    deterministic and ``random`` strategies) and from-scratch 2PL(+BT) fits on the ``random_2pl_bt`` subsets
    (from the rates), each also as full-matrix equivalents (the sum of the subsets' item fractions). A row whose
    subset an earlier row already refitted (``reused``) costs nothing and is not counted."""
    base = table["strategy"] == "random_2pl_bt"
    fitted = ~table["reused"].astype(bool) if "reused" in table else pd.Series(True, index=table.index)
    return {"frozen_item_refits": int((~base & fitted).sum()), "frozen_item_refits_full_equivalent":
            round(float(table.loc[~base & fitted, "fraction"].sum()), 3), "subset_2pl_fits": int((base & fitted).sum()),
            "subset_2pl_fits_full_equivalent": round(float(table.loc[base & fitted, "fraction"].sum()), 3),
            "rows_reusing_an_earlier_refit": int((~fitted).sum())}


def summarise_recovery(table: pd.DataFrame) -> pd.DataFrame:
    """Mean and sd of Spearman/Kendall per (strategy, fraction), like the reference's _summary.csv, plus the 2.5 /
    97.5 % percentiles of Spearman over the random draws (``spearman_lo``/``spearman_hi``; equal to the mean for
    the deterministic strategies)."""
    g = table.groupby(["strategy", "fraction"], sort=False)
    out = g.agg(n_items=("n_items", "first"), spearman_mean=("spearman", "mean"), spearman_std=("spearman", "std"),
                kendall_mean=("kendall", "mean"), kendall_std=("kendall", "std"), draws=("spearman", "size"))
    out["spearman_lo"] = g["spearman"].quantile(0.025)
    out["spearman_hi"] = g["spearman"].quantile(0.975)
    return out.reset_index()

