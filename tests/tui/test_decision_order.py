"""Issue 21 #3: a note, a decision and an undo in quick succession act in the order they were pressed.

Keys are sent the way the terminal driver sends them, all at once (``team.burst``): what a fast typist or a
loaded machine (load 5-7 in the report) produces. Before the fix, keys sent right after enter landed in the
still-open note field ("fast notedz"), an undo could revert the note instead of the decision, a decision and
its undo still waiting to be written were merged into one audit row (the decision missing from the log), and
on BenchFill a ``z`` pressed while the latest decision was being saved undid the decision before it."""

from __future__ import annotations

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import idle, loaded, wait_until
from tests.tui.team import audit_rows, burst, candidate_rows, flag_rows, small_session, writer_lock

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def _quiet(app, screen):
    return lambda: app.screen is screen and not getattr(screen, "saving", False) and idle(app)()


def _logged(db, fid, n: int, app, screen):
    """Quiet, and *fid* has *n* audit rows: keys sent in a burst may still wait in the app's queue when the screen
    is first quiet (between enter and d); leaving the app then would drop them."""
    quiet = _quiet(app, screen)
    return lambda: quiet() and len([r for r in audit_rows(db, "flag") if r["entity_id"] == fid]) >= n


@pytest.mark.parametrize("key, mode, kind", [("5", "anomalies", "anomaly"), ("6", "reversals", "reversal")])
async def test_keys_right_after_the_note_act_on_the_card(flagged_db, key, mode, kind):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(key)
        await wait_until(pilot, loaded(app, mode), what=mode)
        screen = app.screen
        fid = screen.current_id()
        await pilot.press("e")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="note dialog")
        burst(app, [*"fast note", "enter", "d", "z"])
        await wait_until(pilot, _logged(flagged_db, fid, 3, app, screen),
                         what="the note, the decision and the undo saved")
    flags = flag_rows(flagged_db, kind)
    assert flags.loc[fid, "note"] == "fast note"  # not "fast notedz"
    assert flags.loc[fid, "state"] == "open"
    rows = [r for r in audit_rows(flagged_db, "flag") if r["entity_id"] == fid]
    assert [r["action"] for r in rows] == ["flag:open", "flag:dismissed", "flag:undo"]
    assert rows[-1]["detail"]["from"] == "dismissed" and rows[-1]["note"] == "fast note"


async def test_undo_reverts_the_decision_not_the_note_before_it(flagged_db):
    """e, a note, enter, d, z, each as soon as the previous key is in: the undo takes back the dismissal and the
    note stays (the report: the note was erased and the last audit row held it in ``note_from``)."""
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        fid = screen.current_id()
        burst(app, ["e"])
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="note dialog")
        app.screen.query_one("Input").value = "kept note"
        burst(app, ["enter", "d", "z"])
        await wait_until(pilot, _logged(flagged_db, fid, 3, app, screen), what="saved")
        assert screen.flags.set_index("id").loc[fid, "note"] == "kept note"
    flags = flag_rows(flagged_db, "anomaly")
    assert (flags.loc[fid, "state"], flags.loc[fid, "note"]) == ("open", "kept note")
    last = [r for r in audit_rows(flagged_db, "flag") if r["entity_id"] == fid][-1]
    assert last["action"] == "flag:undo" and last["detail"]["note_from"] == "kept note"
    assert last["detail"]["from"] == "dismissed"


async def test_a_decision_and_its_undo_both_reach_the_log_when_writes_wait(flagged_db):
    """The store is busy (another writer holds the lock) while c then z are pressed: both are written, in
    order, when it frees; neither is dropped or merged."""
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        fid = screen.current_id()
        with writer_lock(flagged_db):
            await pilot.press("c", "z")
            await pilot.pause(0.3)
        await wait_until(pilot, _quiet(app, screen), what="both written")
    rows = [r for r in audit_rows(flagged_db, "flag") if r["entity_id"] == fid]
    assert [r["action"] for r in rows] == ["flag:confirmed", "flag:undo"]
    assert flag_rows(flagged_db, "anomaly").loc[fid, "state"] == "open"


async def test_z_while_a_proposal_decision_is_saving_undoes_that_one(demo_db):
    """BenchFill: reject #1 (saved), reject #2 while the store is busy, z: the undo waits for #2's write and
    takes #2 back; #1 stays rejected (before: z undid #1, reaching past the decision being saved)."""
    sid = small_session(demo_db)
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="review queue")
        screen = app.screen
        first = screen.current_candidate()
        await pilot.press("r")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="note")
        await pilot.press("enter")
        await wait_until(pilot, _quiet(app, screen), what="first saved")
        await wait_until(pilot, loaded(app, "benchfill"), what="reloaded")
        second = screen.current_candidate()
        assert second != first
        with writer_lock(demo_db):
            await pilot.press("r")
            await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="note")
            await pilot.press("enter")
            await pilot.pause(0.2)
            await pilot.press("z")
            await pilot.pause(0.3)
        await wait_until(pilot, _quiet(app, screen), timeout=60, what="all written")
    cands = candidate_rows(demo_db, sid)
    assert cands.loc[first, "review_state"] == "rejected"
    assert cands.loc[second, "review_state"] == "pending"
