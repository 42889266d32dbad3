"""Population robustness (paper 002 D.2, Table 9): nine frozen perturbations of the population.

Owner cap 1 and 3, the score-blind checkpoint (one model per owner-family by id order), the conservative
lineage filter, and omitting each default family in turn.  Every retained family needs >= 15 models; the
halves are rebuilt with the frozen population seed; K is fixed per fold to the primary run's choice; MIRT,
residual DIF and the three purification rounds are refitted; 200 matched-random controls.  The pass rule
(eq. 61) counts benchmarks: a variant passes when >= 3 of 5 benchmarks have positive excess and >= 3 have
p <= .05 (:func:`pass_rule`, for several runs); per benchmark we report direction and significance.
"""

from __future__ import annotations

import re
import threading
from dataclasses import replace

import pandas as pd

from benchloupe.engine import replicates
from benchloupe.engine.common import EngineError

from .audit import run_primary
from .report import star
from .results import AuditResult, ProtocolInputs

LINEAGE = re.compile(r"merge|slerp|franken|lora|qlora|adapter|distill|hybrid|fusion|dpo|ppo|orpo|kto|abliterat|"
                     r"uncensor")
FAMILY_LABELS = {"gemma": "Gemma", "llama": "Llama", "mistral": "Mistral/Mixtral", "phi": "Phi", "qwen": "Qwen"}


def variants(fam_names: list[str]) -> list[tuple[str, dict, object]]:
    """(label, config changes, family filter) for the nine perturbations."""
    out: list[tuple[str, dict, object]] = [
        ("Owner cap 1", {"owner_cap": 1}, None),
        ("Owner cap 3", {"owner_cap": 3}, None),
        ("Score-blind checkpoint", {"representative": "id"}, None),
        ("Conservative lineage filter", {}, "lineage"),
    ]
    for fam in ("gemma", "llama", "mistral", "phi", "qwen"):
        out.append((f"Omit {FAMILY_LABELS[fam]}", {}, fam))
    return out


def _families(inputs: ProtocolInputs, rule) -> list:
    if rule is None:
        return list(inputs.families)
    if rule == "lineage":
        return [None if LINEAGE.search(str(m).lower()) else f for m, f in zip(inputs.model_ids, inputs.families,
                                                                               strict=True)]
    return [None if f == rule else f for f in inputs.families]


def population_robustness(result: AuditResult, inputs: ProtocolInputs, controls: int = 200,
                          min_family: int = 15, cancel: threading.Event | None = None) -> pd.DataFrame:
    """One row per specification (the primary baseline first, with its own 1,000 controls)."""
    s = result.summary
    rows = [{"variant": "Baseline cap 5", "excess_pp": s["excess_pp"], "p": s["p"], "pairs": s["eligible_pairs"],
             "rate": s["rate"], "random_median": s["random_median"], "controls": s["controls"],
             "families": s["families"], "capped_models": s["capped_models"], "status": s["status"], "note": ""}]
    k = (s["k_discovery"], s["k_validation"])
    base = replace(result.config, protocol="primary", controls=controls, min_family_models=min_family,
                   drop_small_families=True, specificity=False, bootstrap=0, gap_curve=(), fraction_sensitivity=())
    todo = []
    for label, changes, rule in variants(inputs.fam_names):
        if rule in FAMILY_LABELS and rule not in inputs.fam_names:
            rows.append({"variant": label, "status": "not applicable", "note": f"no {rule} models in the audit"})
            continue
        rows.append(label)  # filled in below, in this order
        todo.append((label, replace(base, **changes), _families(inputs, rule)))
    shared = (inputs.responses, inputs.model_ids, inputs.owners, inputs.item_groups, inputs.mask, k)
    done = dict(zip([t[0] for t in todo], replicates.run(_variant_row, todo, shared, cancel=cancel,
                                                         label="population perturbation"), strict=True))
    rows = [done[r] if isinstance(r, str) else r for r in rows]
    out = pd.DataFrame(rows)
    out["positive"] = out["excess_pp"].astype(float) > 0
    out["significant"] = out["p"].astype(float) <= result.config.significance
    return out


def _variant_row(shared, task) -> dict:
    """One perturbation (a replicate: its population seed is the primary's, K frozen), its Table 9 row."""
    responses, model_ids, owners, item_groups, mask, k = shared
    label, config, fams = task
    try:
        res = run_primary(responses, model_ids, fams, owners, item_groups, config, mask=mask, fixed_k=k)
    except EngineError as exc:
        return {"variant": label, "status": "not run", "note": str(exc).splitlines()[0]}
    v = res.summary
    return {"variant": label, "excess_pp": v["excess_pp"], "p": v["p"], "pairs": v["eligible_pairs"],
            "rate": v["rate"], "random_median": v["random_median"], "controls": v["controls"],
            "families": v["families"], "capped_models": v["capped_models"], "status": v["status"], "note": ""}


def pass_rule(tables: dict[str, pd.DataFrame], alpha: float = 0.05, need: int = 3) -> pd.DataFrame:
    """Eqs. 59-61 over several benchmarks' robustness tables: G_dir, G_sig and pass per variant."""
    rows = []
    variants_ = list(dict.fromkeys(v for t in tables.values() for v in t["variant"]))
    for v in variants_:
        ex = [t.loc[t["variant"] == v, "excess_pp"].astype(float) for t in tables.values()]
        ps = [t.loc[t["variant"] == v, "p"].astype(float) for t in tables.values()]
        g_dir = int(sum(bool((e > 0).any()) for e in ex))
        g_sig = int(sum(bool((p <= alpha).any()) for p in ps))
        rows.append({"variant": v, "benchmarks": len(tables), "G_dir": g_dir, "G_sig": g_sig,
                     "passes": g_dir >= need and g_sig >= need})
    return pd.DataFrame(rows)


def cross_benchmark_table(tables: dict[str, pd.DataFrame], alpha: float = 0.05, need: int = 3) -> pd.DataFrame:
    """Table 9 across benchmarks: one row per specification, one column per benchmark (excess in pp, starred
    when p <= alpha, "n/a" when the variant did not run there), then G_dir, G_sig and the pass rule (eqs. 59-61:
    a variant passes when >= ``need`` benchmarks have positive excess and >= ``need`` have p <= alpha; the
    paper's rule is 3 of its 5 benchmarks)."""
    if not tables:
        raise EngineError("the cross-benchmark pass rule needs at least one benchmark's robustness table")
    rule = pass_rule(tables, alpha, need).set_index("variant")
    rows = []
    for v in rule.index:
        row: dict = {"variant": v}
        for bench, t in tables.items():
            hit = t[t["variant"] == v]
            if not len(hit) or pd.isna(hit["excess_pp"].iloc[0]):
                row[bench] = "n/a"
            else:
                row[bench] = star(float(hit["excess_pp"].iloc[0]), float(hit["p"].iloc[0]), alpha)
        row.update(G_dir=int(rule.loc[v, "G_dir"]), G_sig=int(rule.loc[v, "G_sig"]),
                   passes=bool(rule.loc[v, "passes"]))
        rows.append(row)
    return pd.DataFrame(rows, columns=["variant", *tables, "G_dir", "G_sig", "passes"])


