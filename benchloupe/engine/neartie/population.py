"""Population (paper 002 C.1; reference B.1): owner cap, greedy owner-disjoint halves, representatives."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchloupe.engine.common import EngineError

from .config import HALVES, AuditConfig


def build_population(
    accuracy: np.ndarray, model_ids: list[str], families: list[str | None], owners: list[str], config: AuditConfig
) -> pd.DataFrame:
    """Cap, split and pick representatives: one row per input model with kept/why/half/representative."""
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
    for f in family_names:
        count = int((kept & (fam == f)).sum())
        if count < config.min_family_models:
            raise EngineError(f"family {f!r} has {count} models after the owner cap, "
                              f"{config.min_family_models - count} short of the minimum {config.min_family_models}")
    code = {f: i for i, f in enumerate(family_names)}
    kept_idx = np.flatnonzero(kept)
    owner_names = np.unique(own[kept_idx].astype(str))
    if owner_names.size < 4:
        raise EngineError(f"the owner split needs at least 4 owners, found {owner_names.size}: "
                          f"{4 - owner_names.size} more needed")
    n_fam = len(family_names)
    g_of = np.searchsorted(owner_names, own[kept_idx].astype(str))
    f_of = np.array([code[f] for f in fam[kept_idx]])
    counts = np.zeros((owner_names.size, n_fam))
    sums = np.zeros((owner_names.size, n_fam))
    np.add.at(counts, (g_of, f_of), 1.0)
    np.add.at(sums, (g_of, f_of), accuracy[kept_idx])
    ties = np.array([rng.uniform() for _ in owner_names])
    totals = counts.sum(axis=0)
    means = sums.sum(axis=0) / totals
    order = sorted(range(owner_names.size), key=lambda g: (-counts[g].sum(), ties[g]))
    side_counts = np.zeros((2, n_fam))
    side_sums = np.zeros((2, n_fam))
    side_of = np.zeros(owner_names.size, dtype=int)
    for g in order:
        costs = []
        for side in (0, 1):
            c = side_counts.copy()
            s = side_sums.copy()
            c[side] += counts[g]
            s[side] += sums[g]
            imbalance = np.abs(c[0] - c[1]) / totals
            score = np.abs((s[0] - c[0] * means) - (s[1] - c[1] * means)) / totals
            costs.append(float(imbalance.sum() + score.sum()))
        side = int(rng.integers(0, 2)) if costs[0] == costs[1] else int(np.argmin(costs))
        side_counts[side] += counts[g]
        side_sums[side] += sums[g]
        side_of[g] = side
    for side in (0, 1):
        for f in family_names:
            have = int(side_counts[side, code[f]])
            if have < config.min_family_models_per_half:
                raise EngineError(f"family {f!r} has {have} models in the {HALVES[side]} half, "
                                  f"{config.min_family_models_per_half - have} short of the per-half minimum "
                                  f"{config.min_family_models_per_half}")
    half = np.full(n, None, dtype=object)
    half[kept_idx] = np.array(HALVES, dtype=object)[side_of[g_of]]
    representative = np.zeros(n, dtype=bool)
    groups: dict[tuple[str, str], list[int]] = {}
    for i in kept_idx:
        groups.setdefault((own[i], fam[i]), []).append(int(i))
    for members in groups.values():
        acc = accuracy[members]
        dist = np.abs(acc - np.median(acc))
        representative[min(zip(dist, (model_ids[i] for i in members), members, strict=True))[2]] = True
    return pd.DataFrame({"model_id": list(model_ids), "family": [f or None for f in fam], "owner": own,
                         "accuracy": accuracy, "half": half, "kept": kept, "why": why,
                         "representative": representative})


