"""Result containers of the near-tie audit and the Markdown helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from benchloupe.columns import Columns
from benchloupe.engine.dif import DimensionSelection, Purification, power_iteration_dtype

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


TABLES = ("population", "dimension_curves", "purification", "folds", "items", "pairs", "contributions", "controls",
          "split_edges")  # and "split_seeds" when the split-stability reruns ran (splits.py)


@dataclass(frozen=True)
class AuditResult:
    """Everything the curator sees (see docs/NEARTIE.md for field meanings).

    ``tables`` holds the audit's tables (names in ``TABLES``) as :class:`~benchloupe.columns.Columns`, which
    the store writes without pandas; the same names as attributes (``result.pairs``) give pandas DataFrames,
    built on first use.
    """

    config: AuditConfig
    tables: dict[str, Columns]
    summary: dict
    secondary: dict = field(default_factory=dict)
    fold_results: tuple = field(default=(), repr=False, compare=False)  # the FoldResults (scores, controls)
    protocol: dict = field(default_factory=dict)  # robustness protocol tables (protocol.py), by name

    def _frame(self, name: str):
        return self.tables[name].frame()

    population = cached_property(lambda self: self._frame("population"))
    dimension_curves = cached_property(lambda self: self._frame("dimension_curves"))
    purification = cached_property(lambda self: self._frame("purification"))
    folds = cached_property(lambda self: self._frame("folds"))
    items = cached_property(lambda self: self._frame("items"))
    pairs = cached_property(lambda self: self._frame("pairs"))
    contributions = cached_property(lambda self: self._frame("contributions"))
    controls = cached_property(lambda self: self._frame("controls"))
    split_edges = cached_property(lambda self: self._frame("split_edges"))

    @property
    def power_iterations(self) -> str:
        """The dtype the randomized SVDs' power iterations ran in: float32 when an audit half's items x models
        matrix (the largest SVD input: the first purification round takes every item) reached
        ``dif.F32_SVD_CELLS``, else float64 (every product, QR and SVD after them is float64 either way)."""
        dtypes = {power_iteration_dtype(f.audit_rows.size * self.summary["items"]) for f in self.fold_results}
        return "float32" if "float32" in dtypes else "float64"

    @property
    def fold_controls(self) -> list[np.ndarray]:
        """Per fold, the R x 2 (non-tied pairs, reversals) counts of the matched-random controls."""
        return [f.control_counts for f in self.fold_results]

    def table1_row(self) -> dict:
        """The paper's Table 1 quantities, pooled over folds."""
        keys = ("items", "k_discovery", "k_validation", "tau_b", "eligible_pairs", "reversals", "rate",
                "random_median", "excess_pp", "p", "status")
        return {k: self.summary[k] for k in keys}

    def to_markdown(self, benchmark: str = "this benchmark") -> str:
        """The Markdown report: one section per table of paper 002 (see :mod:`.report`)."""
        from .report import markdown_report

        return markdown_report(self, benchmark)
