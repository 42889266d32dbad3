"""How much does the verdict rest on the owner split?  (Ours, beyond paper 002; issue 22.)

The greedy owner split (C.1) is deterministic given the population seed, but its decisions can sit on a knife
edge: on a held-back benchmark an 8-ulp cost difference for one single-model owner moved 169 owners to the other
half and p from .334 to .811.  :func:`split_stability` reruns the primary audit under N other population seeds
(``family_seed + 1 .. + N``: the owner-cap draws, the tie order and the tie draws of the split, as the reference's
one population seed governs them), each with its own dimension selection, purification and controls, and
reports Table 1 per split (each split a replicate of :mod:`~benchloupe.engine.replicates`, on any
``--jobs`` or cluster with the same numbers: its seeds are its own), the range and median of p, the share of splits with p at or below the significance
level, and a one-line verdict: ``stable`` when at least :data:`STABLE_SHARE` of the splits reach the primary
run's status, else ``fragile``.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np

from benchloupe.columns import Columns
from benchloupe.engine import replicates
from benchloupe.engine.common import EngineError, Progress, no_progress

from .audit import run_primary
from .results import AuditResult, ProtocolInputs

STABLE_SHARE = 0.9  # "stable: 18 of 20 splits agree" is the least that reads stable
SPLIT_COLUMNS = ["split", "family_seed", "k_discovery", "k_validation", "tau_b", "eligible_pairs", "reversals", "rate",
                 "random_median", "excess_pp", "p", "status", "split_ties", "split_knife_edges", "agrees", "note"]


def split_stability(result: AuditResult, inputs: ProtocolInputs, n: int, cancel: threading.Event | None = None,
                    progress: Progress = no_progress) -> tuple[Columns, dict]:
    """Table 1 under ``n`` other owner splits (one row each) and its summary (see the module docstring)."""
    base = replace(result.config, protocol="primary", split_seeds=0, specificity=False, bootstrap=0, gap_curve=(),
                   fraction_sensitivity=())
    primary_status = result.summary["status"]
    shared = (inputs.responses, inputs.model_ids, inputs.families, inputs.owners, inputs.item_groups, inputs.mask,
              base)
    rows = replicates.run(_split_row, range(1, n + 1), shared, progress=progress, cancel=cancel, label="owner split")
    for row in rows:
        row["agrees"] = row["status"] == primary_status
    table = Columns({c: [r.get(c) for r in rows] for c in SPLIT_COLUMNS}, columns=SPLIT_COLUMNS)
    return table, stability_summary(rows, primary_status, result.summary.get("p"), result.config.significance)


def _split_row(shared, i: int) -> dict:
    """Table 1 under owner split ``i`` (population seed ``family_seed + i``): one replicate, run anywhere."""
    responses, model_ids, families, owners, item_groups, mask, base = shared
    seed = base.family_seed + i
    row = {"split": i, "family_seed": seed, "note": ""}
    try:
        res = run_primary(responses, model_ids, families, owners, item_groups, replace(base, family_seed=seed),
                          mask=mask)
    except EngineError as exc:
        return {**row, "status": "not run", "note": str(exc).splitlines()[0]}
    s = res.summary
    return {**row, **{k: s[k] for k in SPLIT_COLUMNS if k in s}}


def stability_summary(rows: list[dict], primary_status: str, primary_p: float | None, alpha: float) -> dict:
    """Range and median of p over the splits that ran, share at or below ``alpha``, agreement and the verdict."""
    n = len(rows)
    p = np.array([r["p"] for r in rows if r.get("p") is not None and np.isfinite(r["p"])], dtype=float)
    agree = sum(bool(r["agrees"]) for r in rows)
    not_run = sum(r["status"] == "not run" for r in rows)
    stable = n > 0 and agree >= STABLE_SHARE * n
    words = f"{'stable' if stable else 'fragile'}: {agree} of {n} splits agree"
    if not_run:
        words += f" ({not_run} could not run)"
    out = {"splits": n, "agree": agree, "not_run": not_run, "primary_status": primary_status,
           "primary_p": primary_p, "significance": alpha, "stable": bool(stable), "verdict": words,
           "p_min": None, "p_median": None, "p_max": None, "share_significant": None}
    if p.size:
        out.update(p_min=float(p.min()), p_median=float(np.median(p)), p_max=float(p.max()),
                   share_significant=float((p <= alpha).mean()))
    return out
