"""Identity survives 80 columns, and numbers say what they mean (issue 11): long model names and item keys are
cut in the middle so distinct ones stay distinct, the name column stays put when the table scrolls sideways,
the whole name is in the detail line; every Models column comes from one named run; an item nobody solved
reads "all wrong"."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.widgets.table import middle_cut
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)
PREFIX = "0-hero/Matter-0.1-Slim-7B-"


def long_names_db(db) -> str:
    from benchloupe.store.db import connect
    from benchloupe.store.importers.base import ParsedImport
    from benchloupe.store.writer import write_import

    keys = ["benchfill-1-7", "benchfill-1-74", "benchfill-1-745", "plain"]
    items = pd.DataFrame({"key": keys, "text": ["t"] * 4, "answer": ["a"] * 4})
    models = pd.DataFrame({"name": [PREFIX + s for s in ("DPO", "SFT", "preview", "KTO")]})
    correct = np.array([[0, 1, 1, 1], [0, 0, 1, 1], [0, 1, 0, 1], [0, 1, 1, 1]], np.int8)  # item 0: all wrong
    conn = connect(db)
    try:
        write_import(conn, ParsedImport("names", "static", items, models, correct=correct, source="test"), fmt="t")
    finally:
        conn.close()
    return "names"


def _rows(table) -> list[str]:
    return [table.render_line(y).text for y in range(1, len(table.view) + 1)]


def test_middle_cut_keeps_distinct_names_distinct():
    names = [PREFIX + s for s in ("DPO", "SFT", "preview")]
    cut = [middle_cut(n, 17) for n in names]
    assert len(set(cut)) == 3 and all(len(c) == 17 and "…" in c for c in cut)
    assert middle_cut("short", 17) == "short"


async def test_names_and_keys_stay_distinct_at_80_columns(tmp_path):
    db = tmp_path / "names.db"
    long_names_db(db)
    app = BenchloupeApp(db, benchmark="names")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        table = app.screen.query_one("#items-table")
        rows = _rows(table)
        keys = [r.split(" ")[0] for r in rows]
        assert len(set(keys)) == 4, keys
        assert all(len(r) == table.size.width for r in rows)
        frame = app.screen.frame.set_index("key")
        assert frame.loc["benchfill-1-7", "difficulty_text"] == "all wrong"
        assert "all wrong" in rows[0]
        assert "benchfill-1-7 " in str(app.screen.query_one("#items-status").render())
        first = rows[0][:15]
        table.scroll_to(x=30, animate=False, immediate=True)
        await pilot.pause()
        assert _rows(table)[0][:15] == first, "the key column scrolled away"
        await pilot.press("3")
        await wait_until(pilot, loaded(app, "models"), what="models")
        table = app.screen.query_one("#models-table")
        names = [r[:table.columns[0].width] for r in _rows(table)]
        assert len(set(names)) == 4, names
        assert table.columns[0].width > 17  # the name takes the width the other columns leave
        detail = str(app.screen.query_one("#models-detail").render())
        assert detail.splitlines()[0].startswith(PREFIX)


async def test_models_columns_come_from_one_named_run(demo_db):
    from benchloupe.jobs import ANALYSES
    from benchloupe.tui.screens.runs import default_config

    app = BenchloupeApp(demo_db, benchmark="demo-math")
    cfg = default_config(ANALYSES["static"])
    ANALYSES["static"].run(demo_db, "demo-math", cfg)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await wait_until(pilot, loaded(app, "models"), what="models")
        screen = app.screen
        status = str(screen.query_one("#models-status").render())
        assert f"every column from run #{screen.shown_run}" in status and "static fit" in status
        table = screen.query_one("#models-table")
        assert table.frame["rank"].iloc[table.row] == 1
        theta, lo, hi = (table.frame[c] for c in ("theta", "lo", "hi"))
        inside = lo.isna() | ((lo <= theta) & (theta <= hi))
        assert inside.all(), "a point outside its own interval: columns from different runs"
        await pilot.press("down", "down", "down")
        ANALYSES["static"].run(demo_db, "demo-math", cfg)  # a new fit: the screen opens at rank 1 again
        app.data_changed()
        await wait_until(pilot, lambda: loaded(app, "models")() and screen.shown_run != screen.runs["id"].min()
                         if len(screen.runs) > 1 else False, what="the new run")
        assert table.frame["rank"].iloc[table.row] == 1
        await pilot.press("r")
        await wait_until(pilot, lambda: loaded(app, "models")() and screen.shown_run == int(screen.runs["id"].min()),
                         what="the older run")


def test_run_metrics_show_counts_as_integers():
    """The Runs history showed a near-tie run's 1,000 controls as "controls=1e+03" (3 significant digits for
    every number): counts are integers, only measurements are rounded."""
    from benchloupe.tui.screens.runs import metric_summary

    assert metric_summary({"capped_models": 1245, "controls": 1000, "p": 0.15384615, "ok": True,
                           "status": "x"}) == "capped_models=1245 controls=1000 p=0.154"


def test_every_analysis_name_is_whole_in_the_runs_tables():
    """Runs cut "contamination" to "contaminati…" (analysis list) and "contamina…" (run history) at any width:
    the name and kind columns are as wide as the longest analysis name."""
    from benchloupe import jobs
    from benchloupe.tui.screens.runs import ANALYSIS_COLUMNS, RUN_COLUMNS

    longest = max(len(name) for name in jobs.ANALYSES)
    widths = {c.key: c.width for c in ANALYSIS_COLUMNS + RUN_COLUMNS}
    assert widths["name"] >= longest and widths["kind"] >= longest, (longest, widths)
