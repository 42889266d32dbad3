"""Coverage recomputed after a BenchFill accept (issue 21 item 7): the recompute is the coverage the curator
ran, with its C.6 uncertainty, so the Coverage screen shows the max gap's 95% interval and each gap's interval
(the accepted item counted at its online-calibrated difficulty), as the CLI's own run shows them; never
"nan-nan" or "-" for every gap. Accepted in the app (keys), and with ``benchloupe review`` (the CLI)."""

from __future__ import annotations

import math
import threading

import pytest

from benchloupe.store import runs
from benchloupe.store.db import connect
from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def _session(db) -> int:
    from benchloupe.engine.benchfill import BenchFillConfig
    from benchloupe.jobs.fill import FillOptions
    from benchloupe.prompts import simulated
    from benchloupe.tui.jobs_ui import run_fill

    with simulated.serving():
        return run_fill(lambda *a: None, threading.Event(), str(db), "demo-math", FillOptions(),
                        BenchFillConfig())["session"]


def _latest_coverage(db) -> dict:
    conn = connect(db)
    try:
        rid = int(runs.list_runs(conn, "demo-math", kind="coverage")["id"].iloc[0])
        run = runs.get_run(conn, rid)
        from benchloupe.store import curation

        run["gaps"] = curation.flags(conn, run_id=rid, kind="gap")
        return run
    finally:
        conn.close()


def _has_intervals(run: dict) -> None:
    m = run["metrics"]
    assert m.get("n_benchfill_items", 0) >= 1, m.get("n_benchfill_items")
    lo, hi = m["max_gap_ci"]
    assert math.isfinite(lo) and math.isfinite(hi) and lo <= hi, m["max_gap_ci"]
    assert math.isfinite(m["max_gap_sd"])
    ci = [(p.get("ci_lo"), p.get("ci_hi")) for p in run["gaps"]["payload"]]
    assert ci and all(isinstance(a, float) and isinstance(b, float) for a, b in ci), ci


async def test_accept_in_the_app_then_coverage_shows_the_intervals(showcase_db):
    _session(showcase_db)
    before = _latest_coverage(showcase_db)
    app = BenchloupeApp(showcase_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="review queue")
        assert app.screen.view, "no proposal to review"
        await pilot.press("a")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PromptDialog", what="the note")
        await pilot.press("o", "k", "enter")
        await wait_until(pilot, lambda: app.screen.undo_stack and idle(app)(), timeout=120, what="the accept")
        after = _latest_coverage(showcase_db)
        assert after["id"] != before["id"]
        _has_intervals(after)
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        notes = str(app.screen.query_one("#coverage-notes").render())
        assert "nan" not in notes and "max gap 95% interval" in notes, notes
        frame = app.screen.query_one("#gaps").frame
        assert (frame["interval"] != "-").all(), frame["interval"].tolist()
        assert not [n for n in app._notifications if n.severity == "error"]


def test_accept_with_review_then_coverage_has_the_intervals(showcase_db, monkeypatch, capsys):
    import io

    from benchloupe.cli.main import main

    sid = _session(showcase_db)
    monkeypatch.setattr("sys.stdin", io.StringIO("a\nfine\nq\n"))
    assert main(["review", "--session", str(sid), "--db", str(showcase_db)]) == 0
    out = capsys.readouterr().out
    _has_intervals(_latest_coverage(showcase_db))
    assert "accepted as item benchfill-" in out, out


async def test_a_session_stopped_mid_round_shows_the_calls_it_made(showcase_db):
    """Issue 21 item 8: the session line read "annotated 0" through a whole round of answers (it counted only
    children with a difficulty, known at the end of the round). It shows the answers and LLM calls so far."""
    from benchloupe.engine.common import Cancelled
    from benchloupe.jobs.fill import start_fill
    from benchloupe.prompts import simulated

    cancel, start = threading.Event(), []

    def progress(done, total, stage):
        if "annotating" in stage:
            start.append(done) if not start else None
            if done - start[0] >= 60:
                cancel.set()

    with simulated.serving(), pytest.raises(Cancelled):
        start_fill(showcase_db, "demo-math", progress=progress, cancel=cancel)
    app = BenchloupeApp(showcase_db, benchmark="demo-math")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="benchfill")
        line = str(app.screen.query_one("#fill-summary").render())
        import re

        answers = re.search(r"answers ([\d,]+)", line)
        calls = re.search(r"([\d,]+) LLM calls", line)
        assert answers and int(answers.group(1).replace(",", "")) >= 60, line
        assert calls and int(calls.group(1).replace(",", "")) >= 60 + 4 + 16 - 16, line
