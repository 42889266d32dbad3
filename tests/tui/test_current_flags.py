"""One definition of the current flags (issue 32 #1): after re-running each analysis of the demo, the CLI's
``flags`` (its listing and its "N flags, M triaged" line), the workbench's queues and their counts, the Coverage
screen and ``benchloupe open FILE``'s summary count the same flags (the latest finished run of each kind, with
earlier decisions carried over), no cell twice; ``--all-runs`` shows the history; a decision on a flag of a
superseded run is refused, naming the current flag on the cell, and the database is left exactly as it was."""

from __future__ import annotations

import json
import re

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.hostile import check_outcome, dump, run_cli
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (160, 48)


def _flags(db, *args) -> list[dict]:
    rc, out, err = run_cli(["--db", db, "--json", "flags", *args])
    assert rc == 0, err
    return json.loads(out)


def _summary_line(db, *args) -> tuple[int, int]:
    rc, out, err = run_cli(["--db", db, "flags", *args])
    assert rc == 0, err
    m = re.match(r"(\d+) flags?, (\d+) triaged", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


def _decide(db, fid, state):
    rc, out, err = run_cli(["--db", db, "flags", "--set", fid, state])
    assert rc == 0, err


def _rerun(db, analysis, benchmark, times):
    for _ in range(times):
        rc, _out, err = run_cli(["--db", db, analysis, benchmark])
        assert rc == 0, err


async def test_three_anomaly_runs_count_the_same_in_the_cli_and_the_workbench(demo_db):
    # a decision made on the first run's flags carries over to the later runs' flag on the same cell
    _rerun(demo_db, "anomalies", "demo-math", 1)
    first = _flags(demo_db, "demo-math", "--kind", "anomaly")
    _decide(demo_db, first[0]["id"], "dismissed")
    _decide(demo_db, first[1]["id"], "confirmed")
    _rerun(demo_db, "anomalies", "demo-math", 2)  # three anomaly runs in all
    current = _flags(demo_db, "demo-math", "--kind", "anomaly")
    history = _flags(demo_db, "demo-math", "--kind", "anomaly", "--all-runs")
    assert len(history) == 3 * len(first) and len({f["run_id"] for f in history}) == 3
    cells = [(f["model"], f["item_key"]) for f in current]
    assert len(set(cells)) == len(cells) == len(first)  # no cell twice
    assert len({f["run_id"] for f in current}) == 1 and not any(f["superseded"] for f in current)
    carried = {(f["model"], f["item_key"]): f["state"] for f in current if f["carried_from"] is not None}
    assert carried == {(first[0]["model"], first[0]["item_key"]): "dismissed",
                       (first[1]["model"], first[1]["item_key"]): "confirmed"}
    open_ids = {f["id"] for f in _flags(demo_db, "demo-math", "--kind", "anomaly", "--state", "open")}
    n_open, triaged_open = _summary_line(demo_db, "demo-math", "--kind", "anomaly", "--state", "open")
    n_all, triaged_all = _summary_line(demo_db, "demo-math", "--kind", "anomaly")
    assert (n_open, triaged_open) == (len(open_ids), 0) and (n_all, triaged_all) == (len(first), 2)

    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        assert (screen.total, screen.triaged) == (n_all, triaged_all)
        status = str(screen.query_one("#queue-status").render())
        assert f"{triaged_all} of {n_all} triaged" in status
        queue_open = set(screen.queue.ids(_conn(demo_db), "q.state = 'open'"))
        assert queue_open == open_ids


def _conn(db):
    from benchloupe.store.db import connect
    from benchloupe.store.queue import prepare

    return prepare(connect(db, create=False))


async def test_five_coverage_runs_count_the_gaps_the_coverage_screen_shows(demo_db):
    _rerun(demo_db, "coverage", "demo-math", 5)
    _rerun(demo_db, "coverage", "demo-chem", 1)
    gaps = _flags(demo_db, "demo-math", "--kind", "gap")
    rc, out, err = run_cli(["--db", demo_db, "--json", "open", demo_db])
    assert rc == 0, err
    summary = json.loads(out)["open_flags"]
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        shown = app.screen.query_one("#gaps").frame
        assert sorted(shown["flag_id"].astype(int)) == sorted(f["id"] for f in gaps)
    # the summary counts every benchmark's current gaps: demo-math's as on screen, plus the other benchmarks'
    others = _flags(demo_db, "--kind", "gap", "--state", "open")
    assert summary["gap"] == len(others) and len([f for f in others if f["id"] in set(shown["flag_id"])]) == len(
        shown[shown["state"] == "open"])
    rc, out, _err = run_cli(["--db", demo_db, "open", demo_db])
    assert f"gap {summary['gap']}" in out.splitlines()[-1]


@pytest.mark.parametrize("analysis,benchmark,kind", [("anomalies", "demo-math", "anomaly"),
                                                     ("coverage", "demo-math", "gap")])
def test_a_decision_on_a_superseded_flag_is_refused_naming_the_current_one(demo_db, analysis, benchmark, kind):
    _rerun(demo_db, analysis, benchmark, 1)
    old = _flags(demo_db, benchmark, "--kind", kind)
    _rerun(demo_db, analysis, benchmark, 1)
    new = {(f["model"], f["item_key"]): f["id"] for f in _flags(demo_db, benchmark, "--kind", kind)}
    for state in ("confirmed", "dismissed", "unsure", "open"):
        before = dump(demo_db)
        rc, out, err = run_cli(["--db", demo_db, "flags", "--set", old[0]["id"], state])
        check_outcome(f"superseded {kind} {state}", rc, out, err, before, dump(demo_db))
        assert rc == 1 and "superseded by run" in err
        if kind == "anomaly":  # a cell: the current flag on it is named
            assert f"current flag on that cell is #{new[(old[0]['model'], old[0]['item_key'])]}" in err
        else:  # a gap is about no cell
            assert "did not flag that cell" in err
    # the current flag itself takes the decision
    target = next(iter(new.values()))
    rc, out, err = run_cli(["--db", demo_db, "flags", "--set", target, "dismissed"])
    assert rc == 0, err
