"""Every subcommand's --help reads whole (issue 32, point 12): group titles are not cut mid-sentence and carry no
internal class name or docstring markup, every text option with fixed choices lists them, every text field of an
analysis config is either a declared choice or declared free text, and a default lies inside the range its own
help states (or the help says what leaving the option out means)."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from benchloupe.cli import options
from benchloupe.cli.main import build_parser


def _walk(parser: argparse.ArgumentParser, path=()):
    yield path, parser
    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            for name, sub in act.choices.items():
                yield from _walk(sub, (*path, name))


def _all_parsers():
    top = build_parser(["--help"])
    names = [n for a in top._actions if isinstance(a, argparse._SubParsersAction) for n in a.choices]
    full = build_parser(names)  # every analysis command registered whole
    return [(p, sub) for p, sub in _walk(full) if p]


PARSERS = _all_parsers()


@pytest.mark.parametrize("path,parser", PARSERS, ids=[" ".join(p) for p, _ in PARSERS])
def test_help_reads_whole(path, parser):
    text = parser.format_help()
    for group in parser._action_groups:
        title = group.title or ""
        assert title.count("(") == title.count(")"), (path, title)  # before: "CompressConfig (defaults: Fisher..."
        assert not re.search(r"[A-Z][a-z]+Config\b", title), (path, title)
    assert "``" not in text and ":func:" not in text and ":class:" not in text, path
    for act in parser._actions:
        if act.choices and not isinstance(act, argparse._SubParsersAction):
            for c in act.choices:
                assert str(c) in text, (path, act.dest, c)


def _config_classes():
    from benchloupe.engine.neartie import AuditConfig
    from benchloupe.jobs import calibration, coverage, diagnostics

    out = [calibration.JointConfig, calibration.EvaluateConfig, coverage.CoverageConfig, coverage.CalibrateConfig,
           AuditConfig]
    out += [getattr(diagnostics, n) for n in dir(diagnostics) if n.endswith("Config")
            and dataclasses.is_dataclass(getattr(diagnostics, n)) and n not in ("JointConfig",)]
    return out


def test_every_text_setting_is_a_declared_choice_or_free_text():
    """The class: a new text setting with fixed values must list them in --help (CHOICES) or say it is free."""
    missing = []
    for cls in _config_classes():
        for f in dataclasses.fields(cls):
            if f.init and options._field_type(f) is str and options.field_choices(cls, f.name) is None:
                from benchloupe import ranges

                if ranges.field_range(cls.__name__, f.name) is None and f"{cls.__name__}.{f.name}" not in \
                        options.FREE_TEXT:
                    missing.append(f"{cls.__name__}.{f.name}")
    assert not missing


@pytest.mark.parametrize("path,parser", PARSERS, ids=[" ".join(p) for p, _ in PARSERS])
def test_defaults_lie_in_the_range_the_help_states(path, parser):
    from benchloupe import ranges

    text = " ".join(parser.format_help().split())
    for act in parser._actions:
        rng = getattr(act, "range", None)
        if rng is None or not act.help:
            continue
        m = re.match(r"default: ([^;]+);", " ".join(act.help.split()))
        if not m or "leave the option out" in m.group(1) or m.group(1).strip() in ("none", "per variant"):
            continue
        shown = m.group(1).strip()
        try:
            if isinstance(rng, ranges.Numbers):
                rng.check(shown)
            else:
                rng.parse(shown)
        except (ranges.OutOfRange, ranges.NotANumber, ValueError):  # before: calibrate --k "default: 0; 1 to ..."
            if not rng.describe().startswith(f"{shown} ("):  # "0 (none) or ...": the range names it
                pytest.fail(f"{' '.join(path)} {act.option_strings}: default {shown} outside {rng.describe()}")
        assert act.option_strings[0] in text


def test_compress_and_anomalies_list_their_choices(capsys):
    from benchloupe.cli.main import main

    for cmd, wanted in (("compress", ["targeted_log", "top_fisher", "dualeval|own", "stated|estimate|none"]),
                        ("anomalies", ["auto|joint|static|arena", "stated|estimate|none"])):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        out = capsys.readouterr().out
        assert "analysis settings (defaults as in the paper unless noted):" in out
        for w in wanted:
            assert w in out, (cmd, w)
