"""Result containers of the near-tie audit and the Markdown helpers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from benchloupe.engine.dif import DimensionSelection, Purification

from .config import AuditConfig


@dataclass(frozen=True)
class FoldResult:
    """One audit direction: audit half -> target half."""

    audit_half: str
    audit_rows: np.ndarray  # row indices (into the input) of the audit half's capped models
    selection: DimensionSelection
    purification: Purification
    rep_index: np.ndarray  # row indices (into the input) of scored target representatives
    full: np.ndarray
    low: np.ndarray
    tau_b: float
    counts: dict[str, int]
    control_low: np.ndarray  # reps x R anchor-length control scores
    control_counts: np.ndarray  # R x 2 (pairs, reversals) for close cross-family pairs


@dataclass(frozen=True)
class ProtocolInputs:
    """What the robustness protocol needs beyond the result: the raw inputs (for reruns) and their arrays."""

    responses: np.ndarray
    model_ids: list
    families: list
    owners: list
    item_groups: list
    mask: np.ndarray | None
    y_all: np.ndarray
    obs_all: np.ndarray | None
    groups: np.ndarray
    fam_code: np.ndarray
    owner_arr: np.ndarray
    fam_names: list


@dataclass(frozen=True)
class AuditResult:
    """Everything the curator sees (see docs/NEARTIE.md for field meanings)."""

    config: AuditConfig
    population: pd.DataFrame
    dimension_curves: pd.DataFrame
    purification: pd.DataFrame
    folds: pd.DataFrame
    items: pd.DataFrame
    pairs: pd.DataFrame
    contributions: pd.DataFrame
    controls: pd.DataFrame
    summary: dict
    secondary: dict = field(default_factory=dict)
    fold_results: tuple = field(default=(), repr=False, compare=False)  # the FoldResults (scores, controls)
    protocol: dict = field(default_factory=dict)  # robustness protocol tables (protocol.py), by name

    @property
    def fold_controls(self) -> list[np.ndarray]:
        """Per fold, the R x 2 (non-tied pairs, reversals) counts of the matched-random controls."""
        return [f.control_counts for f in self.fold_results]

    def table1_row(self) -> dict:
        """The paper's Table 1 quantities, pooled over folds."""
        keys = ("items", "k_discovery", "k_validation", "tau_b", "eligible_pairs", "reversals", "rate",
                "random_median", "excess_pp", "p", "status")
        return {k: self.summary[k] for k in keys}

    def to_markdown(self) -> str:
        """A short Markdown report of the primary result and the fold details."""
        s = self.summary
        lines = [
            "# Family-DIF near-tie audit", "",
            f"Status: **{s['status']}**", "",
            f"Items: {s['items']}; capped models: {s['capped_models']}; owners: {s['owners']}; "
            f"families: {s['families']}; scored representatives: {s['representatives']}.",
            f"Near tie: different owner, different family, |full gap| <= {100 * self.config.gap:g} pp "
            f"(tolerance {self.config.gap_tolerance:g}).", "",
            "| quantity | value |", "|---|---:|",
            f"| K (discovery / validation audit) | {s['k_discovery']} / {s['k_validation']} |",
            f"| mean fold Kendall tau-b | {s['tau_b']:.3f} |",
            f"| near-tie pairs (ties excluded) | {s['eligible_pairs']} |",
            f"| low-DIF reversals | {s['reversals']} |",
            f"| low-DIF reversal rate | {_pct(s['rate'])} |",
            f"| matched-random median | {_pct(s['random_median'])} |",
            f"| excess (pp) | {_num(s['excess_pp'], '+.1f')} |",
            f"| one-sided p (R = {self.config.controls}) | {_num(s['p'], '.3f')} |", "",
            "## Folds", "", _md_table(self.folds), "",
        ]
        for name, table in self.secondary.items():
            lines += [f"## {name}", "", _md_table(table), ""]
        return "\n".join(lines)


def _md_table(table: pd.DataFrame) -> str:
    """A plain Markdown table (no optional ``tabulate`` dependency); floats to 4 significant digits."""
    def cell(value) -> str:
        if isinstance(value, float | np.floating):
            return "n/a" if np.isnan(value) else f"{value:.4g}"
        return "n/a" if value is None else str(value)

    head = "| " + " | ".join(map(str, table.columns)) + " |"
    rule = "|" + "---|" * len(table.columns)
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([head, rule, *rows])


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)

