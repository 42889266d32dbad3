"""Issue 26: a triage queue of many flags is read a page at a time. A real SQLite file holds 50,000 anomaly flags
(written by the store's own run functions); the Anomalies screen's first visit reads one page of them, stepping
crosses page boundaries both ways in the queue's order (the whole queue as ``curation.queue_flags`` reads it is
the oracle), a decision and its undo work across a page boundary, and a decision another process (the CLI)
makes on a flag the screen has not loaded yet shows when the curator gets there, with no false conflict."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from benchloupe.store.queue import PAGE
from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import idle, loaded, wait_until
from tests.tui.team import audit_rows, flag_rows
from tests.tui.test_team import card, cli

pytestmark = pytest.mark.anyio
SIZE = (80, 24)
N = 50_000


@pytest.fixture(scope="module")
def big_template(demo_db_template, tmp_path_factory) -> Path:
    """The demo plus an anomaly run of 50,000 flags (scores with ties, so the order's second key counts)."""
    from benchloupe.store import read, runs
    from benchloupe.store.db import connect

    path = tmp_path_factory.mktemp("bigqueue") / "demo.db"
    shutil.copy(demo_db_template, path)
    conn = connect(path)
    try:
        bid = read.benchmark_id(conn, "demo-math")
        items = read.items(conn, "demo-math")["id"].tolist()
        models = read.models(conn, "demo-math")["id"].tolist()
        rid = runs.create_run(conn, "anomalies", bid, config={}, seed=0, code_version="test", input_fingerprint="t")
        rows = [{"kind": "anomaly", "item_id": int(items[k % len(items)]), "model_id": int(models[k % len(models)]),
                 "score": -(3.0 + (k * 7919 % 5000) / 1000.0),
                 "payload": {"expected_p": 0.9, "observed": 0.0, "residual": -3.0, "source": "static"}}
                for k in range(N)]
        runs.save_outputs(conn, rid, runs.RunOutputs(metrics={"flagged": N}, flags=pd.DataFrame(rows)))
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return path


@pytest.fixture
def big_db(big_template, tmp_path) -> Path:
    dst = tmp_path / "big.db"
    shutil.copy(big_template, dst)
    return dst


def _order(db: Path) -> list[int]:
    """The queue's flag ids in order, read whole the way the screen read them before issue 26."""
    from benchloupe.store import curation, read
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return [int(i) for i in curation.queue_flags(conn, read.benchmark_id(conn, "demo-math"), "anomaly")["id"]]
    finally:
        conn.close()


def _status(screen) -> str:
    return str(screen.query_one("#queue-status").render())


async def _open(pilot, app):
    await pilot.press("5")
    await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
    return app.screen


async def test_first_visit_reads_one_page_and_counts_with_separators(big_db):
    app = BenchloupeApp(big_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app)
        assert screen.view_len == screen.total == N
        assert screen.rows_read <= PAGE and len(screen.flags) <= PAGE  # a page, not 50,000 rows
        assert screen.current_id() == _order(big_db)[0]
        status = _status(screen)
        assert "Anomaly 1 of 50,000" in status and "0 of 50,000 triaged" in status
        assert "observed 0 (wrong)" in card(screen)


async def test_stepping_crosses_page_boundaries_in_the_queue_order(big_db):
    order = _order(big_db)
    app = BenchloupeApp(big_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app)
        steps = PAGE + 30  # past the first page's end and the next read's margin
        for k in range(1, steps + 1):
            await pilot.press("j")
            assert (screen.pos, screen.current_id()) == (k, order[k])
        assert f"Anomaly {steps + 1} of 50,000" in _status(screen)
        assert not screen._loaded(0)  # the window moved on
        for k in range(steps - 1, -1, -1):  # back to the first flag, through the page before
            await pilot.press("k")
            assert (screen.pos, screen.current_id()) == (k, order[k])
        assert screen.rows_read < 5 * PAGE  # pages, never the queue


async def test_triage_then_undo_across_a_page_boundary(big_db):
    order = _order(big_db)
    app = BenchloupeApp(big_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app)
        target = PAGE - 2
        for _ in range(target):
            await pilot.press("j")
        assert screen.current_id() == order[target]
        await pilot.press("d")  # dismissed; the card moves on
        assert screen.current_id() == order[target + 1] and "1 of 50,000 triaged" in _status(screen)
        while screen._loaded(target):  # on past the next page's start, so the decided flag is not loaded
            await pilot.press("j")
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="decision saved")
        assert flag_rows(big_db, "anomaly").loc[order[target], "state"] == "dismissed"
        await pilot.press("z")
        assert (screen.pos, screen.current_id()) == (target, order[target])  # the undone flag is on the card
        assert "0 of 50,000 triaged" in _status(screen) and " open" in card(screen).splitlines()[0]
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="undo saved")
        await pilot.press("j")
        assert screen.current_id() == order[target + 1]
    assert flag_rows(big_db, "anomaly").loc[order[target], "state"] == "open"
    assert [r["action"] for r in audit_rows(big_db, "flag") if r["entity_id"] == order[target]] == [
        "flag:dismissed", "flag:undo"]


async def test_another_process_decides_a_flag_not_yet_loaded(big_db):
    order = _order(big_db)
    far = PAGE + 40
    app = BenchloupeApp(big_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app)
        assert not screen._loaded(far)
        reloads = screen.live_reloads
        out = cli(big_db, "flags", "--set", str(order[far]), "dismissed", "--note", "bea: noise")
        assert out.returncode == 0, out.stderr
        await wait_until(pilot, lambda: screen.live_reloads > reloads and "1 of 50,000 triaged" in _status(screen),
                         what="the other process's decision counted")
        assert screen.current_id() == order[0] and not screen._loaded(far)
        for _ in range(far):
            await pilot.press("j")
        assert screen.current_id() == order[far]
        text = card(screen)
        assert "dismissed by bea" in text and "bea: noise" in text
        assert "changed while you looked" not in text  # this screen never showed it before
        await pilot.press("c")  # on the version loaded: no conflict
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="saved")
        assert not [n for n in app._notifications if n.message.startswith("Refused: ")]
    flags = flag_rows(big_db, "anomaly")
    assert (flags.loc[order[far], "state"], flags.loc[order[far], "updated_by"]) == ("confirmed", "curator")
    rows = [r for r in audit_rows(big_db, "flag") if r["entity_id"] == order[far]]
    assert [(r["actor"], r["action"]) for r in rows] == [("bea", "flag:dismissed"), ("curator", "flag:confirmed")]


async def test_export_writes_the_whole_view_not_the_page(big_db, tmp_path):
    """w on a queue of 50,000 flags holding a page: the file has every flag of the view, in the queue's order,
    with the state the card shows (a decision still on its way counts)."""
    from tests.tui.test_exports import export

    order = _order(big_db)
    app = BenchloupeApp(big_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app)
        await pilot.press("d")
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="saved")
        await pilot.press("f")  # undecided: every flag but the one dismissed
        assert screen.view_len == N - 1 and len(screen.flags) <= PAGE
        rows = await export(pilot, app, tmp_path / "open.csv")
    assert [int(r["id"]) for r in rows] == order[1:]
    assert {r["state"] for r in rows} == {"open"} and rows[0]["kind"] == "anomaly"


async def test_a_batch_of_marks_on_different_pages_is_one_decision(big_db):
    order = _order(big_db)
    app = BenchloupeApp(big_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open(pilot, app)
        await pilot.press("space")  # flag 0 marked; the card moves on
        while screen._loaded(0):
            await pilot.press("j")
        await pilot.press("space")
        marked = [order[0], order[screen.pos - 1]]
        assert screen.marked == set(marked) and "2 marked" in _status(screen)
        await pilot.press("u")  # both, one transaction, though flag 0 is on no page held
        assert "2 of 50,000 triaged" in _status(screen)
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="batch saved")
        assert list(flag_rows(big_db, "anomaly").loc[marked, "state"]) == ["unsure", "unsure"]
        await pilot.press("z")
        assert "0 of 50,000 triaged" in _status(screen)
        await wait_until(pilot, lambda: not screen.saving and idle(app)(), what="undo saved")
    assert list(flag_rows(big_db, "anomaly").loc[marked, "state"]) == ["open", "open"]
