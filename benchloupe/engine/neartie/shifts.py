"""Family score and percentile shifts under low-DIF recomposition with owner-bootstrap intervals
(paper 002 D.1 eqs. 57-58, §5.1, B.7, Table 10) and the exact-common-model check across two benchmarks.

d_m = anchor - full for every scored representative (each is scored once, in its target half); the
percentile shift uses the rank within the target half, (rank_average - 1) / (n - 1).  Owners are resampled
with replacement (as many as there are owners), all their representatives kept; 2,000 replicates, seed
20261824; 95% intervals from the 2.5 / 97.5 percentiles.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .exactstats import average_ranks
from .results import AuditResult

OWNER_BOOTSTRAP_SEED = 20261824


def representative_shifts(population: pd.DataFrame) -> pd.DataFrame:
    """One row per scored representative: model, family, owner, half, score shift and percentile shift.

    Works on an ``AuditResult.population`` or the stored ``population`` artifact of a run (representatives
    carry their full and anchor scores from their target half).
    """
    rep = population[population["representative"].astype(bool) & population["full_score"].notna()]
    parts = []
    for _, part in rep.groupby("half"):
        n = len(part)
        pct_full = (average_ranks(part["full_score"].to_numpy()) - 1) / max(n - 1, 1)
        pct_low = (average_ranks(part["anchor_score"].to_numpy()) - 1) / max(n - 1, 1)
        parts.append(pd.DataFrame({"model_id": part["model_id"].to_numpy(), "family": part["family"].to_numpy(),
                                   "owner": part["owner"].to_numpy(),
                                   "score_shift": (part["anchor_score"] - part["full_score"]).to_numpy(),
                                   "percentile_shift": pct_low - pct_full}))
    return pd.concat(parts, ignore_index=True)


def _owner_bootstrap(rec: pd.DataFrame, value: str, b: int, seed: int) -> pd.DataFrame:
    owners, inv = np.unique(rec["owner"].to_numpy(str), return_inverse=True)
    fams = sorted(rec["family"].unique())
    f_idx = np.searchsorted(fams, rec["family"].to_numpy(str))
    rng = np.random.default_rng(seed)
    counts = np.stack([np.bincount(rng.integers(0, owners.size, owners.size), minlength=owners.size)
                       for _ in range(b)])  # B x owners: how often each owner was drawn
    mult = counts[:, inv]  # B x records
    vals = rec[value].to_numpy(float)
    out = []
    for k, fam in enumerate(fams):
        m = f_idx == k
        w = mult[:, m]
        tot = w.sum(axis=1)
        means = np.where(tot > 0, (w * vals[m]).sum(axis=1) / np.maximum(tot, 1), np.nan)
        out.append({"family": fam, "n": int(m.sum()), f"{value}_pp": 100 * vals[m].mean(),
                    "ci_lo": 100 * float(np.nanquantile(means, 0.025)),
                    "ci_hi": 100 * float(np.nanquantile(means, 0.975))})
    return pd.DataFrame(out)


def family_shifts(result: AuditResult, b: int = 2000, seed: int = OWNER_BOOTSTRAP_SEED) -> pd.DataFrame:
    """Per family: mean score shift and mean percentile shift (both x100) with owner-bootstrap 95% CIs."""
    rec = representative_shifts(result.population)
    score = _owner_bootstrap(rec, "score_shift", b, seed)
    pct = _owner_bootstrap(rec, "percentile_shift", b, seed)
    return score.merge(pct, on=["family", "n"], suffixes=("_score", "_percentile"))


def shift_range(result: AuditResult) -> float:
    """family_score_shift_range_points (reference B.6): per fold the range of family mean shifts x100, averaged."""
    ranges = []
    for f in result.fold_results:
        fam = result.population["family"].to_numpy()[f.rep_index]
        means = pd.Series(f.low - f.full).groupby(fam).mean()
        ranges.append(100 * float(means.max() - means.min()))
    return float(np.mean(ranges))


def exact_common_shifts(left: pd.DataFrame, right: pd.DataFrame, b: int = 2000,
                        seed: int = OWNER_BOOTSTRAP_SEED) -> pd.DataFrame:
    """B.7 / Table 10: family shifts on exactly the models scored in both benchmarks (two populations, e.g.
    two runs' ``population`` artifacts), right - left with an owner-bootstrap 95% interval (owners resampled
    jointly for both sides)."""
    a = representative_shifts(left).set_index("model_id")
    c = representative_shifts(right).set_index("model_id")
    common = a.index.intersection(c.index)
    rec = pd.DataFrame({"family": a.loc[common, "family"], "owner": a.loc[common, "owner"],
                        "left": a.loc[common, "score_shift"], "right": c.loc[common, "score_shift"]})
    rec = rec[rec["family"] == c.loc[common, "family"]]
    rec["diff"] = rec["right"] - rec["left"]
    if rec.empty:
        return pd.DataFrame(columns=["family", "n", "left_pp", "right_pp", "diff_pp", "ci_lo", "ci_hi"])
    boot = _owner_bootstrap(rec.reset_index(drop=True), "diff", b, seed)
    means = rec.groupby("family")[["left", "right"]].mean() * 100
    boot["left_pp"] = boot["family"].map(means["left"])
    boot["right_pp"] = boot["family"].map(means["right"])
    return boot.rename(columns={"diff_pp": "diff_pp"})[["family", "n", "left_pp", "right_pp", "diff_pp", "ci_lo",
                                                        "ci_hi"]]
