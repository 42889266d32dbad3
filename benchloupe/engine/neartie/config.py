"""Settings and constants of the near-tie audit (paper 002 Table 12; reference B.7)."""

from __future__ import annotations

from dataclasses import dataclass

HALVES = ("discovery", "validation")
STATUS_DETECTED = "excess_sensitivity_detected"
STATUS_NOT_DETECTED = "no_significant_excess_detected"
STATUS_INSUFFICIENT = "insufficient_eligible_pairs"
STATUS_UNDEFINED = "undefined_random_controls"
FRACTION_INDEX = {0.3: 0, 0.5: 1, 0.7: 2}
FULL_GAP_CURVE = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0)  # eq. 56, in percentage points
FULL_FRACTIONS = (0.3, 0.7)
FULL_BOOTSTRAP = 2000


@dataclass(frozen=True)
class AuditConfig:
    """Primary settings of paper 002 (Table 12, Appendices C-D; reference B.7).

    ``anchor_ties="exact"`` scores anchors with integer-scaled weights so that exact ties are true ties;
    ``"float"`` is the reference's plain float arithmetic (its tie count then depends on the BLAS).
    ``gap`` is the near-tie band in score units (0.01 = 1 pp) compared in floating point as the reference
    does; ``gap_tolerance`` widens it (0 reproduces the reference).  Secondary analyses are off by default.
    ``drop_small_families`` leaves out families below ``min_family_models`` (as the paper does) instead of
    refusing.  ``family_from`` (name | column | arch) is resolved by the jobs layer before the engine runs.
    ``representative``: "median" (the paper's rule) or "id" (score-blind, D.2).
    ``protocol="full"`` adds the paper's robustness protocol (:mod:`.protocol`) and the secondary analyses.
    """

    dimensions: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    purification_rounds: int = 3
    anchor_fraction: float = 0.5
    strata: int = 4
    gap: float = 0.01
    gap_tolerance: float = 0.0
    anchor_ties: str = "exact"
    controls: int = 1000
    owner_cap: int = 5
    min_family_models: int = 20
    min_family_models_per_half: int = 2
    drop_small_families: bool = False
    validation_fraction: float = 0.25
    calibration_fraction: float = 0.5
    coordinate_ridge: float = 1.0
    dif_penalty: float = 1.0
    dif_cycles: int = 5
    family_seed: int = 20260821
    nested_seed: int = 20260826
    control_seed: int = 20260825
    bootstrap_seed: int = 20260824
    fraction_seed_index: int = 1
    significance: float = 0.05
    top_items: int = 10
    specificity: bool = False
    bootstrap: int = 0
    gap_curve: tuple[float, ...] = ()
    fraction_sensitivity: tuple[float, ...] = ()
    representative: str = "median"
    family_from: str = "name"
    protocol: str = "primary"

