"""Population (paper 002 C.1; reference B.1): owner cap, greedy owner-disjoint halves, representatives."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchloupe.columns import Columns
from benchloupe.engine.common import EngineError
from benchloupe.hints import Opt, say

from .config import HALVES, AuditConfig


def build_population(
    accuracy: np.ndarray, model_ids: list[str], families: list[str | None], owners: list[str], config: AuditConfig,
    *, correct: np.ndarray | None = None, observed: np.ndarray | int | None = None,
) -> Columns:
    """Cap, split and pick representatives: one row per input model with kept/why/half/representative.

    ``correct`` / ``observed`` (counts per model) define the split's accuracies as the reference does,
    ``correct / observed`` in float64; without them ``accuracy`` is taken as given.  The split's decisions
    (ties drawn, knife edges) are in :func:`population_with_split`.
    """
    return population_with_split(accuracy, model_ids, families, owners, config, correct=correct,
                                 observed=observed)[0]


def population_with_split(
    accuracy: np.ndarray, model_ids: list[str], families: list[str | None], owners: list[str], config: AuditConfig,
    *, correct: np.ndarray | None = None, observed: np.ndarray | int | None = None,
) -> tuple[Columns, SplitLog]:
    """:func:`build_population` and the log of the owner split's decisions (:class:`SplitLog`)."""
    if correct is not None and observed is not None:  # the reference's accuracy: count / items, in float64
        accuracy = np.asarray(correct, dtype=np.float64) / np.broadcast_to(np.asarray(observed, dtype=np.float64),
                                                                           np.shape(correct))
    n = len(model_ids)
    fam = np.array([f if f else "" for f in families], dtype=object)
    own = np.array([o.lower() for o in owners], dtype=object)
    why = np.where(fam == "", "no family", "").astype(object)
    family_names = sorted({f for f in fam if f})
    if len(family_names) < 2:
        raise EngineError(f"the audit needs at least 2 model families, found {len(family_names)} "
                          f"({', '.join(family_names) or 'none'}): 1 more family needed")
    rng = np.random.default_rng(config.family_seed)
    kept = np.zeros(n, dtype=bool)
    for f in family_names:
        in_family = np.flatnonzero(fam == f)
        by_owner: dict[str, list[int]] = {}
        for i in in_family:
            by_owner.setdefault(own[i], []).append(int(i))
        for o in sorted(by_owner):
            idx = np.array(by_owner[o])
            if idx.size > config.owner_cap:
                chosen = np.sort(rng.choice(idx, config.owner_cap, replace=False))
                kept[chosen] = True
                why[np.setdiff1d(idx, chosen)] = f"over owner cap {config.owner_cap}"
            else:
                kept[idx] = True
    for f in list(family_names):
        count = int((kept & (fam == f)).sum())
        if count >= config.min_family_models:
            continue
        if not config.drop_small_families:
            raise EngineError(say(f"family {f!r} has {count} model{'s' if count != 1 else ''} after the owner cap, "
                              f"{config.min_family_models - count} short of the minimum {config.min_family_models}: "
                              "add models, lower ", Opt("min_family_models"), ", or ", Opt("drop_small_families", verb="pass"),
                              " to leave such families out as the paper does"))
        small = fam == f
        why[small] = f"family below minimum {config.min_family_models}"
        kept[small] = False
        family_names.remove(f)
    if len(family_names) < 2:
        raise EngineError(say(f"only {len(family_names)} families keep at least {config.min_family_models} models "
                          f"({', '.join(family_names) or 'none'}): the audit needs 2; add models or lower ",
                              Opt("min_family_models")))
    code = {f: i for i, f in enumerate(family_names)}
    kept_idx = np.flatnonzero(kept)
    owner_names = np.unique(own[kept_idx].astype(str))
    if owner_names.size < 4:
        raise EngineError(f"the owner split needs at least 4 owners, found {owner_names.size}: "
                          f"{4 - owner_names.size} more needed")
    n_fam = len(family_names)
    g_of = np.searchsorted(owner_names, own[kept_idx].astype(str))
    f_of = np.array([code[f] for f in fam[kept_idx]])
    counts = np.zeros((owner_names.size, n_fam), dtype=np.int64)
    np.add.at(counts, (g_of, f_of), 1)
    cell: list[list[list[float]]] = [[[] for _ in range(n_fam)] for _ in owner_names]
    for a, g, f in zip(np.asarray(accuracy, dtype=np.float64)[kept_idx].tolist(), g_of.tolist(), f_of.tolist(),
                       strict=True):  # dataset row order within each owner and family
        cell[g][f].append(a)
    sums = [[kahan_sum(cell[g][f]) for f in range(n_fam)] for g in range(owner_names.size)]
    # family means: the family's capped models, owners sorted, then row order (the reference's frame order)
    means = [kahan_sum([a for g in range(owner_names.size) for a in cell[g][f]]) / int(counts[:, f].sum())
             for f in range(n_fam)]
    ties = np.array([rng.uniform() for _ in owner_names])
    side_of, side_counts, log = split_owners(counts, sums, means, ties, rng)
    log = log.named(owner_names)
    for side in (0, 1):
        for f in family_names:
            have = int(side_counts[side][code[f]])
            if have < config.min_family_models_per_half:
                raise EngineError(f"family {f!r} has {have} model{'s' if have != 1 else ''} in the {HALVES[side]} half, "
                                  f"{config.min_family_models_per_half - have} short of the per-half minimum "
                                  f"{config.min_family_models_per_half}")
    half = np.full(n, None, dtype=object)
    half[kept_idx] = np.array(HALVES, dtype=object)[side_of[g_of]]
    representative = np.zeros(n, dtype=bool)
    groups: dict[tuple[str, str], list[int]] = {}
    for i in kept_idx:
        groups.setdefault((own[i], fam[i]), []).append(int(i))
    for members in groups.values():
        if config.representative == "id":  # D.2 score-blind checkpoint: first model id, no accuracy used
            representative[min((model_ids[i], i) for i in members)[1]] = True
            continue
        acc = accuracy[members]
        dist = np.abs(acc - np.median(acc))
        representative[min(zip(dist, (model_ids[i] for i in members), members, strict=True))[2]] = True
    return Columns({"model_id": list(model_ids), "family": [f or None for f in fam], "owner": own,
                    "accuracy": np.asarray(accuracy, dtype=float), "half": half, "kept": kept, "why": why,
                    "representative": representative}), log


KNIFE_EDGE = 1e-12  # a split decision whose two costs differ by less than this, relatively, is a knife edge


def kahan_sum(values) -> float:
    """The sum pandas' groupby ``sum`` / ``mean`` compute (pandas 2.3.3, ``_libs/groupby.pyx``), which the reference
    uses for the owner split: a Kahan-compensated running sum in the order given that returns the running sum
    *without* adding the final compensation (so it is not always the correctly rounded sum: issue 22)."""
    total = 0.0
    comp = 0.0
    for v in values:
        y = v - comp
        t = total + y
        comp = (t - total) - y
        total = t
    return total


def numpy_sum(values: list[float]) -> float:
    """``numpy.sum`` of a contiguous float64 vector, in the order numpy adds (its ``pairwise_sum``): from the
    identity 0.0, left to right below 8 terms (every family count of the paper), else 8 accumulators per block
    of up to 128 combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest left to right, and
    longer vectors halved at a multiple of 8."""
    def pairwise(a: list[float]) -> float:
        n = len(a)
        if n < 8:
            res = -0.0
            for v in a:
                res += v
            return res
        if n <= 128:
            r = a[:8]
            i = 8
            while i < n - n % 8:
                for j in range(8):
                    r[j] += a[i + j]
                i += 8
            res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
            for v in a[i:]:
                res += v
            return res
        half = n // 2
        half -= half % 8
        return pairwise(a[:half]) + pairwise(a[half:])
    return 0.0 + pairwise(list(values))


@dataclass(frozen=True)
class SplitLog:
    """The owner split's decisions, in processing order: how close each one was (issue 22).

    ``cost`` holds the two candidate costs per step (side 0 = discovery, side 1 = validation), ``drawn`` the
    steps whose costs were exactly equal (decided by ``rng.integers(0, 2)``), ``knife_edge`` the others whose
    relative difference ``|c0 - c1| / max(c0, c1)`` is below :data:`KNIFE_EDGE`: a last-bit change in one
    accuracy could move such an owner, and every later owner with it.
    """

    owner_index: np.ndarray
    cost: np.ndarray
    side: np.ndarray
    drawn: np.ndarray
    knife_edge: np.ndarray
    owners: np.ndarray | None = None

    def named(self, owner_names: np.ndarray) -> SplitLog:
        return SplitLog(self.owner_index, self.cost, self.side, self.drawn, self.knife_edge,
                        np.asarray(owner_names, dtype=object)[self.owner_index])

    @property
    def relative_difference(self) -> np.ndarray:
        top = np.maximum(np.abs(self.cost[:, 0]), np.abs(self.cost[:, 1]))
        return np.where(top > 0, np.abs(self.cost[:, 0] - self.cost[:, 1]) / np.where(top > 0, top, 1.0), 0.0)

    def summary(self) -> dict:
        return {"split_decisions": int(self.side.size), "split_ties": int(self.drawn.sum()),
                "split_knife_edges": int(self.knife_edge.sum())}

    def edges(self) -> Columns:
        """One row per drawn or knife-edge step: step, owner, both costs, relative difference, decision, half."""
        rows = np.flatnonzero(self.drawn | self.knife_edge)
        return Columns({"step": rows + 1, "owner": (self.owners if self.owners is not None
                                                    else self.owner_index.astype(object))[rows],
                        "cost_discovery": self.cost[rows, 0], "cost_validation": self.cost[rows, 1],
                        "relative_difference": self.relative_difference[rows],
                        "decision": np.where(self.drawn[rows], "tie drawn", "lower cost").astype(object),
                        "half": np.array(HALVES, dtype=object)[self.side[rows]]},
                       columns=["step", "owner", "cost_discovery", "cost_validation", "relative_difference",
                                "decision", "half"])


def split_owners(counts: np.ndarray, sums: list[list[float]], means: list[float], ties: np.ndarray,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, SplitLog]:
    """Greedy owner-disjoint split (reference B.1, maintainer variant) in the reference's float64 arithmetic.

    ``counts[g, f]``: owner g's capped models in family f; ``sums[g][f]`` their accuracy sum and ``means[f]`` the
    family mean, both as :func:`kahan_sum` gives them.  Owners go in order of (-models, tie draw); each side's
    cost, after tentatively adding the owner there, is ``sum_f |c0_f - c1_f| / T_f + sum_f |(s0_f - c0_f m_f) -
    (s1_f - c1_f m_f)| / T_f`` with the per-side counts c and sums s as float64 running totals, every family in
    order, each sum as :func:`numpy_sum` adds; exactly equal costs are broken by ``rng.integers(0, 2)``, else
    the lower side wins.  The decisions follow these float values, not the exact rationals: a tie in exact
    arithmetic that a last-bit residual breaks is no tie (the reference takes the lower side), and a float tie
    draws (issue 22).  Returns the side per owner, the per-side family counts and the :class:`SplitLog`.
    """
    n_owner, n_fam = counts.shape
    totals = [float(max(int(counts[:, f].sum()), 1)) for f in range(n_fam)]
    cnt = counts.astype(np.float64).tolist()
    side_c = [[0.0] * n_fam, [0.0] * n_fam]
    side_s = [[0.0] * n_fam, [0.0] * n_fam]
    side_of = np.zeros(n_owner, dtype=int)
    order = sorted(range(n_owner), key=lambda g: (-sum(cnt[g]), ties[g]))
    costs = np.zeros((n_owner, 2))
    sides = np.zeros(n_owner, dtype=int)
    drawn = np.zeros(n_owner, dtype=bool)
    fams = range(n_fam)
    for step, g in enumerate(order):
        for side in (0, 1):
            c0 = [side_c[0][f] + (cnt[g][f] if side == 0 else 0.0) for f in fams]
            c1 = [side_c[1][f] + (cnt[g][f] if side == 1 else 0.0) for f in fams]
            s0 = [side_s[0][f] + (sums[g][f] if side == 0 else 0.0) for f in fams]
            s1 = [side_s[1][f] + (sums[g][f] if side == 1 else 0.0) for f in fams]
            balance = numpy_sum([abs(c0[f] - c1[f]) / totals[f] for f in fams])
            level = numpy_sum([abs((s0[f] - c0[f] * means[f]) - (s1[f] - c1[f] * means[f])) / totals[f]
                               for f in fams])
            costs[step, side] = balance + level
        tie = costs[step, 0] == costs[step, 1]
        side = int(rng.integers(0, 2)) if tie else int(costs[step, 1] < costs[step, 0])
        for f in fams:
            side_c[side][f] += cnt[g][f]
            side_s[side][f] += sums[g][f]
        side_of[g] = sides[step] = side
        drawn[step] = tie
    log = SplitLog(np.array(order, dtype=int), costs, sides, drawn, np.zeros(n_owner, dtype=bool))
    knife = ~drawn & (log.relative_difference < KNIFE_EDGE)
    log = SplitLog(log.owner_index, costs, sides, drawn, knife)
    side_counts = np.array([[round(c) for c in side_c[0]], [round(c) for c in side_c[1]]], dtype=np.int64)
    return side_of, side_counts, log
