"""The Models screen shows an estimate run's partly evaluated models (issue 34) as "est. 61.2 % [58.9, 63.5] · 30 of
249 items", in a column of its own that sorts by the estimate and exports its numbers, never mixed with the
observed accuracy (which the detail line names beside it)."""

from __future__ import annotations

import numpy as np
import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.hostile import run_cli
from tests.integration.test_estimate_cli import N_FULL, N_ITEMS, K, _fit, _workspace
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio


@pytest.fixture
def estimated(tmp_path):
    db, _, _ = _workspace(tmp_path)
    _fit(db)
    assert run_cli(["estimate", "mc", "--db", db])[0] == 0
    return db


async def test_models_screen_shows_estimates_apart(estimated):
    app = BenchloupeApp(estimated, benchmark="mc")
    async with app.run_test(size=(200, 30)) as pilot:
        await pilot.press("3")
        await wait_until(pilot, loaded(app, "models"), what="models")
        table = app.screen.query_one("#models-table")
        col = next(c for c in table.columns if c.key == "est")
        assert col.sort_key == "estimate" and "observed" in col.export and "estimate" in col.export
        frame = table.frame
        partial = frame["name"].isin([f"lab/m{i}" for i in range(N_FULL, N_FULL + 30)])
        assert frame.loc[~partial, "est"].eq("").all() and frame.loc[~partial, "estimate"].isna().all()
        texts = frame.loc[partial, "est"]
        assert texts.str.match(rf"est\. \d+\.\d % \[\d+\.\d, \d+\.\d\] · {K} of {N_ITEMS} items").all()
        assert not np.allclose(frame.loc[partial, "estimate"], frame.loc[partial, "observed"])
        assert table.move_to_value("name", f"lab/m{N_FULL}")
        app.screen._detail()
        detail = str(app.screen.query_one("#models-detail").render())
        assert "est. " in detail and "observed" in detail and f"on the {K} items it answered" in detail
        # which runs they came from: the columns may show another run (r), the estimate names its own
        import sqlite3

        with sqlite3.connect(estimated) as conn:
            (fit,), (est,) = conn.execute("SELECT id FROM runs WHERE kind IN ('static', 'estimate') ORDER BY id")
        assert f"estimate run #{est} from calibration run #{fit}" in detail, detail


# --------------------------------------------------------------- marking two models compares them (issue 34, part 4)

def _compare_cli(db, a, b) -> dict:
    import json

    rc, out, err = run_cli(["compare", "mc", a, b, "--db", db, "--json"])
    assert rc == 0, err
    return json.loads(out)


async def _highlight(pilot, app, name: str) -> None:
    """Keys only: / types the model's name, enter goes back to the table on the one row it leaves."""
    await pilot.press("slash", *name, "enter")
    table = app.screen.query_one("#models-table")
    await wait_until(pilot, lambda: table.current_value("name") == name, what=f"row {name}")


async def _compare(pilot, app, a: str, b: str) -> dict:
    """m on A, m on B: the comparison screen opens and shows what it read."""
    for name in (a, b):
        await _highlight(pilot, app, name)
        await pilot.press("escape")  # the search is cleared; the cursor stays on the model
        await wait_until(pilot, lambda n=name: app.screen.query_one("#models-table").current_value("name") == n)
        await pilot.press("m")
        if name == a:
            assert app.screen.marked is not None and app.screen.marked[1] == a
            assert f"A = {a} marked" in str(app.screen.query_one("#models-status").render())
    await wait_until(pilot, lambda: type(app.screen).__name__ == "ModelCompareScreen"
                     and app.screen.shown_token == app.screen.current_token() and idle(app)(), what="comparison")
    return app.screen.result


def _same(shown: dict, cli: dict) -> None:
    assert shown is not None
    assert set(shown) == set(cli)
    for key, value in cli.items():
        if isinstance(value, float):
            assert shown[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
        elif isinstance(value, dict):
            _same(shown[key], value)
        else:
            assert shown[key] == value, key


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_marking_two_models_compares_them_as_the_command_does(estimated, size):
    """m marks A, m on B opens the comparison with ``benchloupe compare``'s numbers; a partly evaluated model
    compares through its estimate and says so; escape goes back with no mark left, and the next two marked
    compare in turn; after a new calibration run the comparison reads it."""
    partial, full_a, full_b, full_c = f"lab/m{N_FULL}", "lab/m103", "lab/m107", "lab/m111"  # unique as text
    app = BenchloupeApp(estimated, benchmark="mc")
    async with app.run_test(size=size) as pilot:
        await pilot.press("3")
        await wait_until(pilot, loaded(app, "models"), what="models")
        shown = await _compare(pilot, app, partial, full_a)
        _same(shown, _compare_cli(estimated, partial, full_a))
        head = str(app.screen.query_one("#modelcompare-head").render())
        assert "through the estimate" in head and f"{K} of {N_ITEMS} items" in head
        assert f"{shown['common_items']} items both answered" in head
        items = app.screen.query_one("#modelcompare-items")
        assert list(items.frame["key"]) == [d["key"] for d in shown["differing_items"]]
        await pilot.press("escape")
        await wait_until(pilot, loaded(app, "models"), what="models again")
        assert app.screen.marked is None and "marked" not in str(app.screen.query_one("#models-status").render())

        # the second step: two other models, both fully evaluated (no estimate involved)
        shown = await _compare(pilot, app, full_b, full_c)
        _same(shown, _compare_cli(estimated, full_b, full_c))
        assert "through_estimate" not in shown
        assert "through the estimate" not in str(app.screen.query_one("#modelcompare-head").render())
        await pilot.press("escape")
        await wait_until(pilot, loaded(app, "models"), what="models again")

        # m twice on one model unmarks it
        await _highlight(pilot, app, full_a)
        await pilot.press("escape", "m", "m")
        assert app.screen.marked is None

        # after a new run (another process fits the benchmark again): A marked before it, B after it
        old = shown["calibration_run"]
        await _highlight(pilot, app, partial)
        await pilot.press("escape", "m")
        screen = app.screen
        reloads = screen.live_reloads
        rc, _, err = run_cli(["fit", "static", "mc", "--db", estimated, "--seed", "3"])
        assert rc == 0, err
        await wait_until(pilot, lambda: screen.live_reloads > reloads and loaded(app, "models")(), what="live reload")
        assert screen.marked is not None and screen.marked[1] == partial  # the mark survived the reload
        await _highlight(pilot, app, full_c)
        await pilot.press("escape", "m")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ModelCompareScreen"
                         and app.screen.shown_token == app.screen.current_token() and idle(app)(), what="comparison")
        shown = app.screen.result
        assert shown["calibration_run"] > old
        _same(shown, _compare_cli(estimated, partial, full_c))
        assert f"calibration run #{shown['calibration_run']}" in str(app.screen.query_one("#modelcompare-head").render())


async def test_estimate_starts_from_the_runs_screen(tmp_path):
    """estimate is one of the Runs screen's analyses: its form (the defaults: the latest calibration, every partly
    evaluated model, 95 %) starts it as a job, and the Models screen then shows its estimates."""
    from benchloupe.store import runs
    from benchloupe.store.db import connect
    from tests.tui.test_import_dialog import set_field
    from tests.tui.test_run_forms import open_form

    db, _, _ = _workspace(tmp_path)
    _fit(db)
    app = BenchloupeApp(db, benchmark="mc")
    async with app.run_test(size=(80, 24)) as pilot:
        await open_form(pilot, app, "estimate")
        await set_field(pilot, "cfg-level", "0.9")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.job.outcome != "" and not app.job.running, what="estimate job")
        assert not app.job.failed, app.job.outcome
        conn = connect(db)
        try:
            done = runs.list_runs(conn, "mc", "estimate")
            assert list(done["status"]) == ["done"]
            run = runs.get_run(conn, int(done["id"].iloc[0]))
            assert run["metrics"]["models"] == 30 and run["config"]["level"] == 0.9
        finally:
            conn.close()
        await pilot.press("3")
        await wait_until(pilot, loaded(app, "models"), what="models")
        frame = app.screen.query_one("#models-table").frame
        assert frame["est"].str.startswith("est. ").sum() == 30
