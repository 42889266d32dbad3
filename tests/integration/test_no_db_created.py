"""Only commands that write may create a database (issue 37 #14), tested over the class: every command and
sub-action of the parser (enumerated from it, each positional choice one case, and the listing options of
``fill``), run on a mistyped ``--db`` in a folder that does not exist, either refuses in one line or does what it
does without a database, and leaves neither the database nor its folder behind; only ``demo``, ``import`` (of
data) and ``endpoints set`` make one. Before, ``endpoints show``, ``fill --list``, ``review`` and every analysis
left a 225 KB database and its folder."""

from __future__ import annotations

import argparse

import pytest

from benchloupe.cli.main import analysis_commands, build_parser
from tests.hostile import check_outcome, run_cli

ANALYSES = ["fit", "compress", "estimate", "next-items", "compare", "anomalies", "screen", "bootstrap", "evaluate", "contamination", "audit", "coverage",
            "calibrate", "endpoints", "fill", "review"]
MAY_CREATE = {("demo",), ("endpoints", "set")}
EXTRA = [["fill", "--list"], ["fill", "--resume", "1"], ["review", "--json"], ["flags", "--undo"],
         ["flags", "--history", "1"], ["flags", "--set", "1", "dismissed"], ["open", "--json"], ["list", "--json"]]


def _cases() -> list[list[str]]:
    """Every command path with a value for each required positional (each choice of a positional with choices)."""
    top = build_parser(ANALYSES)
    assert len(analysis_commands()) == len(ANALYSES)  # a new analysis command joins this list
    out = []
    for name, parser in [a for a in top._actions if isinstance(a, argparse._SubParsersAction)][0].choices.items():
        variants = [[name]]
        for action in parser._actions:
            if action.option_strings or action.nargs in ("?", "*", argparse.REMAINDER):
                continue
            if action.choices:
                variants = [v + [str(c)] for v in variants for c in action.choices]
            else:
                variants = [v + ["x"] for v in variants]
        out += variants
    return out + EXTRA


@pytest.mark.parametrize("argv", _cases(), ids=" ".join)
def test_a_command_on_a_missing_database_creates_nothing_unless_it_writes(tmp_path, argv):
    db = tmp_path / "mistyped" / "work.db"
    rc, out, err = run_cli(["--db", db, *argv])
    if tuple(argv[:2]) in MAY_CREATE or tuple(argv[:1]) in MAY_CREATE:
        return
    check_outcome(" ".join(argv), rc, out, err, usage=True)
    assert not db.parent.exists(), f"{argv} made {db.parent}"
    if rc == 1 and "database" in err:
        assert "no such database" in err
