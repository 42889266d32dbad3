"""Item health: which items of a benchmark are broken (mis-keyed, backwards, dead, saturated, misfitting,
duplicated), with the key the data suggest and what reliability the flagged items cost. Arrays in, result
dataclasses out; no store, no UI (DESIGN.md, "item-level diagnostics")."""

from .audit import REASONS, ItemAuditConfig, ItemAuditInputs, ItemAuditResult, run_item_audit

__all__ = ["REASONS", "ItemAuditConfig", "ItemAuditInputs", "ItemAuditResult", "run_item_audit"]
