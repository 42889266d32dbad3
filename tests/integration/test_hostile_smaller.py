"""Issue 37 #15, the smaller points (the endpoint ones are in test_hostile_endpoint_bounds.py and
test_hostile_endpoint_urls.py): one range for ``search --limit``; a value outside an option's fixed choices is
usage (exit 2) for every analysis option that has them; a note with a line break never forges a history line; CSV
exports byte-exact by default with a warning, ``--safe-csv`` on request; a review lease whose heartbeat lies in the
future expires; a database reached through a symlink is judged by its real folder."""

from __future__ import annotations

import csv
import io
import os
import time

import pytest

from benchloupe.store import fill, runners
from benchloupe.store.db import write_problem
from tests.hostile import check_outcome, dump, run_cli
from tests.tui.conftest import add_flags


def test_search_limit_has_one_range(demo_db):
    from benchloupe.store.search import MAX_LIMIT

    rc, out, _ = run_cli(["search", "--help"])
    assert f"{MAX_LIMIT:,}" in out and "1,000,000,000" not in out
    for value in (MAX_LIMIT + 1, 10**9):
        rc, out, err = run_cli(["--db", demo_db, "search", "x", "--limit", value])
        check_outcome(value, rc, out, err, usage=True)
        assert rc == 1 and f"from 1 to {MAX_LIMIT:,}" in err, err  # the range stated once, by the option
    assert run_cli(["--db", demo_db, "search", "x", "--limit", MAX_LIMIT])[0] == 0


@pytest.mark.parametrize("command", ["compress", "anomalies", "bootstrap", "evaluate", "coverage", "calibrate",
                                     "screen", "contamination"])
def test_a_value_outside_fixed_choices_is_usage(command, demo_db):
    """Every option of an analysis with fixed choices (--chance, --strategy, ...) refuses another value as usage:
    exit 2, one line (``--chance guess`` exited 1)."""
    from benchloupe.cli.main import build_parser

    parser = build_parser([command])
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    chosen = [a for a in sub._actions if a.option_strings and a.choices and a.dest.startswith("cfg_")]
    assert chosen or command in ("screen", "contamination", "calibrate"), command
    before = dump(demo_db)
    for action in chosen:
        rc, out, err = run_cli(["--db", demo_db, command, "demo-math", action.option_strings[0], "guess"])
        check_outcome((command, action.option_strings[0]), rc, out, err, before, dump(demo_db), usage=True)
        assert rc == 2 and "invalid choice" in err, (command, err)


@pytest.mark.parametrize("breaker", ["\n", "\r\n", "\r", "\u2028", "\u2029", "\x85", "\v", "\f"])
def test_a_note_with_a_line_break_cannot_forge_a_history_line(demo_db, breaker):
    add_flags(demo_db)
    forged = f"fine{breaker}confirmed  by boss at 09:00"
    rc, _, err = run_cli(["--db", demo_db, "--as", "ann", "flags", "--set", "1", "dismissed", "--note", forged])
    assert rc == 0, err
    rc, out, err = run_cli(["--db", demo_db, "--as", "bea", "flags", "--set", "1", "unsure"])
    assert rc == 0, err
    rc, out, err = run_cli(["--db", demo_db, "flags", "--history", "1"])
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == 2 and not any(ln.startswith("confirmed") for ln in lines), out
    assert "\u23ce" in out and "confirmed  by boss" in out  # the note is all there, on its line


FORMULAS = ["=1+1", "+1+1", "-1+1", "@SUM(A1)", "=HYPERLINK(\"http://x\",\"y\")", "\t=1", "=cmd|' /C calc'!A0"]
NOT_FORMULAS = ["-1.5", "+3", "1e5", "plain", "a=b", " =1"]


def test_csv_export_is_byte_exact_by_default_with_a_warning_and_safe_on_request(tmp_path):
    db = tmp_path / "c.db"
    src = tmp_path / "items.csv"
    texts = FORMULAS + NOT_FORMULAS
    with src.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["model", "item", "correct", "text"])
        for i, t in enumerate(texts):
            w.writerow(["m1", f"i{i}", i % 2, t])
            w.writerow(["m2", f"i{i}", (i + 1) % 2, t])
    rc, _, err = run_cli(["--db", db, "import", "long", src, "-b", "f"])
    assert rc == 0, err
    rc, out, err = run_cli(["--db", db, "export", "items", "f"])
    assert rc == 0 and err.count("\n") == 1 and f"{len(FORMULAS)} cells start with" in err and "--safe-csv" in err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["text"] for r in rows] == texts  # exactly as stored
    rc, out, err = run_cli(["--db", db, "export", "items", "f", "--safe-csv"])
    assert rc == 0 and err == "", err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["text"] for r in rows] == ["'" + t for t in FORMULAS] + NOT_FORMULAS


@pytest.mark.parametrize("ahead", [60.0, 3600.0, 86_400.0 * 365])
def test_a_lease_whose_heartbeat_lies_in_the_future_expires(ahead):
    now = time.time()
    other_host = {"host": "another-host", "pid": 1, "token": "t"}
    assert fill.review_alive(other_host, now + ahead, now) is False
    assert runners.alive(other_host, now + ahead, now) is False
    assert fill.review_alive(other_host, now - 1.0, now) is True  # a recent one still holds


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes every folder: no read-only folder to test with")
def test_a_database_through_a_symlink_is_judged_by_its_real_folder(demo_db, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    link = ro / "demo.db"
    link.symlink_to(demo_db)
    ro.chmod(0o555)
    try:
        assert write_problem(link) is None
        rc, _, err = run_cli(["--db", link, "flags"])
        assert rc == 0 and "read-only" not in err, err
    finally:
        ro.chmod(0o755)
