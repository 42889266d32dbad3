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


SPLIT_SEEDS_FULL = 20  # owner splits rerun by default under protocol="full" (issue 22)


@dataclass(frozen=True)
class AuditConfig:
    """Primary settings of paper 002 (Table 12, Appendices C-D; reference B.7).

    The method's switches come first (the TUI form and ``--help`` list the fields in this order).
    ``protocol="full"`` adds the paper's robustness protocol (:mod:`.protocol`) and the secondary analyses.
    ``anchor_ties="exact"`` scores anchors with integer-scaled weights so that exact ties are true ties;
    ``"float"`` is the reference's plain float arithmetic (its tie count then depends on the BLAS).  It governs
    score ties only: the owner split follows the reference's float64 arithmetic in both modes
    (:func:`.population.split_owners`).
    ``family_from`` (name | column | arch) is resolved by the jobs layer before the engine runs.
    ``representative``: "median" (the paper's rule) or "id" (score-blind, D.2).
    ``drop_small_families`` leaves out families below ``min_family_models`` (as the paper does) instead of
    refusing.  ``split_seeds`` (ours, beyond the paper): the primary audit again under that many other owner
    splits (population seeds ``family_seed + 1 .. + N``); ``None`` means 20 under ``protocol="full"``, else 0.
    ``gap`` is the near-tie band in score units (0.01 = 1 pp) compared in floating point as the reference
    does; ``gap_tolerance`` widens it (0 reproduces the reference).  Secondary analyses are off by default.
    """

    protocol: str = "primary"
    anchor_ties: str = "exact"
    family_from: str = "name"
    representative: str = "median"
    drop_small_families: bool = False
    split_seeds: int | None = None
    gap: float = 0.01
    gap_tolerance: float = 0.0
    controls: int = 1000
    significance: float = 0.05
    anchor_fraction: float = 0.5
    owner_cap: int = 5
    min_family_models: int = 20
    min_family_models_per_half: int = 2
    dimensions: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    purification_rounds: int = 3
    strata: int = 4
    validation_fraction: float = 0.25
    calibration_fraction: float = 0.5
    coordinate_ridge: float = 1.0
    dif_penalty: float = 1.0
    dif_cycles: int = 5
    specificity: bool = False
    bootstrap: int = 0
    gap_curve: tuple[float, ...] = ()
    fraction_sensitivity: tuple[float, ...] = ()
    top_items: int = 10
    family_seed: int = 20260821
    nested_seed: int = 20260826
    control_seed: int = 20260825
    bootstrap_seed: int = 20260824
    fraction_seed_index: int = 1

    def __post_init__(self) -> None:
        if self.split_seeds is not None and (isinstance(self.split_seeds, bool) or self.split_seeds < 0):
            raise ValueError(f"split_seeds must be 0 or more, not {self.split_seeds}")

    @property
    def resolved_split_seeds(self) -> int:
        """How many other owner splits run: ``split_seeds``, or 20 under the full protocol and 0 otherwise."""
        if self.split_seeds is not None:
            return int(self.split_seeds)
        return SPLIT_SEEDS_FULL if self.protocol == "full" else 0
