"""BenchFill from the keyboard against the local fake OpenAI-compatible endpoint (tests/fake_llm.py): pick a
coverage gap, start a session, review a proposal, accept it, find the new item in the Items table, and see
the session again after a restart."""

from __future__ import annotations

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.fake_llm import fake_llm  # noqa: F401 - the fixture
from tests.fill_world import configure_endpoints, store_world
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


async def test_benchfill_session_review_accept_and_resume(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    from benchloupe.store import fill, read
    from benchloupe.store.db import connect

    db = tmp_path / "fill.db"
    bench = store_world(fake_llm, db)
    configure_endpoints(fake_llm, db, monkeypatch)
    app = BenchloupeApp(db, benchmark=bench)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        assert len(app.screen.query_one("#gaps").view) >= 1
        await pilot.press("b")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="fill form")
        form = app.screen
        assert form.query_one("#field-gap").value == "1"
        for name, value in (("max_rounds", "2"), ("n_parents", "2"), ("n_children", "3")):
            form.query_one(f"#field-cfg-{name}").value = value
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not app.job.running and app.job.outcome != "", timeout=120, what="session")
        assert not app.job.failed, app.job.outcome
        await wait_until(pilot, loaded(app, "benchfill"), what="review queue")
        screen = app.screen
        assert screen.session_id is not None and screen.view, "no proposal to review"
        summary = str(screen.query_one("#fill-summary").render())
        assert "round" in summary and "valid" in summary and "best distance" in summary
        review = str(screen.query_one("#fill-review").render())
        assert "estimated difficulty" in review and "Change from the parent" in review
        if len(screen.view) > 1:  # ] and [ step through the proposals (the keys a terminal sends)
            # the session table's highlight may still reload the queue (keeping the shown proposal, wherever it
            # now sorts): step from where the screen settled, not from 0 (it failed at load 14 with pos 4 -> 5)
            await pilot.pause()
            await wait_until(pilot, idle(app), what="settled queue")
            start = screen.pos
            step, forward, back = (1, "]", "[") if start < len(screen.view) - 1 else (-1, "[", "]")
            await pilot.press(forward)
            assert screen.pos == start + step
            assert f"Proposal {start + step + 1} of" in str(screen.query_one("#fill-review").render())
            await pilot.press(back)
            assert screen.pos == start
        cid = screen.current_candidate()
        await pilot.press("a")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="note")
        await pilot.press(*"fills the gap", "enter")
        await wait_until(pilot, lambda: app.screen is screen and idle(app)() and cid not in
                         {screen.current_candidate()}, timeout=60, what="accept")
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        keys = set(app.screen.query_one("#items-table").frame["key"])
        assert f"benchfill-{screen.session_id}-{cid}" in keys
    conn = connect(db)
    try:
        cand = fill.candidates(conn, reviewable_only=False).set_index("id").loc[cid]
        assert cand["review_state"] == "accepted" and cand["note"] == "fills the gap"
        assert (read.items(conn, bench)["origin"] == "benchfill").sum() == 1
    finally:
        conn.close()

    app = BenchloupeApp(db, benchmark=bench)  # the session and its decisions survive a restart
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="benchfill after restart")
        assert "1 accepted" in str(app.screen.query_one("#fill-summary").render())


async def test_endpoints_are_edited_in_the_app_and_the_key_stays_in_the_environment(demo_db):
    from benchloupe.jobs import fill as jobs_fill
    from benchloupe.store.db import connect

    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="benchfill")
        assert "endpoints: simulated" in str(app.screen.query_one("#fill-summary").render())  # the demo's
        screen = app.screen
        await pilot.press("E")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="endpoints form")
        form = app.screen
        for name, value in (("rw_url", "http://127.0.0.1:9/v1"), ("rw_model", "rewriter-x"), ("jd_model", "judge-y"),
                            ("anns", "northwind/Llama-3-7B-tuned=annot-a*3, helix-ml/phi-2-9b-orca"),
                            ("key_env", "MY_KEY")):
            form.query_one(f"#field-{name}").value = value
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: app.screen is screen and idle(app)(), what="saved")
    conn = connect(demo_db)
    try:
        eps = jobs_fill.get_endpoints(conn)
    finally:
        conn.close()
    assert eps["rewriter"]["model"] == "rewriter-x" and eps["judge"]["base_url"] == "http://127.0.0.1:9/v1"
    assert [(a["name"], a["model"], a["trials"]) for a in eps["annotators"]] == [
        ("northwind/Llama-3-7B-tuned", "annot-a", 3), ("helix-ml/phi-2-9b-orca", "helix-ml/phi-2-9b-orca", 4)]
    assert eps["rewriter"]["api_key_env"] == "MY_KEY" and "api_key" not in eps["rewriter"]


async def test_a_failed_session_is_reported_as_failed_with_its_reason(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db = tmp_path / "fill.db"
    bench = store_world(fake_llm, db)
    configure_endpoints(fake_llm, db, monkeypatch)
    monkeypatch.delenv("FAKE_LLM_KEY")  # the key the endpoints name is missing: the session cannot start
    app = BenchloupeApp(db, benchmark=bench)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        await pilot.press("b")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="fill form")
        app.screen.query_one("#field-cfg-max_rounds").value = "1"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not app.job.running and app.job.outcome != "", timeout=120, what="session")
        assert app.job.failed, app.job.outcome
        assert "finished" not in app.job.outcome
        assert "FAKE_LLM_KEY" in app.job.outcome or "key" in app.job.outcome.lower(), app.job.outcome
        await wait_until(pilot, loaded(app, "benchfill"), what="fill screen")
        await pilot.press("f")  # the summary follows the filter
        assert "showing all" in str(app.screen.query_one("#fill-summary").render())
