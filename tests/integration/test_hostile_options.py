"""Every numeric option and argument x {nan, inf, -inf, -1, 0, 1e309, 10^20} (issue 24, defect 6), the same in the
CLI and the workbench's forms.

The cases are generated from the real parser (``benchloupe.cli.main.build_parser`` with every command
registered), so an option added later is covered without touching this file: each option or positional whose
value is a number, or a text that holds numbers (``beta:A,B``, ``0.25,0.5``), is tried with each of the issue's
numbers (and with a word, a usage error). A value outside the option's stated range must be refused before any
work: exit 1, one line naming the option and the range, the database unchanged. A value inside it runs the
command on a small database and ends as every hostile case does (tests/hostile.py). A numeric option without a
stated range fails ``test_every_numeric_option_states_its_range`` by name.

The forms: every numeric field of every analysis form of the Runs screen, of the BenchFill form and of the
import dialog reads the same numbers with the same range and the same words as the command line (the field's
"off" default, e.g. export_fraction 0, is a form's value and the one allowed difference).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil

import numpy as np
import pandas as pd
import pytest

from benchloupe import ranges
from benchloupe.cli.main import analysis_commands, build_parser
from benchloupe.cli.options import Ranged, RangeError
from tests.hostile import NUMBERS, check_outcome, dump, run_cli

BENCH = "seed"
ALL = ["open", "demo", "list", "show", "db", "import", "export", "alias", "flags", "search", "fit", "compress", "estimate", "next-items", "compare",
       "anomalies", "screen", "bootstrap", "evaluate", "contamination", "audit", "coverage", "calibrate", "endpoints",
       "fill", "review"]
# positionals the generator fills in (the first choice otherwise); per (command, dest)
POSITIONAL = {("fit", "mode"): "static", ("audit", "kind"): "neartie", ("audit", "benchmarks"): BENCH,
              ("db", "action"): "remove-run", ("endpoints", "action"): "set", ("endpoints", "role"): "judge",
              ("export", "what"): "items", ("import", "format"): "wide", ("alias", "model"): "m01",
              ("alias", "aliases"): "x1", ("search", "text"): "fox"}
EXTRA = {"demo": ["--bare"], "compress": ["--recovery", "no"], "next-items": ["--model", "m01"]}  # keeps an in-range case small


def _walk(parser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))
        else:
            yield path, parser, action


def _parser():
    return build_parser(ALL)


def numeric_actions() -> list[tuple[tuple, argparse.Action]]:
    """(command path, action) of every option or positional that reads a number."""
    out = []
    for path, _, action in _walk(_parser()):
        if isinstance(action, Ranged) or action.type in (int, float):
            out.append((path, action))
    return out


def _positionals(path: tuple, skip: str | None) -> list[str]:
    parser = _parser()
    for name in path:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    values = []
    for a in parser._positionals._group_actions:
        if a.dest == skip or a.dest == "command":
            continue
        if a.nargs == "?" and (path[0], a.dest) not in POSITIONAL:
            continue
        value = POSITIONAL.get((path[0], a.dest))
        if value is None:
            value = a.choices[0] if a.choices else BENCH
        values.append(value)
    return values


def _flag(action) -> str:
    return action.option_strings[0] if action.option_strings else action.dest


def _value_text(action, number: str) -> str:
    """The issue's number as this option takes it: alone, or inside its text (beta:X,2; X,0.5)."""
    rng = action.range if isinstance(action, Ranged) else None
    if isinstance(rng, ranges.Numbers):
        prefix, _, n = rng.forms[0]
        return f"{prefix}{number}" + (",2" * ((n or 2) - 1))
    return number


def _in_range(action, text: str) -> bool:
    rng = action.range if isinstance(action, Ranged) else ranges.any_finite(action.type is int)
    try:
        (rng.check(text) if isinstance(rng, ranges.Numbers) else rng.parse(text))
    except ValueError:
        return False
    return True


def _argv(db, path, action, text) -> list[str]:
    pos = _positionals(path, action.dest if not action.option_strings else None)
    value = [] if action.option_strings else [text]
    opt = [_flag(action), text] if action.option_strings else []
    if path[0] == "db" and not action.option_strings:
        pos = ["remove-run"]
    return ["--db", db, *path, *pos, *value, *opt, *EXTRA.get(path[0], [])]


CASES = [(f"{' '.join(path)}:{_flag(a)}={n}", path, a, n) for path, a in numeric_actions() for n in (*NUMBERS, "abc")]


@pytest.fixture(scope="module")
def template_db(tmp_path_factory):
    """12 models x 20 items, static, with families: small enough that an in-range case runs in well under a
    second, real enough that fits, coverage and the audit's checks run."""
    from benchloupe.store.db import connect
    from benchloupe.store.importers.base import ParsedImport
    from benchloupe.store.writer import write_import

    root = tmp_path_factory.mktemp("hostile-options")
    db = root / "template.db"
    rng = np.random.default_rng(24)
    theta, b = rng.normal(size=12), rng.normal(size=20)
    y = (rng.random((12, 20)) < 1 / (1 + np.exp(-(theta[:, None] - b[None, :])))).astype(np.int8)
    conn = connect(db)
    write_import(conn, ParsedImport(BENCH, "static", pd.DataFrame({"key": [f"q{j:02d}" for j in range(20)],
                                                                   "text": [f"a fox {j}?" for j in range(20)]}),
                                    pd.DataFrame({"name": [f"m{i:02d}" for i in range(12)],
                                                  "family": [f"f{i % 3}" for i in range(12)]}),
                                    correct=y, source="test"), fmt="test")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return db


def test_every_numeric_option_states_its_range():
    """A numeric option is read through a declared Range (benchloupe.ranges): one line in FIELDS for a config
    field, ``ranged_argument(...)`` for an option of the command line alone."""
    missing = [f"{' '.join(path)} {_flag(a)}" for path, a in numeric_actions()
               if not isinstance(a, Ranged) or not getattr(a.range, "stated", True)]
    assert not missing, "declare a range for: " + ", ".join(missing)
    assert len(numeric_actions()) >= 80  # the parser really was walked whole


def test_the_generator_covers_the_issues_instances():
    ids = {c[0] for c in CASES}
    for case in ("evaluate:--splits=100000000000000000000", "anomalies:--threshold=nan", "anomalies:--threshold=-1",
                 "audit:--gap=inf", "coverage:--target=0", "compress:--export-fraction=0", "bootstrap:--B=1e309",
                 "db:run=100000000000000000000"):
        assert case in ids, case


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_number_option(case, template_db, tmp_path):
    case_id, path, action, number = case
    db = tmp_path / "t.db"
    shutil.copy(template_db, db)
    before = dump(db)
    text = _value_text(action, number)
    rc, out, err = run_cli(_argv(db, path, action, text))
    if number == "abc":
        assert rc == 2 and err.count("\n") == 1 and _flag(action).lower() in err.lower(), (case_id, rc, err)
        assert dump(db) == before
        return
    if not _in_range(action, text):  # refused as it is read: one line naming the option and its range
        assert rc == 1, (case_id, rc, err)
        assert err.count("\n") == 1 and ("must be" in err or "leave" in err or "is not" in err), (case_id, err)
        assert f"{_flag(action).lower()} " in err.lower(), (case_id, err)
        assert dump(db) == before, case_id
        return
    check_outcome(case_id, rc, out, err, before, dump(db) if rc else None)


def test_the_issues_instances_say_the_range(template_db, tmp_path):
    """The exact lines of the issue's instances (each ran, or was an internal error, before the fix)."""
    db = tmp_path / "t.db"
    shutil.copy(template_db, db)
    for argv, line in (
            (["evaluate", BENCH, "--splits", "99999999999999999999"],
             "--splits 99999999999999999999: must be a whole number from 1 to 1,000 (question splits)"),
            (["anomalies", BENCH, "--threshold", "nan"], "--threshold nan: must be a number above 0 and at most 1,000"),
            (["anomalies", BENCH, "--threshold", "-1"], "--threshold -1: must be a number above 0"),
            (["anomalies", BENCH, "--threshold", "1e309"], "--threshold 1e309: must be a number above 0"),
            (["audit", "neartie", BENCH, "--gap", "inf"], "--gap inf: must be a number above 0 and at most 1"),
            (["coverage", BENCH, "--target", "beta:0,0"], "--target beta:0,0: must be a number above 0"),
            (["coverage", BENCH, "--target", "beta:-1,2"], "(got -1)"),
            (["coverage", BENCH, "--target", "beta:nan,1"], "(got nan)"),
            (["compress", BENCH, "--export-fraction", "0"], "--export-fraction 0: leave --export-fraction out"),
            (["bootstrap", BENCH, "--B", "99999999999999999999"], "--B 99999999999999999999: must be a whole number"),
            (["db", "remove-run", "99999999999999999999999"], "must be a whole number from 1 to"),
            (["review", "--session", "-1"], "--session -1: must be a whole number from 1"),
            (["review", "--session", "7"], "no BenchFill session 7")):
        rc, _, err = run_cli(["--db", db, *argv])
        assert rc == 1 and err.count("\n") == 1 and line in err, (argv, rc, err)


def test_flag_ids_and_empty_db_path(template_db, tmp_path):
    """``flags --set ID STATE`` reads its id against the id range; ``--db ''`` is not the default database."""
    db = tmp_path / "t.db"
    shutil.copy(template_db, db)
    before = dump(db)
    for number in NUMBERS:
        rc, out, err = run_cli(["--db", db, "flags", "--set", number, "open"])
        check_outcome(number, rc, out, err, before, dump(db))
        assert rc == 1 and ("flag id" in err or "no flag" in err), (number, err)
    rc, _, err = run_cli(["--db", "", "list"])
    assert rc == 1 and "--db is empty" in err and err.count("\n") == 1


# -------------------------------------------------------------------------------------------------- the forms

def _form_cases():
    """(id, face, field, CLI argv or None, range) for every numeric field of every form."""
    import benchloupe.jobs as jobs
    from benchloupe.engine.benchfill import BenchFillConfig
    from benchloupe.tui.screens import import_form, run_forms

    command = {"joint": ["fit", "joint"], "static": ["fit", "static"], "arena": ["fit", "arena"], "bt": ["fit", "bt"],
               "avg-reward": None, "neartie": ["audit", "neartie"], "items": ["audit", "items"]}
    # fields whose flag is not --<field> (None: no flag; the form's own setting)
    flags = {"items": {"alpha": "--fdr", "n_perm": "--permutations", "top_k": "--top-k", "seed": "--seed"}}
    out = []
    for name, analysis in jobs.ANALYSES.items():
        config = run_forms.default_config(analysis)
        fields = {f.name: f for f in run_forms.analysis_fields(analysis, config, BENCH)}
        for f in dataclasses.fields(config):
            declared = ranges.field_range(type(config).__name__, f.name)
            if not isinstance(declared, ranges.Range):
                continue
            cli = command.get(name, [name])
            if isinstance(getattr(config, f.name), tuple):  # a list of numbers: the CLI's own list option
                flag = {"dimensions": "--k-grid", "gap_curve": "--gap-curve", "fraction_sensitivity": "--fractions"}
                out.append((f"{name}:{f.name}", fields[f"cfg-{f.name}"], [*cli, BENCH, flag[f.name]], declared, True))
                continue
            flag = flags[name].get(f.name) if name in flags else "--" + f.name.replace("_", "-")
            out.append((f"{name}:{f.name}", fields[f"cfg-{f.name}"], cli and flag and [*cli, BENCH, flag],
                        declared, False))
    fill = {f.name: f for f in run_forms.fill_fields(BenchFillConfig(), 1)}
    out.append(("fill:gap", fill["gap"], ["fill", BENCH, "--gap"], ranges.FIELDS["FillOptions.gap"], False))
    for f in dataclasses.fields(BenchFillConfig):
        declared = ranges.field_range("BenchFillConfig", f.name)
        if isinstance(declared, ranges.Range):
            out.append((f"fill:{f.name}", fill[f"cfg-{f.name}"], None, declared, False))
    imp = {f.name: f for f in import_form.import_fields()}
    out.append(("import:threshold", imp["threshold"], ["import", "lm-eval", "x.jsonl", "--threshold"],
                ranges.FIELDS["import.threshold"], False))
    return out


FORM_CASES = _form_cases()


def test_every_numeric_form_field_has_a_declared_range():
    import benchloupe.jobs as jobs
    from benchloupe.engine.benchfill import BenchFillConfig

    missing = []
    for config in [a.config_cls for a in jobs.ANALYSES.values()] + [BenchFillConfig]:
        for f in dataclasses.fields(config):
            default = f.default if f.default is not dataclasses.MISSING else None
            numeric = (isinstance(default, int | float) and not isinstance(default, bool)) or \
                str(f.type).startswith(("int", "float"))
            if numeric and ranges.field_range(config.__name__, f.name) is None:
                missing.append(f"{config.__name__}.{f.name}")
    assert not missing, "declare these in benchloupe.ranges.FIELDS: " + ", ".join(missing)
    assert len(FORM_CASES) >= 60


@pytest.mark.parametrize("case", FORM_CASES, ids=[c[0] for c in FORM_CASES])
def test_form_field_reads_numbers_as_the_command_line(case):
    case_id, field, cli, declared, many = case
    for number in NUMBERS:
        try:
            field.parse(f"({number}, 2)" if many else number)
            form_error = None
        except ValueError as exc:
            form_error = str(exc)
        expected = None
        try:
            declared.parse(number, form=True)
        except ValueError as exc:
            expected = str(exc)
        assert form_error == expected, (case_id, number, form_error, expected)
        if form_error is not None:
            assert "\n" not in form_error and form_error.startswith("must be "), (case_id, form_error)
        if cli is None:
            continue
        argv = [*cli, f"{number},2" if many else number]
        try:
            build_parser(argv).parse_args(argv)
            cli_error = None
        except RangeError as exc:
            cli_error = str(exc)
        if form_error is None and cli_error is not None:  # the form's off default, left out on the CLI
            assert declared.off is not None and float(number) == declared.off[0], (case_id, number, cli_error)
            continue
        assert (form_error is None) == (cli_error is None), (case_id, number, form_error, cli_error)
        if cli_error is not None:
            assert declared.describe() in cli_error, (case_id, cli_error)


def test_analysis_commands_are_all_walked():
    assert len(analysis_commands()) >= 13


def test_the_endpoint_dialogs_trials_read_as_the_command_lines():
    """The BenchFill screen's endpoints dialog takes ``name=model*trials``: its trials are the CLI's ``--trials``
    (10^20 trials was accepted and asked of the annotator)."""
    from benchloupe.tui.screens.benchfill import _parse_annotators

    declared = ranges.FIELDS["AnnotatorSpec.trials"]
    for number in NUMBERS:
        argv = ["endpoints", "set", "annotator", "--name", "a", "--trials", number]
        try:
            build_parser(argv).parse_args(argv)
            cli_ok = True
        except RangeError as exc:
            cli_ok = False
            assert declared.describe() in str(exc)
        try:
            _parse_annotators(f"a=b*{number}")
            form_ok = True
        except ValueError as exc:
            form_ok = False
            assert declared.describe() in str(exc) and "\n" not in str(exc)
        assert cli_ok == form_ok, number
