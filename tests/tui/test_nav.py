"""Finding and moving around (issue 11, "what a curator expects" 3-6 and "identity must survive 80 columns"):
``/`` search and ``s``/``S`` sort on every list, from an item or a model to its flags with the flagged model
marked on the item's curve, switching benchmark in place (remembered per database), export of the shown table
and of the decisions, the palette's commands, and rows that fill exactly the width of the screen with nothing
stray at the right edge. Real demo database, keys only."""

from __future__ import annotations

import pandas as pd
import pytest
from rich.cells import cell_len

from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.widgets.table import FrameTable
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)
PARTIAL_BLOCKS = set("▁▂▃▄▅▆▇▉▊▋▌▍▎▏")


def _screen_lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def _type(pilot, text: str) -> None:
    await pilot.press(*[{" ": "space", "-": "minus", "/": "slash"}.get(ch, ch) for ch in text])


# ---------------------------------------------------------------------------------------------- search / sort
LISTS = {  # screen key, mode, table id, a search text that keeps some but not all rows, a column to find it in
    "benchmarks": ("1", "benchmarks", "bench-table", "chem", "name"),
    "runs": ("4", "runs", "history", "neartie", "kind"),
    "coverage": ("7", "coverage", "gaps", "0.8", "lo"),
}


@pytest.mark.parametrize("name", list(LISTS))
async def test_slash_searches_and_s_sorts_every_list(flagged_db, name):
    key, mode, table_id, text, column = LISTS[name]
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(key)
        await wait_until(pilot, loaded(app, mode), what=mode)
        table = app.screen.query_one(f"#{table_id}", FrameTable)
        table.focus()
        await pilot.pause()
        total = len(table.view)
        assert total > 1
        await pilot.press("slash")
        await _type(pilot, text)
        await wait_until(pilot, lambda: table.query == text, what="the search text")
        kept = table.pandas_frame().iloc[table.view]  # the Benchmarks table holds a Columns (issue 26)
        assert 0 < len(kept) < total, (len(kept), total)
        assert all(text in " ".join(str(v) for v in row).lower() for row in kept.itertuples(index=False))
        assert f"{len(kept)} of {total}" in " ".join(_screen_lines(app))
        await pilot.press("enter")
        assert app.focused is table
        await pilot.press("escape")
        assert len(table.view) == total and table.query == ""
        await pilot.press("slash")
        await _type(pilot, text)
        await wait_until(pilot, lambda: len(table.view) < total, what="the search")
        await pilot.press("escape")  # from the box itself: cleared, back on the table
        assert len(table.view) == total and table.query == "" and app.focused is table
        assert not app.screen.query("TableSearch")
        await pilot.press("s")
        assert table.sort_key == table.columns[0].key and not table.descending
        assert "↑" in table.render_line(0).text
        await pilot.press("s")
        second = table.columns[1]
        assert table.sort_key == second.key
        values = table.pandas_frame()[second.sort_key or second.key].iloc[table.view].dropna().tolist()
        assert values == sorted(values)
        await pilot.press("S")
        assert table.descending and "↓" in table.render_line(0).text
        values = table.pandas_frame()[second.sort_key or second.key].iloc[table.view].dropna().tolist()
        assert values == sorted(values, reverse=True)


async def test_benchfill_sessions_search_and_sort(flagged_db):
    from benchloupe.store import fill, read
    from benchloupe.store.db import connect

    conn = connect(flagged_db)
    try:
        bid = read.benchmark_id(conn, "demo-math")
        for lo in (0.1, 0.5, 0.7):
            fill.create_session(conn, bid, lo, lo + 0.1, lo + 0.05, {})
    finally:
        conn.close()
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="benchfill")
        table = app.screen.query_one("#sessions", FrameTable)
        table.focus()
        await pilot.press("slash")
        await _type(pilot, "0.5")
        await wait_until(pilot, lambda: table.query == "0.5", what="search")
        assert len(table.view) == 1
        await pilot.press("escape", "s", "S")
        assert table.sort_key == "id" and table.descending


# ---------------------------------------------------------------------------------------------- 80 columns
async def test_rows_fill_the_width_with_nothing_stray_at_the_right_edge(flagged_db):
    """At 80x24 every Items row is exactly the table's width in cells, a column cut by the screen's edge
    ends in "…" (it read "acti" for "active"), and the scrollbar thumb is whole cells, not a ▇ glyph that
    reads as a stray character in the last column (issue 11)."""
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        table = app.screen.query_one("#items-table", FrameTable)
        width = table.scrollable_content_region.width  # the table's cells less its vertical scrollbar
        assert width == SIZE[0] - 1
        for y in range(table.scrollable_content_region.height):
            strip = table.render_line(y)
            assert strip.cell_length == width, (y, strip.text)
            assert cell_len(strip.text) == width
        lines = _screen_lines(app)
        assert all(cell_len(line) == SIZE[0] for line in lines)
        top = table.region.y
        row = lines[top + 1]
        assert row[:width] == table.render_line(1).text
        assert row[width - 1] == "…", row  # the status column is cut by the edge, and says so
        stray = [(y, line[-1]) for y, line in enumerate(lines) if line[-1] in PARTIAL_BLOCKS]
        assert not stray, stray
        assert not PARTIAL_BLOCKS & set("".join(lines)), "a partial block glyph on screen"
        for key, mode in (("2", "items"), ("7", "coverage")):  # Coverage's keys overflow the footer
            await pilot.press(key)
            await wait_until(pilot, loaded(app, mode), what=mode)
            await pilot.pause(0.2)
            footer = _screen_lines(app)[-1]
            assert footer.endswith("^p palette"), repr(footer)  # flush right: nothing after it, no ▏ before it
            assert "▏" not in footer


def test_fixed_width_columns_cut_with_an_ellipsis():
    from benchloupe.tui.widgets.table import Column, end_cut, format_lines

    cols = [Column("owner", "owner", 8), Column("n", "n", 3)]
    line = format_lines(pd.DataFrame({"owner": ["meta-llama-research", "ai2"], "n": ["1", "2"]}), cols)
    assert line[0] == "meta-ll… 1  " and line[1] == "ai2      2  "
    assert end_cut("🧪🧪🧪🧪🧪", 5) == "🧪🧪…" and cell_len(end_cut("🧪🧪🧪🧪🧪", 5)) <= 5


# ---------------------------------------------------------------------------------------------- jumps
def _anomalies(db) -> pd.DataFrame:
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return curation.flags(conn, kind="anomaly")
    finally:
        conn.close()


async def test_a_on_an_item_shows_that_items_flags(flagged_db):
    flags = _anomalies(flagged_db)
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        await pilot.press("f")  # only flagged items
        table = app.screen.query_one("#items-table", FrameTable)
        await pilot.press("down")
        item_id = int(table.current_value("id"))
        assert item_id in set(flags["item_id"])
        await pilot.press("a")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        await wait_until(pilot, lambda: len(screen.view) > 0, what="the item's flags")
        assert set(screen.flags["item_id"].iloc[screen.view]) == {item_id}
        assert len(screen.view) == int((flags["item_id"] == item_id).sum())
        assert "only item" in str(screen.query_one("#queue-status").render())


async def test_item_panel_marks_the_flagged_model_on_the_curve(flagged_db):
    from benchloupe.jobs import ANALYSES
    from benchloupe.tui.screens.items import show_item
    from benchloupe.tui.screens.runs import default_config

    ANALYSES["static"].run(flagged_db, "demo-math", default_config(ANALYSES["static"]))  # abilities to plot
    flag = _anomalies(flagged_db).iloc[0]
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        show_item(app, int(flag["item_id"]), mark_model=int(flag["model_id"]))
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ItemPanel" and app.screen.detail is not None,
                         what="panel")
        plot = str(app.screen.query_one("#item-plot").render())
        assert plot.count("◆") == 2, plot  # on the curve and in its legend
        assert f"{flag['model']} (the flagged model)" in plot
        outcomes = app.screen.query_one("#item-outcomes").render()
        assert str(outcomes).count("◆") == 1  # and in the outcomes list
        assert any("yellow" in str(span.style) for span in outcomes.spans)
        app.pop_screen()
        await pilot.press("enter")  # opened from the table: nothing marked
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ItemPanel" and app.screen.detail is not None,
                         what="panel")
        assert "◆" not in str(app.screen.query_one("#item-plot").render())


# ---------------------------------------------------------------------------------------------- benchmark switch
async def test_B_switches_benchmark_in_place_and_it_is_remembered(flagged_db):
    app = BenchloupeApp(flagged_db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        first = app.benchmark
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        await pilot.press("enter")  # an item panel of the first benchmark: it closes on a switch
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ItemPanel", what="panel")
        await pilot.press("B")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "BenchmarkPicker"
                         and len(app.screen.query_one(FrameTable).view) > 0, what="picker")
        picker = app.screen.query_one(FrameTable)
        names = list(picker.frame["name"])
        target = next(n for n in ("demo-math", "demo-chem") if n != first)
        while picker.current_value("name") != target:
            await pilot.press("down")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.benchmark == target and loaded(app, "items")(), what="the switch")
        assert type(app.screen).__name__ == "ItemsScreen"
        assert set(app.screen.frame["key"].str.split("-").str[0]) == {target.split("-")[1]}
        assert target in str(app.screen.query_one("#topbar").render())
        await pilot.press("3")  # every screen shows the chosen one
        await wait_until(pilot, loaded(app, "models"), what="models")
        assert app.screen.shown_token[0] == target
        await pilot.press("B")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "BenchmarkPicker", what="picker")
        await pilot.press("escape")  # cancel keeps the benchmark
        assert app.benchmark == target
        await wait_until(pilot, idle(app), what="the setting written")
    assert len(names) >= 3
    again = BenchloupeApp(flagged_db)  # the next start opens on it
    assert again.benchmark == target
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    conn = connect(flagged_db)
    try:
        curation.put_setting(conn, "tui.last_benchmark", "gone-benchmark")
    finally:
        conn.close()
    assert BenchloupeApp(flagged_db).benchmark is None  # gone: the Benchmarks screen's rule picks one


# ---------------------------------------------------------------------------------------------- export
async def test_w_exports_the_filtered_sorted_table_byte_exact(flagged_db, tmp_path, monkeypatch):
    import csv

    from tests.tui.conftest import EVIL

    monkeypatch.chdir(tmp_path)
    app = BenchloupeApp(flagged_db, benchmark="literal")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        await pilot.press("s", "S")  # key descending: "plain" before "[b]evil[/b]"
        await pilot.press("w")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="the path dialog")
        box = app.screen.query_one("Input")
        assert box.value == str(tmp_path / "benchloupe-items-literal.csv")
        await pilot.press("enter")
        out = tmp_path / "benchloupe-items-literal.csv"
        await wait_until(pilot, lambda: out.exists() and idle(app)(), what="the file")
        assert any(str(out) in n.message for n in app._notifications)
        with out.open(encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
        assert [r["key"] for r in rows] == ["plain", "[b]evil[/b]"]
        assert rows[1]["text"] == EVIL  # the whole text, markup and emoji as stored, not cut or escaped
        await pilot.press("slash")
        await _type(pilot, "plain")
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.screen.query_one(FrameTable).view) == 1, what="search")
        await pilot.press("w")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="the path dialog")
        box = app.screen.query_one("Input")
        box.value = str(tmp_path / "plain.json")
        await pilot.press("enter")
        await wait_until(pilot, lambda: (tmp_path / "plain.json").exists() and idle(app)(), what="the json")
        import json

        data = json.loads((tmp_path / "plain.json").read_text(encoding="utf-8"))
        assert [d["key"] for d in data] == ["plain"]
        await pilot.press("w")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="the path dialog")
        app.screen.query_one("Input").value = str(tmp_path / "nope.txt")
        await pilot.press("enter")
        assert "end the name in .csv or .json" in str(app.screen.query_one("#dialog-error").render())


async def test_W_exports_the_decisions(flagged_db, tmp_path):
    import csv

    from benchloupe.store import curation
    from benchloupe.store.db import connect

    flags = _anomalies(flagged_db)
    note = 'odd "quoted", ,comma\nnewline [b]x[/b] \x1b]0;t\x07'
    conn = connect(flagged_db)
    try:
        curation.set_flag_state(conn, int(flags["id"].iloc[0]), "confirmed", note)
        curation.set_flag_state(conn, int(flags["id"].iloc[1]), "dismissed")
    finally:
        conn.close()
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        await pilot.press("W")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="the path dialog")
        out = tmp_path / "decisions.csv"
        app.screen.query_one("Input").value = str(out)
        await pilot.press("enter")
        await wait_until(pilot, lambda: out.exists() and idle(app)(), what="the file")
        shown = " ".join(n.message for n in app._notifications)
        assert str(out) in shown and "\x1b" not in shown
    with out.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {(r["what"], r["id"], r["state"]) for r in rows} == {
        ("flag", str(flags["id"].iloc[0]), "confirmed"), ("flag", str(flags["id"].iloc[1]), "dismissed")}
    assert next(r for r in rows if r["state"] == "confirmed")["note"] == note  # byte-exact, control chars too


# ---------------------------------------------------------------------------------------------- palette
async def test_palette_offers_the_navigation_commands(flagged_db):
    from benchloupe.tui.palette import WorkbenchCommands

    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        provider = WorkbenchCommands(app.screen)
        names = [name for name, _cb, _help in provider.commands()]
        for wanted in ("items: search", "benchmark: switch", "export: table", "export: decisions",
                       "items: item's flags"):
            assert wanted in names, (wanted, names)
        assert any(n.startswith("flags: next untriaged") for n in names)
        callback = dict((n, cb) for n, cb, _h in provider.commands())["benchmark: switch"]
        callback()
        await wait_until(pilot, lambda: type(app.screen).__name__ == "BenchmarkPicker", what="picker")


async def test_a_queue_focus_on_one_item_does_not_outlive_a_benchmark_switch(flagged_db):
    """A model/item focus belongs to its benchmark: after B the queue shows the new benchmark's flags, not
    "only item X" over an empty list (seen after the switch landed)."""
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        await pilot.press("a")  # the item's flags on Anomalies, focused on that item
        await wait_until(pilot, lambda: getattr(app.screen, "MODE", "") == "anomalies" and idle(app)()
                         and app.screen.focus is not None, what="focused queue")
        queue = app.screen
        await pilot.press("B")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "BenchmarkPicker"
                         and len(app.screen.query_one(FrameTable).view) > 0, what="picker")
        picker = app.screen.query_one(FrameTable)
        for key in ["up"] * len(picker.view) + ["down"] * len(picker.view):
            if picker.current_value("name") == "demo-chem":
                break
            await pilot.press(key)
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.benchmark == "demo-chem" and app.screen is queue
                         and queue.shown_token is not None and queue.shown_token[0] == "demo-chem" and idle(app)(),
                         what="the switch")
        assert queue.focus is None
        assert "only " not in str(queue.query_one("#queue-status").render())
