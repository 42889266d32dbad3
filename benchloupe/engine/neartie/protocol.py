"""The paper's robustness protocol around the primary audit (``AuditConfig(protocol="full")``).

Tables by the paper's numbering (002):
- Table 2  item-signature replication across owner halves, 500 permutations (D.3, :mod:`.replication`),
  with item-group attribution (eqs. 69-70) and the exact item-group contributions of eq. 71;
- Table 4  direct penalised logistic MIRT in place of the spectral offsets (B.1, :mod:`.direct_mirt`);
- Table 5  discrimination- and reliability-matched controls (D.1 / B.2, :mod:`.matched`);
- Table 9  nine population perturbations, K frozen, 200 controls each (D.2, :mod:`.perturb`);
- Table 10 family score / percentile shifts with 2,000 owner-bootstrap intervals (D.1, B.7, :mod:`.shifts`);
- Tables 6, 7, 8, 11 are the secondary analyses (:mod:`.secondary`), switched on by the same option.
"""

from __future__ import annotations

import threading

import pandas as pd

from benchloupe.engine.common import check_cancel

from .matched import matched_controls
from .perturb import population_robustness
from .replication import replication
from .results import AuditResult, ProtocolInputs
from .shifts import family_shifts, shift_range


def run_protocol(result: AuditResult, inputs: ProtocolInputs, cancel: threading.Event | None = None,
                 *, matched: int | None = None, perturbation_controls: int = 200, permutations: int = 500,
                 owner_bootstrap: int = 2000, direct_mirt: bool = True) -> dict[str, pd.DataFrame]:
    """All protocol tables, keyed by a short name (stored as run artifacts ``protocol_<name>``)."""
    out: dict[str, pd.DataFrame] = {}
    table5, detail = matched_controls(result, inputs, matched or result.config.controls)
    out["table5_matched_controls"] = table5
    out["table5_folds"] = detail["folds"]
    check_cancel(cancel)
    rep = replication(result, inputs, permutations)
    out["table2_replication"] = rep["table2"]
    out["table2_family_rho"] = rep["family_rho"]
    attribution = rep["item_group_attribution"]
    out["item_group_attribution"] = attribution
    out["eq71_group_contributions"] = rep["group_contributions"]
    check_cancel(cancel)
    shifts = family_shifts(result, owner_bootstrap)
    shifts.attrs["score_shift_range_pp"] = shift_range(result)
    out["table10_family_shifts"] = shifts
    check_cancel(cancel)
    out["table9_population_robustness"] = population_robustness(result, inputs, perturbation_controls,
                                                                cancel=cancel)
    if direct_mirt:
        from .direct_mirt import direct_mirt_audit

        check_cancel(cancel)
        out["table4_direct_mirt"] = direct_mirt_audit(result, inputs, cancel=cancel)
    return out


def protocol_summary(tables: dict[str, pd.DataFrame]) -> dict:
    """The headline numbers of each protocol table (for run metrics; the tables are stored as artifacts)."""
    out: dict = {}
    for key in ("table2_replication", "table4_direct_mirt", "table5_matched_controls"):
        if key in tables and len(tables[key]):
            out[key] = {k: (v.item() if hasattr(v, "item") else v) for k, v in tables[key].iloc[0].items()}
    if "table9_population_robustness" in tables:
        t = tables["table9_population_robustness"]
        ran = t[t["excess_pp"].notna()]
        out["table9_population_robustness"] = {"specifications": int(len(ran)), "positive": int(ran["positive"].sum()),
                                               "significant": int(ran["significant"].sum())}
    if "table10_family_shifts" in tables:
        out["family_score_shift_range_pp"] = tables["table10_family_shifts"].attrs.get("score_shift_range_pp")
    att = tables.get("item_group_attribution")
    if att is not None and len(att):
        out["item_group_sign_replication"] = att.attrs.get("sign_replication")
        out["item_group_binomial_p"] = att.attrs.get("binomial_p")
    return out
