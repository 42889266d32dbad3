"""Issue 25: several curators on one database. The app under test runs here (Pilot); the other curator is a real
separate process (the ``benchloupe`` CLI as a subprocess) writing to the same file. The tmux tests in
tests/integration/test_team_processes.py run both sides as terminal apps in their own processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import idle, loaded, wait_until
from tests.tui.team import audit_rows, candidate_rows, flag_rows, small_session

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def cli(db, *args: str, who: str = "bea") -> subprocess.CompletedProcess:
    """The other curator: ``benchloupe --as WHO ...`` in its own process."""
    env = {**os.environ, "BENCHLOUPE_USER": ""}
    return subprocess.run([sys.executable, "-m", "benchloupe", "--db", str(db), "--as", who, *args],
                          capture_output=True, text=True, env=env, timeout=120)


def card(screen) -> str:
    return str(screen.query_one("#queue-detail").render())


def notes(app) -> list[str]:
    return [n.message for n in app._notifications]


async def test_another_process_decision_reaches_the_open_card(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        fid = screen.current_id()
        assert " open" in card(screen).splitlines()[0] and "curator" in str(app.screen.query_one("#topbar").render())
        out = cli(flagged_db, "flags", "--set", str(fid), "dismissed", "--note", "other curator says noise")
        assert out.returncode == 0, out.stderr
        checks = app.watcher.checks
        await wait_until(pilot, lambda: "dismissed by bea" in card(screen), what="bea's decision on the card")
        assert app.watcher.checks - checks <= 8  # noticed by the poll within a few ticks (4 a second), not a reload
        text = card(screen)
        assert "changed while you looked: dismissed by bea" in text and "other curator says noise" in text
        assert screen.current_id() == fid  # the cursor stayed
        # A has seen it now: a decision on what the card shows goes through, on top of bea's
        await pilot.press("c")
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="saved")
    flags = flag_rows(flagged_db, "anomaly")
    assert (flags.loc[fid, "state"], flags.loc[fid, "updated_by"]) == ("confirmed", "curator")
    rows = [r for r in audit_rows(flagged_db, "flag") if r["entity_id"] == fid]
    assert [(r["actor"], r["action"]) for r in rows] == [("bea", "flag:dismissed"), ("curator", "flag:confirmed")]
    assert rows[1]["detail"]["replaced"]["by"] == "bea"


async def test_a_decision_on_a_stale_card_is_refused_naming_who_changed_it(flagged_db):
    """The report: B dismissed #1 with a note; A, still seeing "#1 open", pressed c and overwrote B without a
    word. Now A's c is refused with B's name, nothing is overwritten, and the card shows B's decision."""
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        fid = screen.current_id()
        app.watcher.changed = lambda: False  # A's screen has not caught up yet (a loaded machine, a slow link)
        out = cli(flagged_db, "flags", "--set", str(fid), "dismissed", "--note", "other curator says noise")
        assert out.returncode == 0, out.stderr
        await pilot.press("c")
        await wait_until(pilot, lambda: any("bea" in m for m in notes(app)), what="the refusal")
        refusal = next(m for m in notes(app) if "bea" in m)
        assert f"flag #{fid} changed since you saw it: now dismissed by bea" in refusal
        assert "not saved" in refusal
        await wait_until(pilot, lambda: loaded(app, "anomalies")() and "dismissed by bea" in
                         card(screen) if screen.current_id() == fid else True, what="card refreshed")
    flags = flag_rows(flagged_db, "anomaly")
    assert (flags.loc[fid, "state"], flags.loc[fid, "note"]) == ("dismissed", "other curator says noise")
    assert [r["actor"] for r in audit_rows(flagged_db, "flag") if r["entity_id"] == fid] == ["bea"]


async def test_undo_after_another_curator_changed_the_flag_is_refused(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        fid = screen.current_id()
        await pilot.press("d")
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="saved")
        out = cli(flagged_db, "flags", "--set", str(fid), "confirmed", "--expect", "dismissed")
        assert out.returncode == 0, out.stderr
        await pilot.press("z")
        await wait_until(pilot, lambda: any("after your decision" in m for m in notes(app)), what="refusal")
        assert any(f"flag #{fid} changed after your decision: now confirmed by bea" in m for m in notes(app))
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="settled")
    flags = flag_rows(flagged_db, "anomaly")
    assert (flags.loc[fid, "state"], flags.loc[fid, "updated_by"]) == ("confirmed", "bea")
    assert [r["action"] for r in audit_rows(flagged_db, "flag") if r["entity_id"] == fid] == [
        "flag:dismissed", "flag:confirmed"]  # no undo written


async def test_batch_is_all_or_none_when_one_flag_changed(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        ids = [int(screen.flags["id"].iloc[screen.view[i]]) for i in range(3)]
        await pilot.press("space", "space", "space")
        app.watcher.changed = lambda: False
        assert cli(flagged_db, "flags", "--set", str(ids[1]), "unsure").returncode == 0
        await pilot.press("d")  # the three marked: one changed since, so none is written
        await wait_until(pilot, lambda: any("nothing of the batch was saved" in m for m in notes(app)),
                         what="refusal")
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="settled")
    flags = flag_rows(flagged_db, "anomaly")
    assert [flags.loc[i, "state"] for i in ids] == ["open", "unsure", "open"]


async def test_queue_filters_mine_and_others(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        mine = screen.current_id()
        await pilot.press("c")
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="saved")
        theirs = int(screen.flags["id"].iloc[screen.view[3]])
        assert cli(flagged_db, "flags", "--set", str(theirs), "dismissed").returncode == 0
        await wait_until(pilot, lambda: "dismissed" in set(screen.flags["state"]), what="live reload")
        for _ in range(screen.FILTERS.index("mine")):
            await pilot.press("f")
        assert screen.state_filter == "mine"
        assert [int(screen.flags["id"].iloc[i]) for i in screen.view] == [mine]
        await pilot.press("f")
        assert screen.state_filter == "others'"
        assert [int(screen.flags["id"].iloc[i]) for i in screen.view] == [theirs]
        assert "(others')" in str(screen.query_one("#queue-status").render())


async def test_a_proposal_another_curator_reviews_cannot_be_decided(demo_db):
    """BenchFill: bea's `benchloupe review` (a real process) holds proposal #1 while its prompt waits; the
    app's card says "bea is reviewing" and refuses a decision on it; once bea's process is killed its lease
    is gone (its process is gone) and the proposal can be decided."""
    sid = small_session(demo_db, n=2)
    env = {**os.environ, "BENCHLOUPE_USER": ""}
    review = subprocess.Popen([sys.executable, "-m", "benchloupe", "--db", str(demo_db), "--as", "bea", "review",
                               "--session", str(sid)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env)
    try:
        shown = b""
        while b"[a]ccept" not in shown:  # its first proposal is on bea's prompt: the lease is held
            chunk = os.read(review.stdout.fileno(), 4096)
            assert chunk, review.stderr.read().decode()
            shown += chunk
        app = BenchloupeApp(demo_db, benchmark="demo-math")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("8")
            await wait_until(pilot, loaded(app, "benchfill"), what="review queue")
            screen = app.screen
            held = screen.current_candidate()
            box = lambda: str(screen.query_one("#fill-review").render())  # noqa: E731
            assert "bea (since" in box() and "is reviewing this proposal" in box()
            await pilot.press("a")
            assert any("bea (since" in m and "reviewing it" in m for m in notes(app))
            assert type(app.screen).__name__ != "PromptDialog"  # refused before asking for a note
            review.kill()
            review.wait(timeout=30)
            screen.reload()
            await wait_until(pilot, loaded(app, "benchfill"), what="reloaded")
            await wait_until(pilot, lambda: "is reviewing" not in box(), what="lease gone with its process")
            await pilot.press("r")
            await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="note")
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.screen is screen and idle(app)() and not screen.writing,
                             timeout=60, what="written")
        cands = candidate_rows(demo_db, sid)
        assert (cands.loc[held, "review_state"], cands.loc[held, "decided_by"]) == ("rejected", "curator")
    finally:
        if review.poll() is None:
            review.kill()
