"""The stated range of every number a curator can type: one declaration per option, shared by both faces.

A number outside its range used to start work: ``evaluate --splits 99999999999999999999`` began a run with no
end, ``anomalies --threshold -1`` flagged every cell, ``--threshold nan`` none, ``bootstrap --B 1e20`` ended in
numpy's "Maximum allowed dimension exceeded", ``db remove-run 1e23`` in an OverflowError (issue 24, defect 6).
Now each number has a :class:`Range` (whole or not, lowest and highest, open or closed ends, a documented
special value such as "0 = none"), checked when the text is read, before anything is opened or computed:

- the command line (``benchloupe.cli.options``) reads every numeric option through a :class:`Range`: a value
  outside it is one line and exit 1 (``--splits 1e20: give a whole number from 1 to 1,000``); text that is no
  number at all is a usage error (exit 2);
- the workbench's run, BenchFill and import forms (``tui/screens/run_forms.py``, ``import_form.py``) check the
  same :class:`Range` and show the same words under the field.

Options that come from a config dataclass (one ``--option`` per field) are declared in :data:`FIELDS` by
``"ClassName.field"``; options of the command line alone carry their :class:`Range` where they are declared.
A numeric option without a declared range still refuses NaN, infinities and numbers beyond 64 bits, and the
hostile-input tests name it until it gets one (``tests/integration/test_hostile_options.py``).

Every layer may use this module (it imports nothing of benchloupe), like :mod:`benchloupe.textsafe`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

INT64_MAX = 2**63 - 1
SEED_MAX = 2**32 - 1  # numpy's legacy RandomState, scikit-style seeds and SQLite all take it
MAX_DIGITS = 40  # longer numerals are not parsed (Python's int() refuses 4,300+ digits with a bare message)


def _num(x: float) -> str:
    """A bound as a person writes it: 1,000, 0.5, 4,294,967,295."""
    if float(x).is_integer() and abs(x) < 1e19:
        return f"{int(x):,}"
    return f"{x:g}"


def shown(text: str) -> str:
    """The text a user typed, cut to a readable length."""
    text = str(text).strip()
    return text if len(text) <= 24 else f"{text[:12]}...({len(text):,} characters)"


@dataclass(frozen=True)
class Range:
    """Where a number may lie. ``lo``/``hi`` are inclusive unless ``lo_open``/``hi_open``; ``integer`` asks for a
    whole number; ``special`` is one value allowed outside the interval with its meaning (``(0, "none")``);
    ``off`` is the value (and its meaning) a field holds by default, outside the interval (``(0, "no export")``):
    a form shows it and accepts it; on the command line it is refused, since leaving the option out says the
    same and a given 0 is more likely a mistake; ``unit`` names what is counted."""

    lo: float | None = None
    hi: float | None = None
    integer: bool = False
    lo_open: bool = False
    hi_open: bool = False
    special: tuple[float, str] | None = None
    off: tuple[float, str] | None = None
    unit: str = ""
    stated: bool = True  # False only for the fallback of an option nobody declared yet

    def describe(self) -> str:
        """``a whole number from 1 to 1,000``, ``a number above 0 and at most 1``, ``0 (none) or ...``."""
        what = "a whole number" if self.integer else "a number"
        lo, hi = self.lo, self.hi
        if lo is not None and hi is not None and not self.lo_open and not self.hi_open:
            text = f"{what} from {_num(lo)} to {_num(hi)}"
        else:
            parts = []
            if lo is not None:
                parts.append(f"above {_num(lo)}" if self.lo_open else f"at least {_num(lo)}")
            if hi is not None:
                parts.append(f"below {_num(hi)}" if self.hi_open else f"at most {_num(hi)}")
            text = f"a finite {what[2:]}" if not parts else what
            text += (" " + " and ".join(parts)) if parts else ""
        if self.unit:
            text += f" ({self.unit})"
        if self.special is not None:
            text = f"{_num(self.special[0])} ({self.special[1]}) or {text}"
        return text

    def contains(self, value: float) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.special is not None and value == self.special[0]:
            return True
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.integer and not float(value).is_integer():
            return False
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        if self.hi is not None and (value >= self.hi if self.hi_open else value > self.hi):
            return False
        if self.integer and abs(value) > INT64_MAX:
            return False
        return True

    def check(self, value: float, text: str | None = None, *, form: bool = False) -> int | float:
        """*value* when it lies in the range (an int for a whole-number range), else ValueError with one line:
        ``must be a whole number from 1 to 1,000, got 1e309``. ``form``: the ``off`` value is accepted (a form
        field always holds a value; the command line leaves the option out instead)."""
        got = shown(text if text is not None else repr(value))
        if self.off is not None and value == self.off[0]:
            if form:
                return int(value) if self.integer else value
            raise OutOfRange(self.describe(), got, off=self.off[1])
        if not self.contains(value):
            raise OutOfRange(self.describe(), got)
        return int(value) if self.integer else float(value)

    def parse(self, text: str, *, form: bool = False) -> int | float:
        """The number written in *text*, checked. :class:`NotANumber` (a ValueError) when it is no number at all;
        ValueError when it lies outside the range."""
        value = parse_number(text, integer=self.integer)
        return self.check(value, text, form=form)


class NotANumber(ValueError):
    """Text that is no number at all (a usage error on the command line)."""


class OutOfRange(ValueError):
    """A number outside its range: ``expected`` says the range, ``got`` what was typed; ``off`` when it is the
    value that means "off", which the command line says by leaving the option out."""

    def __init__(self, expected: str, got: str, *, off: str = "") -> None:
        self.expected, self.got, self.off = expected, got, off
        super().__init__(f"{got} is the default ({off}); else give {expected}" if off else
                         f"must be {expected}, got {got}")


_INT = re.compile(r"^[+-]?\d[\d_]*$")


def parse_number(text: str, *, integer: bool = False) -> int | float:
    """Any numeral (``12``, ``1_000``, ``1e3``, ``-0.5``, ``nan``, ``inf``, ``1e309``, 400 digits): a whole numeral
    stays an exact int; others are floats (``1e309`` is ``inf``). Whether it is allowed is the range's business."""
    raw = str(text).strip()
    if _INT.match(raw):
        digits = raw.lstrip("+-").replace("_", "")
        if len(digits) > MAX_DIGITS:
            return math.inf if not raw.startswith("-") else -math.inf
        return int(raw)
    try:
        value = float(raw)
    except ValueError:
        kind = "a whole number" if integer else "a number"
        raise NotANumber(f"{shown(raw)!r} is not {kind}") from None
    return value


@dataclass(frozen=True)
class Numbers:
    """Numbers written inside a text option, each form a prefix, the range of its numbers and how many there are
    (None: one or more, comma-separated): ``beta:A,B`` (2), ``top:N`` (1), ``0.25,0.5,1`` (prefix ""). ``words``
    are texts that hold no number (``uniform``, ``all``); text with a prefix in ``other`` is another kind of value
    (``benchmark:NAME``) checked where it is used."""

    forms: tuple[tuple[str, Range, int | None], ...]
    words: tuple[str, ...] = ()
    other: tuple[str, ...] = ()

    def describe(self) -> str:
        shapes = []
        for prefix, rng, n in self.forms:
            names = ",".join("ABCDEFGH"[i] for i in range(n)) if n else "X,Y,..."
            shapes.append(f"{prefix}{names} with {'each ' if (n or 2) > 1 else ''}{rng.describe()}")
        # the words and other kinds too, so a default such as "uniform" lies inside the range --help states
        return "; ".join([*self.words, *shapes, *(f"{o}NAME" for o in self.other)])

    def check(self, text: str, *, form: bool = False) -> str:
        """*text* when its numbers lie in their ranges, else ValueError with one line naming the number."""
        raw = str(text).strip()
        if not raw or raw in self.words or raw.startswith(self.other):
            return text
        for prefix, rng, n in sorted(self.forms, key=lambda f: -len(f[0])):
            if not raw.startswith(prefix):
                continue
            parts = [x.strip() for x in raw[len(prefix):].split(",")]
            if (n is not None and len(parts) != n) or not all(parts):
                want = f"{n} comma-separated numbers" if n and n > 1 else "a number" if n else "comma-separated numbers"
                raise ValueError(f"{shown(raw)!r}: write {prefix}{'...' if not n else ','.join('ABCDEFGH'[:n])} "
                                 f"with {want}")
            for part in parts:
                try:
                    value = parse_number(part, integer=rng.integer)
                except NotANumber as exc:
                    raise NotANumber(f"{exc} (in {shown(raw)})") from None
                if not rng.contains(value):
                    raise OutOfRange(f"{rng.describe()} in {prefix}...", shown(part))
            return text
        return text  # not a numeric form: the option's own check names what it accepts


def any_finite(integer: bool = False) -> Range:
    """The fallback of a numeric option that declares no range: finite, and within 64 bits when whole."""
    if integer:
        return Range(-INT64_MAX, INT64_MAX, integer=True, stated=False)
    return Range(-1.7e308, 1.7e308, stated=False)


# ------------------------------------------------------------------------------------------------- the ranges

SEED = Range(0, SEED_MAX, integer=True, unit="random seed")
ROW_ID = Range(1, INT64_MAX, integer=True, unit="an id")
WEIGHT = Range(0, 1e6)
PERCENTILE = Range(0, 100, unit="percentile")
PROBABILITY = Range(0, 1, lo_open=True, hi_open=True)
FRACTION = Range(0, 1, lo_open=True, hi_open=True, unit="a share")
TOLERANCE = Range(0, 1, lo_open=True, hi_open=True)
SIGMAS = Range(0, 1000, lo_open=True, unit="standard deviations")


def count(lo: int, hi: int, unit: str = "", **kw) -> Range:
    return Range(lo, hi, integer=True, unit=unit, **kw)


# "ClassName.field" -> Range, for every numeric field of a config the command line and the forms expose.
FIELDS: dict[str, Range | Numbers] = {
    # DualEval joint fit (paper 000 Appendix B)
    "JointConfig.lambda_static": WEIGHT, "JointConfig.lambda_pref": WEIGHT, "JointConfig.lambda_bb": WEIGHT,
    "JointConfig.lambda_reg": Range(0, 1e6, lo_open=True, unit="regularisation; at 0 the 2PL scale is not identified"),
    "JointConfig.tie_pct": PERCENTILE, "JointConfig.bb_pct": PERCENTILE,
    "JointConfig.gamma0": Range(0, 1e6),
    "JointConfig.epochs": count(1, 1_000_000, "Adam epochs"), "JointConfig.lr": Range(0, 1000, lo_open=True),
    "JointConfig.max_iter": count(1, 1_000_000, "iterations"), "JointConfig.gtol": TOLERANCE,
    "JointConfig.ftol": TOLERANCE,
    "BaselineConfig.tie_pct": PERCENTILE, "BaselineConfig.bb_pct": PERCENTILE, "BaselineConfig.lambda_reg": Range(0, 1e6, lo_open=True),
    "PairwiseConfig.bootstrap": count(2, 100_000, "replicates", special=(0, "no intervals")),
    "PairwiseConfig.alpha": Range(0, 1e6, unit="pseudo-comparisons per model"),
    "PairwiseConfig.level": PROBABILITY,
    "EvaluateConfig.splits": count(1, 1000, "question splits"), "EvaluateConfig.holdout": FRACTION,
    "EvaluateConfig.seed": SEED, "EvaluateConfig.tie_pct": PERCENTILE,
    "EvaluateConfig.lambda_reg": Range(0, 1e6, lo_open=True, unit="regularisation; at 0 the 2PL scale is not identified"),
    # diagnostics (paper 000 section 4, Appendix D)
    "CompressConfig.seeds": count(1, 1000, "random draws"),
    "CompressConfig.export_fraction": Range(0, 1, lo_open=True, off=(0, "no export"), unit="share of the items to export"),
    "CompressConfig.target": Numbers((("top:", count(2, 10**9, "models"), 1), ("theta:", Range(-1000, 1000), 2)),
                                     ("all",)),
    "CompressConfig.retire_lowest": count(1, 10**9, "items", special=(0, "none")),
    "CompressConfig.k": count(1, 10**9, "items", off=(0, "none")),
    "CompressConfig.random_draws": count(1, 1000, "random draws at most"),
    "CompressConfig.validate": Numbers((("", count(1, 10**9, "items"), None),)),
    "AnomalyConfig.threshold": SIGMAS,
    "ScreenConfig.run": count(1, INT64_MAX, "run id", special=(0, "the latest static or joint fit")),
    "ScreenConfig.threshold": SIGMAS,
    "BootstrapConfig.B": count(2, 100_000, "replicates"), "BootstrapConfig.seed": SEED,
    "ContaminationConfig.alpha": PROBABILITY, "ContaminationConfig.n_boot": count(1, 1_000_000, "replicates"),
    "ContaminationConfig.n_perm": count(1, 1_000_000, "permutations"), "ContaminationConfig.seed": SEED,
    "ContaminationConfig.min_cells": count(1, 10**9, "cells"),
    # estimation (issue 34)
    "EstimateConfig.run": count(1, INT64_MAX, "run id", special=(0, "the latest static or joint fit")),
    "EstimateConfig.level": Range(0.5, 1, hi_open=True, unit="interval level"),
    # near-tie audit (paper 002 Table 12)
    "AuditConfig.purification_rounds": count(0, 100, "rounds"), "AuditConfig.anchor_fraction": FRACTION,
    "AuditConfig.strata": count(1, 1000), "AuditConfig.gap": Range(0, 1, lo_open=True, unit="score units; 0.01 = 1 point"),
    "AuditConfig.gap_tolerance": Range(0, 1), "AuditConfig.controls": count(1, 1_000_000, "random controls"),
    "AuditConfig.owner_cap": count(1, 1_000_000, "models per owner"),
    "AuditConfig.min_family_models": count(1, 1_000_000, "models"),
    "AuditConfig.min_family_models_per_half": count(1, 1_000_000, "models"),
    "AuditConfig.validation_fraction": FRACTION, "AuditConfig.calibration_fraction": FRACTION,
    "AuditConfig.coordinate_ridge": WEIGHT, "AuditConfig.dif_penalty": WEIGHT,
    "AuditConfig.dif_cycles": count(1, 1000, "cycles"),
    "AuditConfig.family_seed": SEED, "AuditConfig.nested_seed": SEED, "AuditConfig.control_seed": SEED,
    "AuditConfig.bootstrap_seed": SEED, "AuditConfig.fraction_seed_index": count(0, 2, "0, 1 or 2"),
    "AuditConfig.significance": PROBABILITY, "AuditConfig.top_items": count(1, 1_000_000, "items"),
    "AuditConfig.bootstrap": count(1, 1_000_000, "replicates", special=(0, "none")),
    "AuditConfig.gap_curve": Range(0, 100, lo_open=True, unit="percentage points"),
    "AuditConfig.fraction_sensitivity": FRACTION,
    "AuditConfig.dimensions": count(1, 100_000, "dimensions"),
    "AuditConfig.split_seeds": count(0, 1000, "other owner splits, each a whole audit again"),
    # broken items (issue 33)
    "ItemAuditConfig.alpha": PROBABILITY, "ItemAuditConfig.n_perm": count(0, 10**6, "permutations"),
    "ItemAuditConfig.perm_budget": Range(1, 1e12, unit="cells x replicates"),
    "ItemAuditConfig.top_k": count(1, 10**6, "models"), "ItemAuditConfig.min_answers": count(1, 10**9, "answers"),
    "ItemAuditConfig.dup_threshold": Range(0, 1, lo_open=True, unit="Jaccard"),
    "ItemAuditConfig.misfit_rmsea": Range(0, 1, unit="RMSEA"), "ItemAuditConfig.seed": SEED,
    # coverage and calibration (paper 003)
    "CoverageConfig.k": count(1, 1_000_000, "gaps"), "CoverageConfig.n_draws": count(2, 100_000, "posterior draws"),
    "CoverageConfig.seed": SEED, "CoverageConfig.interval_gaps": count(1, 1_000_000, "gaps"),
    "CoverageConfig.delta": PROBABILITY, "CoverageConfig.lipschitz": Range(0, 1e6),
    "CoverageConfig.folds": count(2, 1_000_000, "folds", special=(0, "one model at a time")),
    "CoverageConfig.permutations": count(1, 10_000_000, "permutations"),
    "CoverageConfig.target": Numbers((("beta:", Range(0, 1e6, lo_open=True), 2),), ("uniform",), ("benchmark:",)),
    "CalibrateConfig.k": count(1, 10**9, "items", off=(0, "half the benchmark")),
    "CalibrateConfig.random_prunings": count(0, 100_000, "random subsets"),
    "CalibrateConfig.target": Numbers((("beta:", Range(0, 1e6, lo_open=True), 2),), ("uniform",), ("benchmark:",)),
    # BenchFill (paper 003 Algorithm 2, section 4)
    "BenchFillConfig.n_parents": count(1, 1000), "BenchFillConfig.n_children": count(1, 1000),
    "BenchFillConfig.reference_budget": count(1, 100_000), "BenchFillConfig.max_rounds": count(1, 1000, "rounds"),
    "BenchFillConfig.tolerance": TOLERANCE, "BenchFillConfig.prompt_scale": Range(0, 1e6, lo_open=True),
    "BenchFillConfig.memory_size": count(0, 100_000), "BenchFillConfig.seed": SEED,
    "BenchFillConfig.max_child_chars": count(1, 10_000_000, "characters"),
    "FillOptions.gap": count(1, 1_000_000, "gap rank; 1 = largest"),
    "FillOptions.max_stored_chars": count(1, 10**9, "characters", special=(0, "all")),
    "FillOptions.approvals": count(1, 20, "curators who must accept a proposal"),
    "EndpointConfig.timeout": Range(0, 86_400, lo_open=True, unit="seconds per request"),
    "EndpointConfig.max_retries": count(0, 100, "retries"),
    "EndpointConfig.concurrency": count(1, 1024, "requests at once"),
    "EndpointConfig.retry_after_max": Range(0, 86_400, unit="seconds"),
    "EndpointConfig.deadline": Range(0, 86_400, lo_open=True, unit="seconds for a whole request"),
    "EndpointConfig.max_reply_mb": Range(0, 4096, lo_open=True, unit="MiB of one reply"),
    "AnnotatorSpec.trials": count(1, 10_000, "trials per child"),
    # import
    "import.threshold": Range(unit="score at or above which a cell is correct"),
}


def number_list(rng: Range) -> Numbers:
    """Comma-separated numbers, each in *rng* (``--gap-curve 0.25,0.5,1``)."""
    return Numbers((("", rng, None),))


def field_range(owner: str, name: str) -> Range | Numbers | None:
    """The declared range of ``owner.name`` (a config class's name and field), or None."""
    return FIELDS.get(f"{owner}.{name}")
