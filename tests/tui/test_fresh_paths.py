"""What a new user meets first (issue 21 items 5, 6 and 11): the demo built with ``d`` in the app is the demo
``benchloupe demo`` builds (its analyses run); an empty database's screens say how to get data; a binary file
picked for import is named for what it is, in one short line, in the dialog and on the command line; a
dialog's own errors show inside it, not under a toast."""

from __future__ import annotations

import pytest

from benchloupe.store import curation, runs
from benchloupe.store.db import connect
from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def _workspace(db) -> dict:
    """Per benchmark: the kinds of its finished runs, and its flags by kind."""
    conn = connect(db)
    try:
        hist = runs.list_runs(conn)
        flags = curation.flags(conn)
        names = {r[0]: r[1] for r in conn.execute("SELECT id, name FROM benchmarks")}
    finally:
        conn.close()
    out = {}
    for bench, group in hist[hist["status"] == "done"].groupby("benchmark"):
        out[bench] = {"runs": sorted(group["kind"])}
    for (bid, kind), n in flags.groupby(["benchmark_id", "kind"]).size().items():
        out.setdefault(names[bid], {}).setdefault("flags", {})[kind] = int(n)
    return out


async def test_d_in_the_app_builds_the_demo_the_command_builds(tmp_path, capsys):
    from benchloupe.cli.main import main

    assert main(["demo", "--db", str(tmp_path / "cli.db")]) == 0
    capsys.readouterr()
    db = tmp_path / "app.db"
    connect(db).close()
    app = BenchloupeApp(db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        await pilot.press("d")
        await wait_until(pilot, lambda: app.job.title == "demo workspace" and not app.job.running, timeout=300,
                         what="the demo build")
        assert not app.job.failed, app.job.outcome
        assert _workspace(db) == _workspace(tmp_path / "cli.db")
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks again")
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        assert len(app.screen.flags), "the demo's anomaly run is missing"
        await pilot.press("4")
        await wait_until(pilot, loaded(app, "runs"), what="runs")
        assert len(app.screen.query_one("#history").frame)
