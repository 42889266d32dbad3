"""Pilot tests: the real app on the demo workspace, driven by keys through each screen's main path."""

from __future__ import annotations

import re

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import EVIL, EVIL_ANSWER, idle, loaded, wait_until

SIZE = (80, 24)
pytestmark = pytest.mark.anyio


def _flags(db, kind):
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return curation.flags(conn, kind=kind).set_index("id")
    finally:
        conn.close()


async def test_open_benchmark_and_filter_items(demo_db):
    app = BenchloupeApp(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        table = app.screen.query_one("#bench-table")
        assert list(table.frame["name"]) == ["demo-arena", "demo-chem", "demo-math"]
        await pilot.press("down", "down", "enter")
        await wait_until(pilot, loaded(app, "items"), what="items")
        assert app.benchmark == "demo-math"
        items = app.screen.query_one("#items-table")
        assert len(items.view) == 240
        await pilot.press("slash", *"math-000")
        await wait_until(pilot, lambda: len(items.view) == 9, what="search to filter")
        assert set(items.frame["key"].iloc[items.view]) == {f"math-000{i}" for i in range(1, 10)}
        await pilot.press("escape")
        await wait_until(pilot, lambda: len(items.view) == 240, what="search cleared")
        await pilot.press("g")  # first group
        group = app.screen.filters["group"]
        assert group != "all"
        assert len(items.view) == int((items.frame["group"] == group).sum()) < 240
        await pilot.press("f")  # flagged only: no anomaly run yet
        assert len(items.view) == 0
        await pilot.press("f", "f", "g", "g", "g", "g")
        assert app.screen.filters == {"group": "all", "origin": "all", "status": "all", "flagged": "all"}
        await pilot.press("s")  # sort by key ascending, then reverse
        await pilot.press("S")
        assert items.frame["key"].iloc[items.view[0]] == "math-0240"


async def test_run_a_fit_and_wait(demo_db):
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await wait_until(pilot, loaded(app, "runs"), what="runs")
        screen = app.screen
        assert screen.query_one("#analyses").move_to_value("name", "static")
        await pilot.press("n")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="form")
        assert app.screen.query_one("#field-benchmark").value == "demo-math"
        assert app.screen.query_one("#field-cfg-mode").value == "static"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not app.job.running and app.job.outcome != "", what="fit")
        assert app.job.outcome.startswith("done (run #"), app.job.outcome
        await wait_until(pilot, loaded(app, "runs"), what="history reload")
        hist = screen.query_one("#history")
        assert list(hist.frame["kind"]) == ["static"] and list(hist.frame["status"]) == ["done"]
        await pilot.press("3")
        await wait_until(pilot, loaded(app, "models"), what="models")
        models = app.screen.query_one("#models-table")
        assert models.frame["rank"].notna().all()
        assert models.frame["rank"].iloc[0] == 1
    conn = connect(demo_db)
    try:
        assert runs.list_runs(conn, "demo-math")["status"].tolist() == ["done"]
    finally:
        conn.close()


async def test_failure_is_shown_and_the_app_keeps_running(demo_db):
    app = BenchloupeApp(demo_db, benchmark="demo-arena")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await wait_until(pilot, loaded(app, "runs"), what="runs")
        app.screen.query_one("#analyses").move_to_value("name", "static")
        await pilot.press("n")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="form")
        await pilot.press("ctrl+s")  # a static fit on an arena-only benchmark
        await wait_until(pilot, lambda: not app.job.running and app.job.outcome != "", what="job end")
        assert app.job.failed and app.job.outcome.startswith("failed: ")
        assert any(n.severity == "error" for n in app._notifications)
        await pilot.press("1")
        await wait_until(pilot, loaded(app, "benchmarks"), what="app still responds")


async def test_cancel_a_running_fit(demo_db):
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await wait_until(pilot, loaded(app, "runs"), what="runs")
        app.screen.query_one("#analyses").move_to_value("name", "static")
        await pilot.press("n")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="form")
        app.screen.query_one("#field-cfg-optimizer").value = "adam"
        app.screen.query_one("#field-cfg-epochs").value = "1000000"  # the most the range allows: minutes of work
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.job.running and app.job.stage != "", what="progress message")
        await pilot.press("x")
        await wait_until(pilot, lambda: not app.job.running, what="cancel")
        assert app.job.outcome == "cancelled"
        await wait_until(pilot, loaded(app, "runs"), what="history reload")
        assert app.screen.query_one("#history").frame["status"].tolist() == ["cancelled"]


async def test_triage_three_anomalies_persists_after_restart(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        first = [int(screen.flags["id"].iloc[i]) for i in range(3)]
        await pilot.press("c", "d", "u")  # each decision moves to the next candidate
        assert screen.pos == 3
        await pilot.press("k", "e")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="note dialog")
        await pilot.press(*"looks like a key typo", "enter")
        await wait_until(pilot, lambda: app.screen is screen and not screen.saving and idle(app)(), what="saves")
        status = str(screen.query_one("#queue-status").render())
        assert "3 of 12 triaged" in status
    flags = _flags(flagged_db, "anomaly")
    assert [flags.loc[i, "state"] for i in first] == ["confirmed", "dismissed", "unsure"]
    assert flags.loc[first[2], "note"] == "looks like a key typo"
    assert (flags["state"] == "open").sum() == 9

    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies after restart")
        assert "3 of 12 triaged" in str(app.screen.query_one("#queue-status").render())
        await pilot.press("f", "f")  # filter: confirmed
        assert app.screen.state_filter == "confirmed" and len(app.screen.view) == 1


async def test_step_through_reversals(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        await wait_until(pilot, loaded(app, "reversals"), what="reversals")
        screen = app.screen
        await pilot.press("f")  # every near-tie pair, not only those that reversed (the default)
        seen = []
        for _ in range(4):
            seen.append(str(screen.query_one("#queue-detail").render()))
            await pilot.press("j")
        assert len(set(seen)) == 4
        assert "Reversed: yes" in seen[0] and "Reversed: no" in seen[1]
        assert "Items that drove the reversal" in seen[0] and "Table 1" in seen[0]
        # counts and indices are integers on the card: "(fold 0)", "reversals 68", never "0.000"; answers in words
        assert re.search(r"\(fold [01]\)", seen[0]) and re.search(r"A (right|wrong), B (right|wrong)", seen[0])
        assert re.search(r"eligible_pairs \d+ ", seen[0])
        assert not re.search(r"fold \d+\.\d|items \d+\.\d", seen[0])
        await pilot.press("k", "c")
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="save")
    flags = _flags(flagged_db, "reversal")
    assert (flags["state"] == "confirmed").sum() == 1


async def test_item_text_is_literal_and_retire_with_note(flagged_db):
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    app = BenchloupeApp(flagged_db, benchmark="literal")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        table = app.screen.query_one("#items-table")
        assert table._lines[0].startswith("[b]evil[/b]")
        await pilot.press("enter")
        await wait_until(pilot, (lambda: type(app.screen).__name__ == "ItemPanel"
                                                           and app.screen.detail is not None), what="panel")
        panel = app.screen
        body = panel.query_one("#item-text").render()
        assert EVIL in str(body) and EVIL_ANSWER in str(body)
        assert panel.query_one("#item-head").region.y == 1  # the 4,000 characters wrap below the header
        await pilot.press("t")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="note dialog")
        await pilot.press(*"duplicate of plain", "enter")
        await wait_until(pilot, lambda: app.screen is panel and panel.detail["status"] == "retired" and idle(app)(),
                         what="retired")
        await pilot.press("escape")
        await wait_until(pilot, loaded(app, "items"), what="items reload")
        assert app.screen.query_one("#items-table").frame["status"].tolist() == ["retired", "active"]
    conn = connect(flagged_db)
    try:
        log = curation.audit_log(conn)
    finally:
        conn.close()
    assert log["action"].iloc[0] == "item:retire" and log["note"].iloc[0] == "duplicate of plain"


async def test_empty_database_demo_is_one_key_away(tmp_path):
    app = BenchloupeApp(tmp_path / "empty.db")
    from benchloupe.store.db import connect

    connect(tmp_path / "empty.db").close()
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        assert "The database is empty" in str(app.screen.query_one("#bench-hint").render())
        await pilot.press("d")
        await wait_until(pilot, lambda: not app.job.running and app.job.outcome != "", what="demo build")
        await wait_until(pilot, loaded(app, "benchmarks"), what="reload")
        assert len(app.screen.query_one("#bench-table").frame) == 3


async def test_import_dialog_validates_and_reports_bad_files(demo_db, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("model,item,correct\nm1,i1,maybe\n")
    good = tmp_path / "good.csv"
    good.write_text("model,item,correct\nm1,i1,1\nm1,i2,0\nm2,i1,0\nm2,i2,1\n")
    app = BenchloupeApp(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        await pilot.press("o")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="import form")
        await pilot.press(*str(tmp_path / "missing.csv"), "enter")
        assert "no such file" in str(app.screen.query_one("#dialog-error").render())
        app.screen.query_one("#field-paths").value = str(bad)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not app.job.running and app.job.outcome != "", what="bad import")
        assert app.job.failed and "bad.csv" in app.job.outcome and "\n" not in app.job.outcome
        await pilot.press("o")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="import form")
        app.screen.query_one("#field-paths").value = str(good)
        app.screen.query_one("#field-benchmark").value = "tiny"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not app.job.running and not app.job.failed and app.job.outcome != "",
                         what="good import")
        await wait_until(pilot, loaded(app, "benchmarks"), what="reload")
        assert "tiny" in set(app.screen.query_one("#bench-table").frame["name"])


async def test_help_and_palette(demo_db):
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen", what="help")
        text = str(app.screen.query_one("Static").render())
        assert "Demo workspace" in text and "Import file" in text and "command palette" in text
        await pilot.press("escape")
        assert type(app.screen).__name__ == "BenchmarksScreen"
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "CommandPalette", what="palette")
        await pilot.press(*"models: open")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_until(pilot, loaded(app, "models"), what="models via palette")


@pytest.mark.parametrize("mode", ["models", "anomalies", "reversals", "coverage", "runs"])
async def test_screens_without_benchmark_do_not_crash(demo_db, mode):
    from benchloupe.tui.screens import SCREENS

    app = BenchloupeApp(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        await pilot.press(SCREENS[mode][1])
        await wait_until(pilot, loaded(app, mode), what=mode)
        assert app.is_running


async def test_compare_two_runs(demo_db):
    """Rank agreement of two runs of known scores: Spearman 1 - 6*2/(4*15) = 0.8, Kendall (5 - 1)/6."""
    import pandas as pd

    from benchloupe.store import read, runs
    from benchloupe.store.db import connect

    conn = connect(demo_db)
    try:
        bid = read.benchmark_id(conn, "demo-math")
        ids = read.models(conn, "demo-math")["id"].head(4).tolist()
        for theta in ([3.0, 2.0, 1.0, 0.0], [3.0, 1.0, 2.0, 0.0]):
            rid = runs.create_run(conn, "static", bid, config={}, seed=0, code_version="test", input_fingerprint="t")
            runs.save_outputs(conn, rid, runs.RunOutputs(models=pd.DataFrame({"model_id": ids, "theta": theta})))
    finally:
        conn.close()
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await wait_until(pilot, loaded(app, "runs"), what="runs")
        await pilot.press("tab", "m", "j", "c")  # history: mark the newer run, compare with the older
        await wait_until(pilot, lambda: type(app.screen).__name__ == "CompareScreen"
                         and app.screen.shown_token is not None, what="compare")
        head = str(app.screen.query_one("#compare-head").render())
        assert "Spearman 0.800" in head and "Kendall 0.667" in head and "2 models changed rank" in head
        moved = app.screen.query_one("#moved").frame
        assert sorted(moved["moved"].tolist()) == [-1, 0, 0, 1]


async def test_opens_on_a_benchmark_with_static_results(demo_db):
    """A new user opening the demo lands on a benchmark whose Coverage and BenchFill screens have content, not on
    the arena-only set that sorts first (seen in tmux: 7 then showed "no coverage run")."""
    app = BenchloupeApp(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        table = app.screen.query_one("#bench-table")
        assert table.current_value("name") is not None and list(table.frame["name"])[0] == "demo-arena"
        assert app.benchmark == "demo-chem"
