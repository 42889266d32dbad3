"""The analysis forms of the Runs screen: one field per config field, prefilled with the paper's defaults, showing
only the fields that apply to the chosen method (issue 11, item 9) and refusing bad values with one line that
names the field before anything starts (item 4).

What applies when is stated once per config class in :data:`RULES` (e.g. a joint fit's learning rate only with
the "adam" optimiser, the arena weights only when the mode uses arena data, coverage's prior only for the MAP
fit); closed sets of values in :data:`CHOICES`; the range of every number is the command line's, declared once in
:data:`benchloupe.ranges.FIELDS` (issue 24: ``nan``, ``inf``, ``1e309``, ``10^20`` and ``-1`` get the same words
here as there). A field that does not apply is hidden and keeps its default.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from collections.abc import Callable, Mapping
from pathlib import Path

from benchloupe import ranges
from benchloupe.hints import say
from benchloupe.tui.widgets.dialogs import Field

JOINT_MODES = ("joint", "static", "arena")
AUTO_MODES = ("auto", *JOINT_MODES)
ARENA_FIELDS = ("arena", "reward_model")  # the form's own fields beside the config's

Raw = Mapping[str, str]


def _cfg(raw: Raw, name: str) -> str:
    return raw.get(f"cfg-{name}", "")


def _uses_arena(raw: Raw) -> bool:
    return _cfg(raw, "mode") in ("joint", "arena", "auto", "")


def _number(raw: Raw, name: str) -> float:
    return float(_cfg(raw, name) or 0)


_JOINT = {
    "lambda_static": lambda r: _cfg(r, "mode") in ("joint", "static"),
    **{n: _uses_arena for n in ("lambda_pref", "lambda_bb", "tie_pct", "bb_pct", "gamma0", *ARENA_FIELDS)},
    **{n: (lambda r: _cfg(r, "optimizer") == "adam") for n in ("epochs", "lr")},
    **{n: (lambda r: _cfg(r, "optimizer") != "adam") for n in ("max_iter", "gtol", "ftol")},
}
_AUTO = {n: (lambda r: _cfg(r, "mode") != "static") for n in ARENA_FIELDS}
RULES: dict[str, dict[str, Callable[[Raw], bool]]] = {
    "JointConfig": _JOINT,
    "CompressConfig": {**_AUTO, "export_name": lambda r: _number(r, "export_fraction") > 0
                       or (_cfg(r, "purpose") == "estimate" and _number(r, "k") > 0),
                       "k": lambda r: _cfg(r, "purpose") == "estimate"},
    "AnomalyConfig": _AUTO,
    "BootstrapConfig": _AUTO,
    "ContaminationConfig": _AUTO,
    "CoverageConfig": {
        "n_draws": lambda r: _cfg(r, "uncertainty") != "none",
        "prior": lambda r: _cfg(r, "method") == "map",
        "folds": lambda r: any(w.strip() in ("loo", "all") for w in _cfg(r, "robustness").split(",")),
        "permutations": lambda r: bool(_cfg(r, "improvement")),
    },
}


def _choices() -> dict[str, dict[str, tuple[str, ...]]]:
    from benchloupe.jobs.audit import FAMILY_SOURCES
    from benchloupe.jobs.calibration import VARIANTS
    from benchloupe.jobs.data import CHANCE_MODES
    from benchloupe.jobs.diagnostics import PURPOSES, SELECTIONS

    joint = {"mode": JOINT_MODES, "variant": VARIANTS, "optimizer": ("newton", "block", "lbfgs", "adam"),
             "reg_reduction": ("mean", "sum")}
    return {
        "JointConfig": joint,
        "BaselineConfig": {"variant": VARIANTS},
        "EvaluateConfig": {"variant": VARIANTS},
        "CompressConfig": {"mode": AUTO_MODES, "strategy": SELECTIONS, "baseline_reference": ("dualeval", "own"),
                           "chance": CHANCE_MODES, "purpose": PURPOSES},
        "AnomalyConfig": {"mode": AUTO_MODES, "chance": CHANCE_MODES},
        "BootstrapConfig": {"mode": AUTO_MODES},
        "ContaminationConfig": {"mode": AUTO_MODES},
        "CoverageConfig": {"method": ("map", "mml"), "uncertainty": ("laplace", "bootstrap", "none"),
                           "prior": ("normal", "hierarchical_theta", "hierarchical_b")},
        "AuditConfig": {"protocol": ("primary", "full"), "anchor_ties": ("exact", "float"),
                        "family_from": tuple(FAMILY_SOURCES), "representative": ("median", "id")},
    }


# a field whose empty value means something the name does not say
HELP: dict[str, dict[str, str]] = {
    "AuditConfig": {"split_seeds": "other owner splits to rerun; empty = 20 with protocol full, else 0"},
}


def parser_for(default: object, annotation: object = None):
    """Parse a form value back to the type of the field's default (None allowed where the default is None: then
    the annotation says which type, e.g. ``float | None``). Numbers must be finite and fit 64 bits."""
    hint = str(annotation or "")

    def parse(raw: str):
        if isinstance(default, bool):
            if raw.lower() in ("true", "yes", "1", "on"):
                return True
            if raw.lower() in ("false", "no", "0", "off"):
                return False
            raise ValueError(f"{raw!r} is not true/false")
        if default is None:
            if raw in ("", "None", "none"):
                return None
            if hint.startswith("float"):
                return _float(raw)
            if hint.startswith("int"):
                return _int(raw)
            if hint.startswith("str"):
                return raw
            try:
                return ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                return raw
        if isinstance(default, int):
            return _int(raw)
        if isinstance(default, float):
            return _float(raw)
        if isinstance(default, tuple | list | dict):
            try:
                value = ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                raise ValueError(f"{raw[:40]!r} is not a {type(default).__name__} literal") from None
            if not isinstance(value, type(default)):
                raise ValueError(f"expected a {type(default).__name__}")
            return value
        return raw
    return parse


def _int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{raw[:40]!r} is not a whole number") from None
    if abs(value) >= 2 ** 63:
        raise ValueError(f"{raw[:40]}... is too large")
    return value


def _float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{raw[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{raw!r} is not a finite number")
    return value


def default_config(analysis) -> object:
    """The config the form starts from: the paper's defaults, with ``mode`` set to the analysis when that is
    one of the config's modes (the static-only DualEval fit is JointConfig with mode "static"; an anomaly run's
    mode stays "auto")."""
    modes = _choices().get(analysis.config_cls.__name__, {}).get("mode", ())
    if analysis.name in modes:
        return analysis.config_cls(mode=analysis.name)
    return analysis.config_cls()


def analysis_fields(analysis, config, benchmark: str) -> list[Field]:
    """The form of *analysis*: benchmark, then (where arena data can be used) the arena benchmark and reward
    model, then one field per config field, each with its choices and its rule."""
    name = type(config).__name__
    rules, choices = RULES.get(name, {}), _choices().get(name, {})
    fields = [Field("benchmark", "benchmark", benchmark, _required)]
    if "arena" in analysis.inputs or analysis.inputs == "any":
        fields.append(Field("arena", "arena benchmark", "", lambda s: s or None, "empty = the same benchmark",
                            applies=rules.get("arena")))
        fields.append(Field("reward_model", "reward model", "", lambda s: s or None,
                            "empty = the arena set's only reward model", applies=rules.get("reward_model")))
    helps = HELP.get(name, {})
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        fields.append(Field(f"cfg-{f.name}", f.name, "" if value is None else str(value),
                            _ranged(name, f.name, parser_for(value, f.type), each=isinstance(value, tuple | list)),
                            helps.get(f.name, ""), choices=choices.get(f.name, ()), applies=rules.get(f.name)))
    return fields


def _ranged(owner: str, name: str, parse: Callable[[str], object], *, each: bool = False) -> Callable[[str], object]:
    """*parse*, then the field's declared range (:data:`benchloupe.ranges.FIELDS`); a number of a field without
    one must still be finite and fit 64 bits (``parser_for``). ``each``: the field holds a tuple of numbers."""
    declared = ranges.field_range(owner, name)
    return parse if declared is None else _ranged_with(declared, parse, each=each)


def _required(raw: str) -> str:
    if not raw:
        raise ValueError("required")
    return raw


def build_config(config, values: dict):
    """The config of the submitted form (fields that did not apply keep their defaults); the config's own
    validation runs here, and coverage's option checks, so a bad combination never starts a run."""
    cfg = {k[4:]: v for k, v in values.items() if k.startswith("cfg-")}
    conf = dataclasses.replace(config, **cfg)
    if type(conf).__name__ == "CoverageConfig":
        from benchloupe.jobs.coverage import validate_config

        validate_config(conf)
    return conf


def form_check(config, db_path: Path) -> Callable[[dict], None]:
    """The whole-form check: the config builds and validates, and the named benchmarks exist."""
    def check(values: dict) -> None:
        build_config(config, values)
        from benchloupe.store import read
        from benchloupe.store.db import StoreError, connect

        conn = connect(db_path)
        try:
            for key in ("benchmark", "arena"):
                if values.get(key):
                    try:
                        read.benchmark_id(conn, values[key])
                    except StoreError as exc:
                        label = "benchmark" if key == "benchmark" else "arena benchmark"
                        raise ValueError(say(f"{label}: ", exc.args[0] if exc.args else "not found")) from None
        finally:
            conn.close()
    return check


# ------------------------------------------------------------------------------------------------ BenchFill form

def fill_fields(config, gap_rank: int) -> list[Field]:
    """The BenchFill session form: the gap, the answer format, the best-of-N baseline and the search settings;
    the seed (the baseline's uniform parent draw, paper 003 E.1) only when the baseline runs."""
    def ranged(name: str, parse):
        return _ranged(type(config).__name__, name, parse)

    fields = [Field("gap", "gap (1 = largest)", str(gap_rank), _ranged("FillOptions", "gap", parser_for(1))),
              Field("answer_format", "answer format", "auto", str, "auto = choice when items have a chance level",
                    choices=("auto", "choice", "short")),
              Field("baseline", "best-of-N baseline", "False", parser_for(False))]
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, int | float | str | bool):
            applies = (lambda r: parser_for(False)(r.get("baseline", "") or "false")) if f.name == "seed" else None
            fields.append(Field(f"cfg-{f.name}", f.name, str(value), ranged(f.name, parser_for(value)),
                                applies=applies))
    return fields


def _ranged_with(declared: ranges.Range | ranges.Numbers, parse, *, each: bool = False):
    """The field's text read as the command line reads it (:meth:`benchloupe.ranges.Range.parse`: the same
    numerals, the same range, the same words), except that the field's ``off`` value (its default) is accepted,
    as a form always holds a value. Empty or "None" goes to *parse* (fields whose default is None); a tuple
    (a dimension grid) has each number checked; a text holding numbers (``beta:A,B``) is checked by its
    :class:`~benchloupe.ranges.Numbers`."""

    def checked(raw: str):
        text = raw.strip()
        if isinstance(declared, ranges.Range) and each:  # (1, 2, 4), [0.25, 0.5] or 0.25,0.5: each number read
            inner = text.strip("()[] ")
            return tuple(declared.parse(x.strip(), form=True) for x in inner.split(",") if x.strip())
        if isinstance(declared, ranges.Range) and text and text.lower() != "none":
            return declared.parse(text, form=True)
        value = parse(raw)
        if isinstance(declared, ranges.Numbers):
            return declared.check(value, form=True) if isinstance(value, str) else value
        for v in value if isinstance(value, tuple | list) else ():
            declared.check(v, form=True)
        return value
    return checked
