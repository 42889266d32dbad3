"""The product of paths (issue 21, "the class, not only the instances"): after each kind of run the app and the
CLI can start on the demo, every screen opens, shows the open benchmark's data (not another benchmark's), and
raises no error notification; then ``B`` switches to another benchmark and every screen shows that one.

Each run is made the way its face makes it: the app's job function (``tui.jobs_ui.run_analysis``, what the
app's child process calls) for every registered analysis, and the ``benchloupe`` command line (in process,
``cli.main.main``) for every command that starts a run. Defect 2 (the Models screen failed after any
bootstrap run, then showed another benchmark's models) was one cell of this product."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pandas as pd
import pytest

from benchloupe.store import fill as fillstore
from benchloupe.store import read, runs
from benchloupe.store.db import connect
from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.widgets.table import FrameTable
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)
SCREEN_KEYS = (("1", "benchmarks"), ("2", "items"), ("3", "models"), ("4", "runs"), ("5", "anomalies"),
               ("6", "reversals"), ("7", "coverage"), ("8", "benchfill"))
NEWCOMER = "newlab/Llama-3-8B-leaky"


def _add_newcomer(db) -> None:
    """A model imported after the demo's fits (what ``screen`` screens against a frozen clean fit)."""
    from benchloupe.store.importers.base import ParsedImport
    from benchloupe.store.writer import write_import

    conn = connect(db)
    try:
        sm = read.load_static(conn, "demo-math")
        row = sm.correct[int(np.argmin(sm.correct.sum(1)))].copy()
        write_import(conn, ParsedImport("demo-math", "static", sm.items[["key"]], pd.DataFrame({"name": [NEWCOMER]}),
                                        correct=row[None, :]), fmt="test")
    finally:
        conn.close()


def _add_newcomer_after_fit(db) -> None:
    """A static fit, then a newly imported model (``screen`` checks it against the frozen fit)."""
    from benchloupe.engine.joint import JointConfig
    from benchloupe.jobs import ANALYSES

    ANALYSES["static"].run(db, "demo-math", JointConfig(mode="static"), heldout=False)
    _add_newcomer(db)


def _add_dates(db, tmp_path) -> None:
    """Item dates (imported as a curator would, an item-metadata file) and model cutoffs (what
    ``contamination`` reads)."""
    from benchloupe.cli.main import main

    conn = connect(db)
    try:
        sm = read.load_static(conn, "demo-math")
    finally:
        conn.close()
    items, models = sm.items["key"], sm.models["name"]
    rng = np.random.default_rng(0)
    days = pd.to_datetime("2022-01-01") + pd.to_timedelta(rng.integers(0, 900, len(items)), unit="D")
    pd.DataFrame({"key": items, "date": days.strftime("%Y-%m-%d")}).to_csv(tmp_path / "dates.csv", index=False)
    cut = pd.to_datetime("2022-07-01") + pd.to_timedelta(rng.integers(0, 300, len(models)), unit="D")
    assert main(["import", "items", str(tmp_path / "dates.csv"), "--db", str(db), "--benchmark", "demo-math"]) == 0
    conn = connect(db)
    try:
        conn.executemany("UPDATE models SET metadata = json_set(metadata, '$.cutoff', ?) WHERE name = ?",
                         list(zip(cut.strftime("%Y-%m-%d"), models)))
        conn.commit()
    finally:
        conn.close()


# analysis -> (benchmark, config changes that keep it quick, run keywords, set-up)
APP_RUNS = {
    "joint": ("demo-chem", {}, {"arena": "demo-arena"}, None),
    "static": ("demo-math", {}, {}, None),
    "arena": ("demo-arena", {}, {}, None),
    "evaluate": ("demo-chem", {"splits": 2}, {"arena": "demo-arena"}, None),
    "bt": ("demo-arena", {}, {}, None),
    "avg-reward": ("demo-arena", {}, {}, None),
    "compress": ("demo-math", {"seeds": 1}, {}, None),
    "anomalies": ("demo-math", {}, {}, None),
    "screen": ("demo-math", {"model": NEWCOMER}, {}, "newcomer"),
    "bootstrap": ("demo-math", {"B": 20}, {}, None),
    "contamination": ("demo-math", {"n_boot": 100, "n_perm": 100}, {}, "dates"),
    "neartie": ("demo-chem", {}, {}, None),
    "coverage": ("demo-math", {}, {}, None),
    "calibrate": ("demo-math", {}, {}, None),
}

# CLI command -> (benchmark the run is on, argv after "benchloupe", set-up)
CLI_RUNS = {
    "fit joint": ("demo-chem", ["fit", "joint", "demo-chem", "--arena", "demo-arena"], None),
    "fit static": ("demo-math", ["fit", "static", "demo-math"], None),
    "fit arena": ("demo-arena", ["fit", "arena", "demo-arena"], None),
    "fit bt": ("demo-arena", ["fit", "bt", "demo-arena"], None),
    "fit avg-reward": ("demo-arena", ["fit", "avg-reward", "demo-arena"], None),
    "evaluate": ("demo-chem", ["evaluate", "demo-chem", "--arena", "demo-arena", "--splits", "2"], None),
    "compress": ("demo-math", ["compress", "demo-math", "--seeds", "1"], None),
    "anomalies": ("demo-math", ["anomalies", "demo-math"], None),
    "screen": ("demo-math", ["screen", "demo-math", "--model", NEWCOMER], "newcomer"),
    "bootstrap": ("demo-chem", ["bootstrap", "demo-chem", "--B", "20"], None),
    "contamination": ("demo-math", ["contamination", "demo-math", "--n-boot", "100", "--n-perm", "100"], "dates"),
    "audit neartie": ("demo-chem", ["audit", "neartie", "demo-chem"], None),
    "coverage": ("demo-math", ["coverage", "demo-math"], None),
    "calibrate": ("demo-math", ["calibrate", "demo-math", "--name", "demo-math-cal"], None),
    "fill": ("demo-math", ["fill", "demo-math"], None),
}

OTHER = {"demo-math": "demo-chem", "demo-chem": "demo-math", "demo-arena": "demo-math"}


def _setup(db, tmp_path, what: str | None) -> None:
    if what == "newcomer":
        _add_newcomer_after_fit(db)
    elif what == "dates":
        _add_dates(db, tmp_path)


def _error_notes(app) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications if n.severity == "error"]


def check_shows(app, bench: str) -> None:
    """The current screen shows *bench*: its tab line names it, it loaded for it, and every row it lists
    belongs to it (an item, a model, a run, a flag, a session of that benchmark)."""
    s = app.screen
    mode = s.MODE
    top = str(s.query_one("TopBar").render())
    assert bench in top, (mode, top)
    if s.NEEDS_BENCHMARK:
        assert s.shown_token[0] == bench, (mode, s.shown_token)
    conn = connect(app.db_path)
    try:
        bid = read.benchmark_id(conn, bench)
        items = set(read.items(conn, bench)["id"].astype(int))
        models = set(read.models(conn, bench)["id"].astype(int))
        own_runs = set(runs.list_runs(conn, bench)["id"].astype(int))
        sessions = set(fillstore.sessions(conn, bench)["id"].astype(int))
    finally:
        conn.close()
    tables = {t.id: t.frame for t in s.query(FrameTable)}
    if mode == "items":
        assert set(tables["items-table"]["id"].astype(int)) <= items
        assert len(tables["items-table"]) == len(items)
    elif mode == "models":
        frame = tables["models-table"]
        assert set(frame["id"].astype(int)) <= models and len(frame) == len(models), (len(frame), len(models))
        assert s.shown_run is None or s.shown_run in own_runs
    elif mode == "runs":
        assert set(tables["history"]["id"].astype(int)) == own_runs
    elif mode in ("anomalies", "reversals"):
        if len(s.flags):
            assert set(s.flags["benchmark_id"].astype(int)) == {bid} if "benchmark_id" in s.flags else True
            assert set(s.flags["run_id"].astype(int)) <= own_runs
    elif mode == "coverage":
        run = s.data["run"]
        assert run is None or int(run["id"]) in own_runs
    elif mode == "benchfill":
        assert set(tables["sessions"]["id"].astype(int)) == sessions


async def shown(pilot, app, mode: str, bench: str) -> None:
    """Wait until the *mode* screen has loaded, or an error was notified (then fail with it)."""
    done = loaded(app, mode)
    await wait_until(pilot, lambda: done() or bool(_error_notes(app)), what=f"{mode} on {bench}")
    assert not _error_notes(app), (mode, bench, _error_notes(app))
    check_shows(app, bench)


async def walk(pilot, app, bench: str) -> None:
    """Every screen in turn, keys only; each must load for *bench* and raise no error."""
    for key, mode in SCREEN_KEYS:
        await pilot.press(key)
        await shown(pilot, app, mode, bench)


async def switch(pilot, app, bench: str) -> None:
    """B, search the picker for *bench*, enter keeps the search, enter switches."""
    await pilot.press("B")
    await wait_until(pilot, lambda: type(app.screen).__name__ == "BenchmarkPicker"
                     and len(app.screen.query_one(FrameTable).frame), what="picker")
    await pilot.press("slash", *[{"-": "minus"}.get(c, c) for c in bench])
    table = app.screen.query_one(FrameTable)
    await wait_until(pilot, lambda: table.query == bench, what="picker search")
    table.move_to_value("name", bench)
    await pilot.press("enter", "enter")
    await wait_until(pilot, lambda: app.benchmark == bench and type(app.screen).__name__ != "BenchmarkPicker",
                     what=f"switched to {bench}")


async def walk_both(db, bench: str) -> None:
    app = BenchloupeApp(db, benchmark=bench)
    async with app.run_test(size=SIZE) as pilot:
        await walk(pilot, app, bench)
        other = OTHER[bench]
        await pilot.press("3")  # switch on the Models screen (where defect 2 showed the other benchmark)
        await shown(pilot, app, "models", bench)
        await switch(pilot, app, other)
        await shown(pilot, app, "models", other)
        await walk(pilot, app, other)


@pytest.mark.parametrize("name", list(APP_RUNS))
async def test_every_screen_after_each_run_the_app_starts(showcase_db, tmp_path, name):
    from benchloupe.jobs import ANALYSES
    from benchloupe.tui.jobs_ui import run_analysis

    bench, changes, kw, setup = APP_RUNS[name]
    _setup(showcase_db, tmp_path, setup)
    config = dataclasses.replace(ANALYSES[name].config_cls(), **changes)
    rid = run_analysis(lambda *a: None, threading.Event(), str(showcase_db), name, bench, config, kw.get("arena"))
    conn = connect(showcase_db)
    assert runs.get_run(conn, rid)["status"] == "done"
    conn.close()
    await walk_both(showcase_db, bench)


@pytest.mark.parametrize("name", list(CLI_RUNS))
async def test_every_screen_after_each_run_the_cli_starts(showcase_db, tmp_path, name, capsys):
    from benchloupe.cli.main import main

    bench, argv, setup = CLI_RUNS[name]
    _setup(showcase_db, tmp_path, setup)
    assert main([*argv, "--db", str(showcase_db)]) == 0, capsys.readouterr().err
    await walk_both(showcase_db, bench)


async def test_bootstrap_from_the_palette_then_models_then_another_benchmark(showcase_db):
    """Defect 2 exactly as reported: palette "runs: start bootstrap" on demo-math, ctrl+s, then 3; then B to
    demo-chem and back: the Models screen shows the open benchmark's models from one of its runs."""
    app = BenchloupeApp(showcase_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await wait_until(pilot, loaded(app, "runs"), what="runs")
        app.screen.start_analysis("bootstrap")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="bootstrap form")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.job.title.startswith("bootstrap") and not app.job.running, timeout=120,
                         what="the bootstrap job")
        assert not app.job.failed, app.job.outcome
        await pilot.press("3")
        await shown(pilot, app, "models", "demo-math")
        status = str(app.screen.query_one("#models-status").render())
        assert "bootstrap" in status, status
        frame = app.screen.query_one(FrameTable).frame
        assert frame["rank_lo"].notna().all() and (frame["rank_lo"] % 1 != 0).any()  # fractional, kept
        await switch(pilot, app, "demo-chem")
        await shown(pilot, app, "models", "demo-chem")
        await switch(pilot, app, "demo-math")
        await shown(pilot, app, "models", "demo-math")


def _damage_the_math_fit(db) -> None:
    """A damaged estimate in demo-math's static fit: reading demo-math's models fails."""
    conn = connect(db)
    rid = int(runs.list_runs(conn, "demo-math", kind="static")["id"].iloc[0])
    conn.execute("UPDATE run_models SET theta = 'damaged' WHERE run_id = ?", (rid,))
    conn.commit()
    conn.close()


async def test_a_screen_that_cannot_read_the_new_benchmark_shows_nothing_of_the_old_one(showcase_db):
    """Defect 2's second half: after ``B`` the tab line named demo-math while the table still listed demo-chem's
    models, because the new benchmark's read failed and the old rows stayed. A read that fails (here a damaged
    estimate in the database) says so in the error line and on the screen, and leaves no row of the benchmark
    switched away from."""
    _damage_the_math_fit(showcase_db)
    app = BenchloupeApp(showcase_db, benchmark="demo-chem")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await shown(pilot, app, "models", "demo-chem")
        assert len(app.screen.query_one(FrameTable).frame) == 130
        await switch(pilot, app, "demo-math")
        await wait_until(pilot, lambda: bool(_error_notes(app)), what="the failed read")
        await wait_until(pilot, idle(app), what="idle")
        table = app.screen.query_one(FrameTable)
        assert len(table.frame) == 0 and len(table.view) == 0, len(table.frame)
        status = str(app.screen.query_one("#models-status").render())
        assert "demo-math" in status and "could not" in status, status
        assert "130 models" not in status


async def test_a_read_that_fails_again_still_says_so_on_the_screen(showcase_db):
    """The same failure again within a minute is notified once, but the screen says it each time: a second read
    of the switched-to benchmark (a live reload, the benchmark change seen again) redrew the emptied table's
    status line as "0 models · no fits yet" and the deduplicated failure left it so (CI, a quiet machine)."""
    _damage_the_math_fit(showcase_db)
    app = BenchloupeApp(showcase_db, benchmark="demo-chem")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await shown(pilot, app, "models", "demo-chem")
        await switch(pilot, app, "demo-math")
        await wait_until(pilot, lambda: bool(_error_notes(app)), what="the failed read")
        await wait_until(pilot, idle(app), what="idle")
        notes = len(_error_notes(app))
        app.screen.benchmark_changed()
        app.screen.reload()
        await pilot.pause(0.2)
        await wait_until(pilot, idle(app), what="the second read")
        status = str(app.screen.query_one("#models-status").render())
        assert "demo-math" in status and "could not" in status, status
        assert len(_error_notes(app)) == notes  # notified once
