"""What a curator expects (issue 11, "build these"): quitting asks before cancelling a running job, triage
undo and "next untriaged" on every queue, search on Items and Models, the palette offers screen actions."""

from __future__ import annotations

import json

import pytest

from benchloupe.jobs.process import JobSpec
from benchloupe.tui.app import BenchloupeApp
from tests.tui import jobfns
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


@pytest.mark.timeout(60, method="thread")
async def test_quit_while_a_job_runs_asks_first(demo_db):
    from benchloupe.tui.widgets.dialogs import ConfirmDialog

    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        assert app.start_job("long fit", JobSpec(jobfns.wait_for_cancel))
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="quit confirmation")
        assert "long fit" in str(app.screen.query_one("Label").render())
        await pilot.press("n")  # stay: the job keeps running
        await pilot.pause(0.1)
        assert app.is_running and app.job.running and not app._cancel.is_set()
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="asked again")
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert app.is_running and app.job.running and not app._cancel.is_set()
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="asked a third time")
        cancel = app._cancel
        await pilot.press("y")
        await pilot.pause(0.2)
        assert cancel.is_set()
    assert not app.is_running


async def test_quit_without_a_job_does_not_ask(demo_db):
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        await pilot.press("q")
        await pilot.pause(0.1)
    assert not app.is_running and idle(app)()


def _flag_rows(db, kind: str):
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return curation.flags(conn, kind=kind).set_index("id"), curation.audit_log(conn)
    finally:
        conn.close()


def _status(screen) -> str:
    return str(screen.query_one("#queue-status").render())


@pytest.mark.parametrize("key, mode, kind", [("5", "anomalies", "anomaly"), ("6", "reversals", "reversal")])
async def test_queue_undo_and_next_untriaged(flagged_db, key, mode, kind):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(key)
        await wait_until(pilot, loaded(app, mode), what=mode)
        screen = app.screen
        screen.state_filter = "all"
        screen._refilter()
        first, second = (int(screen.flags["id"].iloc[screen.view[i]]) for i in (0, 1))
        await pilot.press("e")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="note dialog")
        await pilot.press(*"first look", "enter")
        await pilot.press("c")  # confirm: the queue moves on and names the decision at once
        assert screen.current_id() == second
        assert f"#{first} confirmed (z undo)" in _status(screen)
        await pilot.press("d")
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="saves")
        await pilot.press("z")  # undo the dismissal: back on the second flag, open again
        assert screen.current_id() == second and screen.flags.set_index("id").loc[second, "state"] == "open"
        assert f"#{second} back to open" in _status(screen)
        await pilot.press("z")  # undo the confirmation: open, note kept
        assert screen.current_id() == first
        await pilot.press("z")  # undo the note: the note it replaced (none) comes back
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="undo saves")
        assert " open" in str(screen.query_one("#queue-detail").render()).splitlines()[0]
        await pilot.press("z")
        assert "nothing to undo" in [n.message for n in app._notifications][-1]
        # n: the next open flag, skipping decided ones
        await pilot.press("c", "k")
        assert screen.current_id() == first
        await pilot.press("n")
        assert screen.current_id() == second
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="saves")
    flags, log = _flag_rows(flagged_db, kind)
    assert flags.loc[first, "state"] == "confirmed" and flags.loc[first, "note"] == ""
    assert flags.loc[second, "state"] == "open"
    undos = log[log["action"] == "flag:undo"]
    assert len(undos) == 3 and set(undos["entity_id"]) == {first, second}
    note_undo = json.loads(undos.iloc[0]["detail"])  # the latest undo: the note back to none
    assert {k: note_undo[k] for k in ("from", "to", "note_from")} == {"from": "open", "to": "open",
                                                                      "note_from": "first look"}
    assert undos.iloc[0]["note"] == "" and note_undo["undoes"]  # it names the decision it takes back


async def test_every_flag_triaged_then_n_says_so(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        await wait_until(pilot, loaded(app, "reversals"), what="reversals")
        await pilot.press("c", "c", "n")
        assert "triaged" in [n.message for n in app._notifications][-1]


async def test_gap_triage_shows_at_once_undo_and_next(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        table = app.screen.query_one("FrameTable")
        gap = int(table.frame["flag_id"].iloc[table.row])
        await pilot.press("c")
        assert "confirmed" in table._lines[table.row]  # in the list at once, before the write lands
        await wait_until(pilot, loaded(app, "coverage"), what="reload after the write")
        await pilot.press("z")
        assert "confirmed" not in table._lines[table.row] and table.current_value("flag_id") == gap
        await wait_until(pilot, loaded(app, "coverage"), what="reload after undo")
        await pilot.press("n")  # the first gap is open again; n moves to the next open one
        assert table.current_value("flag_id") != gap
    flags, log = _flag_rows(flagged_db, "gap")
    assert flags.loc[gap, "state"] == "open"
    assert log["action"].tolist()[:2] == ["flag:undo", "flag:confirmed"]


def _words_out_of_order(db):
    """An item of demo-math and two of its words in reverse order (not a substring of its text)."""
    from benchloupe.store import read
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        items = read.items(conn, "demo-math")
    finally:
        conn.close()
    for r in items.itertuples():
        words = [w for w in str(r.text).split() if w.isalpha() and len(w) > 3]
        if len(words) >= 2 and words[0].lower() != words[-1].lower():
            query = f"{words[-1]} {words[0]}"
            if query.lower() not in str(r.text).lower():
                return int(r.id), query
    raise AssertionError("no demo item with two words")


async def test_items_search_matches_words_through_the_index(demo_db):
    item_id, query = _words_out_of_order(demo_db)
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        screen = app.screen
        table = screen.query_one("FrameTable")
        total = len(table.view)
        await pilot.press("slash", *query)
        await wait_until(pilot, lambda: screen.query_text == query and idle(app)(), what="search")
        shown = set(table.frame["id"].to_numpy()[table.view])
        assert item_id in shown and len(shown) < total
        await pilot.press("escape")
        assert len(table.view) == total and screen.query_text == ""


async def test_models_search_filters_as_you_type(demo_db):
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await wait_until(pilot, loaded(app, "models"), what="models")
        screen = app.screen
        table = screen.query_one("FrameTable")
        total = len(table.view)
        name = str(table.frame["name"].iloc[-1])
        fragment = name[len(name) // 3:]
        await pilot.press("slash", *fragment)
        await wait_until(pilot, lambda: screen.query_text == fragment, what="search applied")
        names = table.frame["name"].to_numpy()[table.view].tolist()
        assert name in names and len(names) < total
        assert all(fragment.lower() in n.lower() for n in names)
        assert f"{len(names)} of {total} models" in str(screen.query_one("#models-status").render())
        await pilot.press("escape")
        assert len(table.view) == total


async def test_palette_offers_every_screens_actions(flagged_db):
    from benchloupe.tui.palette import WorkbenchCommands

    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "CommandPalette", what="palette")
        await pilot.press("escape")
        commands = {name: cb for name, cb, _help in WorkbenchCommands(app.screen).commands()}
        for want in ("items: search", "models: search", "flags: next untriaged (anomalies)",
                     "flags: undo (reversals)", "coverage: next untriaged", "benchfill: reject the rest",
                     "runs: compare"):
            assert any(n.startswith(want) for n in commands), (want, sorted(commands))
        commands["items: search"]()  # what the palette runs on enter (typing into it: test_app)
        await wait_until(pilot, loaded(app, "items"), what="items via the palette")
        await wait_until(pilot, lambda: app.screen.query_one("#items-search").has_focus, what="search box")


async def test_runs_speak_words_not_paper_sections(flagged_db):
    from benchloupe.tui.screens.runs import plain_title

    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await wait_until(pilot, loaded(app, "runs"), what="runs")
        screen = app.screen
        lines = " ".join(screen.query_one("#analyses")._lines)
        assert "Residual anomaly candidates" in lines
        assert "paper" not in lines and "§" not in lines and "Appendix" not in lines
        history = screen.query_one("#history")
        assert history.row is not None, "add_flags made runs"
        head = str(screen.query_one("#run-detail").render()).splitlines()[0]
        kind = str(history.frame["kind"].iloc[history.row])
        words = plain_title(screen.analyses[kind].title)
        assert head.startswith(f"run #{int(history.frame['id'].iloc[history.row])}: {words}"), head
        assert "paper" not in head and "§" not in head
