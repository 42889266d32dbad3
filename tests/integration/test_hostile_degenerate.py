"""Issue 37 #12: every analysis command on a degenerate benchmark (tests/hostile.py ``degenerate_benchmarks``: one
item, all right, all wrong, one model, a tied ranking, 2 x 2) ends with exit 0, or exit 1 and one line that says
why, and a command that fails leaves no run row ``done`` (`compress` on an all-right benchmark failed on an
internal TypeError and its run said ``done``)."""

from __future__ import annotations

import sqlite3

import pytest

from benchloupe.store import runs
from tests.hostile import check_outcome, degenerate_benchmarks, dump, run_cli

COMMANDS = (["fit", "static"], ["compress"], ["anomalies"], ["bootstrap"], ["evaluate"], ["contamination"],
            ["audit", "neartie"], ["coverage"], ["calibrate"])


@pytest.fixture(scope="module")
def degenerate_db(tmp_path_factory):
    folder = tmp_path_factory.mktemp("degenerate")
    db = folder / "d.db"
    for name, rows in degenerate_benchmarks().items():
        csv = folder / f"{name}.csv"
        csv.write_text("model,item,correct\n" + "".join(f"{m},{i},{c}\n" for m, i, c in rows))
        rc, _, err = run_cli(["--db", db, "import", "long", csv, "-b", name])
        assert rc == 0, err
    return db


def _runs(db) -> list[tuple[int, str]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT id, status FROM runs ORDER BY id").fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("bench", sorted(degenerate_benchmarks()))
def test_every_analysis_on_a_degenerate_benchmark_ends_cleanly(degenerate_db, bench):
    for command in COMMANDS:
        before_runs = _runs(degenerate_db)
        before = dump(degenerate_db)
        rc, out, err = run_cli(["--db", degenerate_db, *command, bench])
        case = (bench, *command)
        check_outcome(case, rc, out, err, before, dump(degenerate_db) if rc else None)
        new = [r for r in _runs(degenerate_db) if r not in before_runs]
        if rc:
            assert not [r for r in new if r[1] == "done"], (case, new)
        else:
            assert [s for _, s in new] == ["done"], (case, new)


@pytest.mark.parametrize("bench, why", [("all-right", "no variance"), ("all-wrong", "no variance"),
                                        ("one-item", "too few items"), ("tied", "no variance")])
def test_compress_says_why_it_cannot(degenerate_db, bench, why):
    rc, _, err = run_cli(["--db", degenerate_db, "compress", bench])
    assert rc == 1 and why in err and "TypeError" not in err, err


def test_a_run_stored_done_by_a_command_that_then_fails_is_marked_failed(degenerate_db):
    """The CLI's guard for the whole class: what a command stored ``done`` before it failed is failed, with the
    command's line (here the store's own hook, as the CLI calls it after exit 1)."""
    rc, _, err = run_cli(["--db", degenerate_db, "fit", "static", "tied"])
    assert rc == 0, err
    run_id = _runs(degenerate_db)[-1][0]
    runs.FINISHED_HERE.append((str(degenerate_db), run_id))
    runs.fail_finished_here("the report could not be written")
    conn = sqlite3.connect(degenerate_db)
    assert conn.execute("SELECT status, error FROM runs WHERE id = ?", (run_id,)).fetchone() == (
        "failed", "the report could not be written")
    conn.close()


def test_a_failing_command_leaves_the_runs_finished_before_it_done(tmp_path):
    """Only the failed command's own runs are failed: a run this process stored ``done`` before the command (a job
    run directly, as the workbench and the tests' demo builds do) stays done when a later command exits 1 (every
    run of the showcase turned failed after one refused import in the same process)."""
    from benchloupe.engine import joint
    from benchloupe.jobs.calibration import run_fit

    db = tmp_path / "w.db"
    csv = tmp_path / "w.csv"
    csv.write_text("model,item,correct\n" + "".join(f"m{m},i{i},{int((m + i) % 3 > 0)}\n"
                                                   for m in range(6) for i in range(8)))
    rc, _, err = run_cli(["--db", db, "import", "long", csv, "-b", "w"])
    assert rc == 0, err
    run_id = run_fit(db, "w", joint.JointConfig(mode="static"))
    assert _runs(db) == [(run_id, "done")]
    rc, _, err = run_cli(["--db", db, "import", "long", tmp_path / "missing.csv", "-b", "w"])
    assert rc == 1, err
    assert _runs(db) == [(run_id, "done")]
