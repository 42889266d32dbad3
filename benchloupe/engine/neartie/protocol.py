"""The paper's robustness protocol around the primary audit (``AuditConfig(protocol="full")``).

Tables by the paper's numbering (002):
- Table 2  item-signature replication across owner halves, 500 permutations (D.3, :mod:`.replication`),
  with item-group attribution (eqs. 69-70) and the exact item-group contributions of eq. 71;
- Table 4  direct penalised logistic MIRT in place of the spectral offsets (B.1, :mod:`.direct_mirt`);
- Table 5  discrimination- and reliability-matched controls (D.1 / B.2, :mod:`.matched`);
- Table 9  nine population perturbations, K frozen, 200 controls each (D.2, :mod:`.perturb`);
- Table 10 family score / percentile shifts with 2,000 owner-bootstrap intervals (D.1, B.7, :mod:`.shifts`);
- Tables 6, 7, 8, 11 are the secondary analyses (:mod:`.secondary`), switched on by the same option;
- beyond the paper, the split-stability reruns (:mod:`.splits`), 20 by default under the full protocol.

:func:`run_audit` is the package's entry point: it orchestrates from above the primary audit
(:mod:`.audit`), whose result types (:mod:`.results`) sit below both, so no module imports itself back.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from benchloupe.engine import dense
from benchloupe.engine.backend import Backend
from benchloupe.engine.common import Progress, check_cancel, no_progress

from .audit import check_config, primary_audit, with_secondary
from .config import AuditConfig
from .results import AuditResult, ProtocolInputs
from .splits import split_stability

if TYPE_CHECKING:
    import pandas as pd


def run_audit(
    responses: np.ndarray,
    model_ids: list[str],
    families: list[str | None],
    owners: list[str],
    item_groups: list[str],
    config: AuditConfig = AuditConfig(),
    *,
    mask: np.ndarray | None = None,
    progress: Progress = no_progress,
    cancel: threading.Event | None = None,
    fixed_k: tuple[int, int] | None = None,
    device: str | Backend | None = None,
) -> AuditResult:
    """Run the primary audit, the secondary analyses and protocol the config asks for, and the split-stability
    reruns, on a models x items 0/1 matrix.

    ``mask`` (same shape, 1 = observed) marks missing cells; without it the matrix must be complete 0/1.
    ``fixed_k`` (discovery, validation) skips dimension selection (the D.2 perturbations freeze K).
    With ``config.protocol == "full"`` the robustness protocol runs too; ``config.resolved_split_seeds`` other
    owner splits are audited again (:mod:`.splits`).
    ``device`` ("cpu", "cuda", "auto" or a ``backend.Backend``; ``None``: the current :mod:`~benchloupe.engine.dense`
    context, numpy by default) runs control scoring, the DIF Newton passes and the spectral products there.
    """
    if device is not None:
        with dense.use(dense.resolve(device, int(np.asarray(responses).size))):
            return run_audit(responses, model_ids, families, owners, item_groups, config, mask=mask,
                             progress=progress, cancel=cancel, fixed_k=fixed_k)
    check_config(config)
    config = with_secondary(config)
    n_splits = config.resolved_split_seeds
    full = config.protocol == "full"
    # progress shares: the primary audit, then the protocol, then the split reruns (each about one primary audit)
    share = 1.0 / (1 + (3 if full else 0) + (0.6 * n_splits if n_splits else 0))
    protocol_end = share * (4 if full else 1)

    def primary_progress(done: float, total: float, message: str) -> None:
        progress(share * done / (total or 1.0), 1.0, message)

    result, inputs = primary_audit(responses, model_ids, families, owners, item_groups, config, mask=mask,
                                   progress=primary_progress, cancel=cancel, fixed_k=fixed_k)
    if full:
        progress(share, 1.0, "robustness protocol")
        def protocol_progress(done: float, total: float, message: str) -> None:
            progress(share + (protocol_end - share) * done / (total or 1.0), 1.0, message)

        result = replace(result, protocol=run_protocol(result, inputs, cancel, progress=protocol_progress))
    if n_splits:
        def split_progress(done: float, total: float, message: str) -> None:
            progress(protocol_end + (1.0 - protocol_end) * done / (total or 1.0), 1.0, message)

        table, summary = split_stability(result, inputs, n_splits, cancel, split_progress)
        result = replace(result, tables={**result.tables, "split_seeds": table},
                         summary={**result.summary, "split_stability": summary})
    progress(1.0, 1.0, "audit done")
    return result


def run_protocol(result: AuditResult, inputs: ProtocolInputs, cancel: threading.Event | None = None,
                 *, matched: int | None = None, perturbation_controls: int = 200, permutations: int = 500,
                 owner_bootstrap: int = 2000, direct_mirt: bool = True,
                 progress: Progress = no_progress) -> dict[str, pd.DataFrame]:
    """All protocol tables, keyed by a short name (stored as run artifacts ``protocol_<name>``); ``progress``
    hears each table as it starts (issue 32: the protocol was silent for ten seconds).

    The table modules are imported here, not at the top: they need pandas, which a primary audit never loads."""
    from .direct_mirt import direct_mirt_audit
    from .matched import matched_controls
    from .perturb import population_robustness
    from .replication import replication
    from .shifts import family_shifts, shift_range

    out: dict[str, pd.DataFrame] = {}
    progress(0, 5, "robustness protocol, table 5: matched controls")
    table5, detail = matched_controls(result, inputs, matched or result.config.controls)
    out["table5_matched_controls"] = table5
    out["table5_folds"] = detail["folds"]
    check_cancel(cancel)
    progress(1, 5, "robustness protocol, table 2: replication with permutations")
    rep = replication(result, inputs, permutations)
    out["table2_replication"] = rep["table2"]
    out["table2_family_rho"] = rep["family_rho"]
    attribution = rep["item_group_attribution"]
    out["item_group_attribution"] = attribution
    out["eq71_group_contributions"] = rep["group_contributions"]
    check_cancel(cancel)
    progress(2, 5, "robustness protocol, table 10: family shifts (owner bootstrap)")
    shifts = family_shifts(result, owner_bootstrap)
    shifts.attrs["score_shift_range_pp"] = shift_range(result)
    out["table10_family_shifts"] = shifts
    check_cancel(cancel)
    progress(3, 5, "robustness protocol, table 9: population robustness")
    out["table9_population_robustness"] = population_robustness(result, inputs, perturbation_controls,
                                                                cancel=cancel)
    if direct_mirt:
        check_cancel(cancel)
        progress(4, 5, "robustness protocol, table 4: direct MIRT")
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
