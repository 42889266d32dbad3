"""The product of paths for decisions (issue 21, "the class, not only the instances"): after each kind of
decision, with and without a note, single and batch, on every queue (Anomalies, Reversals, Coverage gaps,
BenchFill proposals), ``z`` restores exactly the previous state in the database: state, note, and who decided it
and when. The real app, keys only for the decisions and undos (Pilot); the flags start in assorted decided
states written by an earlier curator."""

from __future__ import annotations

import itertools

import pytest

from benchloupe.store import actor, curation
from benchloupe.store.db import connect
from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import idle, loaded, wait_until
from tests.tui.team import candidate_rows, small_session

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600, method="thread")]
SIZE = (80, 24)
PRE = ("confirmed", "open", "dismissed", "unsure")


def _preset(db, kind: str) -> list[int]:
    """Every flag of *kind* decided by "earlier" (assorted states; a note on every other one)."""
    conn = connect(db)
    try:
        ids = [int(i) for i in curation.flags(conn, kind=kind)["id"]]
        actor.set_actor("earlier")
        for k, fid in enumerate(ids):
            curation.set_flag_state(conn, fid, PRE[k % 4], f"earlier note {k}" if k % 2 == 0 else "")
        actor.set_actor(None)
        return ids
    finally:
        conn.close()


def _rows(db, ids) -> dict:
    conn = connect(db)
    try:
        return {fid: tuple(conn.execute("SELECT state, note, updated_by, updated_at FROM flags WHERE id = ?",
                                        (fid,)).fetchone()) for fid in ids}
    finally:
        conn.close()


def _settled(app, screen):
    return lambda: app.screen is screen and not getattr(screen, "saving", False) and idle(app)()


async def _goto(pilot, screen, fid: int) -> None:
    ids = [int(screen.flags["id"].iloc[i]) for i in screen.view]
    screen.pos = ids.index(fid)
    screen.render_current()
    await pilot.pause()


@pytest.mark.parametrize("key, mode, kind", [("5", "anomalies", "anomaly"), ("6", "reversals", "reversal")])
async def test_undo_restores_every_kind_of_flag_decision(flagged_db, key, mode, kind):
    ids = _preset(flagged_db, kind)
    combos = list(itertools.product("cduo", (False, True), (False, True)))  # decision, with a note, batch
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(key)
        await wait_until(pilot, loaded(app, mode), what=mode)
        screen = app.screen
        screen.state_filter = "all"
        screen._refilter()
        for n, (decision, with_note, batch) in enumerate(combos):
            targets = [ids[n % len(ids)]] + ([ids[(n + 1) % len(ids)]] if batch else [])
            before = _rows(flagged_db, targets)
            presses = 0
            if with_note:  # a note on the first, then the decision
                await _goto(pilot, screen, targets[0])
                await pilot.press("e")
                await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="note dialog")
                app.screen.query_one("Input").value = f"note {n}"
                await pilot.press("enter")
                presses += 1
            await _goto(pilot, screen, targets[0])
            if batch:
                for fid in targets:
                    await _goto(pilot, screen, fid)
                    await pilot.press("space")
            await pilot.press(decision)
            presses += 1
            await wait_until(pilot, _settled(app, screen), what=f"{decision} saved")
            after = _rows(flagged_db, targets)
            assert all(after[f][0] == {"c": "confirmed", "d": "dismissed", "u": "unsure", "o": "open"}[decision]
                       for f in targets), (n, after)
            for _ in range(presses):
                await pilot.press("z")
                await wait_until(pilot, _settled(app, screen), what="undo saved")
            assert _rows(flagged_db, targets) == before, (decision, with_note, batch)
            shown = screen.flags.set_index("id")
            assert [(shown.loc[f, "state"], shown.loc[f, "note"]) for f in targets] == [
                before[f][:2] for f in targets], (n, decision, with_note, batch)


async def test_undo_restores_every_gap_decision(flagged_db):
    ids = _preset(flagged_db, "gap")
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        screen = app.screen
        table = screen.query_one("FrameTable")
        for decision, batch in itertools.product("cduo", (False, True)):
            table.move_to_value("flag_id", ids[0])
            targets = [ids[0]]
            if batch:
                await pilot.press("space")  # marks the first and moves down
                targets.append(int(table.current_value("flag_id")))
                await pilot.press("space")
                table.move_to_value("flag_id", ids[0])
            before = _rows(flagged_db, targets)
            await pilot.press(decision)
            await wait_until(pilot, loaded(app, "coverage"), what="decided")
            await wait_until(pilot, _settled(app, screen), what="saved")
            await pilot.press("z")
            await wait_until(pilot, loaded(app, "coverage"), what="undone")
            await wait_until(pilot, _settled(app, screen), what="undo saved")
            assert _rows(flagged_db, targets) == before, (decision, batch)


async def test_undo_restores_every_proposal_decision(demo_db):
    sid = small_session(demo_db, n=4)
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="review queue")
        screen = app.screen
        for decision, with_note, batch in itertools.product("ra", (False, True), (False, True)):
            if decision == "a" and batch and with_note:
                continue  # one batch accept is enough to recompute coverage twice more
            before = candidate_rows(demo_db, sid)[["review_state", "note", "item_id", "decided_by"]].copy()
            if batch:
                await pilot.press("space", "space")
            await pilot.press(decision)
            await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="note dialog")
            if with_note:
                app.screen.query_one("Input").value = "a note"
            await pilot.press("enter")
            await wait_until(pilot, lambda: _settled(app, screen)() and not screen.writing, timeout=120,
                             what="decided")
            changed = candidate_rows(demo_db, sid)
            assert (changed["review_state"] != before["review_state"]).sum() == (2 if batch else 1)
            await pilot.press("z")
            await wait_until(pilot, lambda: _settled(app, screen)() and not screen.writing, timeout=120,
                             what="undone")
            now = candidate_rows(demo_db, sid)[["review_state", "note", "item_id"]]
            assert now.equals(before[["review_state", "note", "item_id"]]), (decision, with_note, batch)
            await wait_until(pilot, loaded(app, "benchfill"), what="reloaded")
    conn = connect(demo_db)
    try:
        assert conn.execute("SELECT count(*) FROM items WHERE origin = 'benchfill'").fetchone()[0] == 0
    finally:
        conn.close()
