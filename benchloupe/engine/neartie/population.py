"""Population (paper 002 C.1; reference B.1): owner cap, greedy owner-disjoint halves, representatives."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from benchloupe.columns import Columns
from benchloupe.engine.common import EngineError
from benchloupe.hints import Opt, say

from .config import HALVES, AuditConfig


def build_population(
    accuracy: np.ndarray, model_ids: list[str], families: list[str | None], owners: list[str], config: AuditConfig,
    *, correct: np.ndarray | None = None, observed: np.ndarray | None = None,
) -> Columns:
    """Cap, split and pick representatives: one row per input model with kept/why/half/representative.

    ``correct`` / ``observed`` (integer counts per model) make the split's accuracy sums exact rationals
    k / n, so that two owners whose accuracies sum to the same value tie exactly (see :func:`split_owners`);
    without them the float accuracies are taken at their exact binary value.
    """
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
    numerators, denominator = _scaled_accuracy(accuracy, correct, observed, kept_idx)
    sums = [[0] * n_fam for _ in owner_names]
    for num, g, f in zip(numerators, g_of.tolist(), f_of.tolist(), strict=True):
        sums[g][f] += num
    ties = np.array([rng.uniform() for _ in owner_names])
    side_of, side_counts = split_owners(counts, sums, denominator, ties, rng)
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
                    "representative": representative})




def _scaled_accuracy(accuracy, correct, observed, rows: np.ndarray) -> tuple[list[int], int]:
    """The kept rows' accuracies as integers over one common denominator N (exact: a_i = numerator_i / N).

    With counts, a_i = k_i / n_i and N = lcm of the distinct n_i (N = n for complete data); the split's costs
    scale by the same factor whatever common N is used, so its decisions and exact ties do not depend on it."""
    if correct is None:
        exact = [Fraction(float(accuracy[r])) for r in rows.tolist()]
        denominator = 1
        for q in exact:
            denominator = math.lcm(denominator, q.denominator)
        return [q.numerator * (denominator // q.denominator) for q in exact], denominator
    n = np.full(len(correct), observed, dtype=np.int64) if np.ndim(observed) == 0 else np.asarray(observed)
    n_rows, k_rows = n[rows].tolist(), np.asarray(correct)[rows].tolist()
    denominator = 1
    for m in set(n_rows):
        denominator = math.lcm(denominator, int(m))
    return [int(k) * (denominator // int(m)) for k, m in zip(k_rows, n_rows, strict=True)], denominator


def split_owners(counts: np.ndarray, sums: list[list[int]], denominator: int, ties: np.ndarray,
                 rng: np.random.Generator) -> tuple[np.ndarray, list[list[int]]]:
    """Greedy owner-disjoint split (reference B.1, maintainer variant) in exact integer arithmetic.

    ``sums[g][f]`` is owner g's family-f accuracy sum times ``denominator`` (an integer).  Owners go in order
    of (-models, tie draw), each to the side with the lower cost sum_f |c0_f - c1_f| / T_f +
    sum_f |(s0_f - c0_f m_f) - (s1_f - c1_f m_f)| / T_f after adding it; an exact cost tie is broken by
    ``rng.integers(0, 2)``.  The reference sums accuracies with pandas' compensated groupby sum, which returns
    the exact sum for such k / n values, so its ties are true ties; a plain float sum (1e-16 apart) skips the
    draw and puts the random stream out of step (issue 13).  With N the denominator and Delta = side 0 - side 1,
    N L cost = sum_f (L / T_f^2) (N T_f |Delta c_f| + |T_f Delta s_f - S_f Delta c_f|), L = lcm(T_f^2), all
    integers; families the owner does not touch cost the same on both sides and are left out of the
    comparison.  Returns the side per owner and the per-side family counts.
    """
    n_owner, n_fam = counts.shape
    totals = [max(int(counts[:, f].sum()), 1) for f in range(n_fam)]
    big_s = [sum(sums[g][f] for g in range(n_owner)) for f in range(n_fam)]
    lcm = 1
    for tf in totals:
        lcm = math.lcm(lcm, tf * tf)
    scale = [lcm // (tf * tf) for tf in totals]
    side_c = [[0] * n_fam, [0] * n_fam]
    side_s = [[0] * n_fam, [0] * n_fam]
    side_of = np.zeros(n_owner, dtype=int)
    cnt = counts.tolist()
    for g in sorted(range(n_owner), key=lambda g: (-sum(cnt[g]), ties[g])):
        touched = [f for f in range(n_fam) if cnt[g][f]]
        costs = []
        for side in (0, 1):
            sign = 1 if side == 0 else -1
            cost = 0
            for f in touched:
                dc = side_c[0][f] - side_c[1][f] + sign * cnt[g][f]
                ds = side_s[0][f] - side_s[1][f] + sign * sums[g][f]
                tf = totals[f]
                cost += scale[f] * (denominator * tf * abs(dc) + abs(tf * ds - big_s[f] * dc))
            costs.append(cost)
        side = int(rng.integers(0, 2)) if costs[0] == costs[1] else int(costs[1] < costs[0])
        for f in touched:
            side_c[side][f] += cnt[g][f]
            side_s[side][f] += sums[g][f]
        side_of[g] = side
    return side_of, side_c
