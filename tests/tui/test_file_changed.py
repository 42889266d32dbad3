"""The open database file changes under the workbench (issue 37 #1), generated over every decision kind (c, d, u,
o, a note, a batch of marked flags, an undo, a gap on Coverage, an item retired, a BenchFill proposal rejected) x
every change of the file (another workspace moved over it, copied over it in place, the file deleted): the app notices before any write, says so (a notice and
"file changed: stopped" in the top bar), and writes nothing; the other workspace's file is left exactly as it
was, and a deleted database is never made anew. The same decision kinds where the file stays but the flag id now
names another cell (a rebuilt workspace) are refused naming both cells, with the app's own checks switched off:
the store refuses on its own."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.hostile import dump
from tests.tui.conftest import add_flags, idle, loaded, wait_until
from tests.tui.team import small_session

pytestmark = pytest.mark.anyio
SIZE = (120, 40)
KINDS = ("c", "d", "u", "o", "note", "batch", "undo", "gap", "retire", "proposal")


def _notes(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


def _other_workspace(template: Path, tmp_path: Path) -> Path:
    """Another workspace whose flag ids name other cells: demo-chem's flags were made first."""
    from benchloupe.store.db import connect

    other = tmp_path / "other" / "demo.db"
    other.parent.mkdir()
    shutil.copy(template, other)
    add_flags(other, benchmark="demo-chem")
    add_flags(other)
    conn = connect(other)
    # a workspace of its own (a copy of one file keeps its id: a backup of the same workspace is that workspace)
    conn.execute("UPDATE settings SET value = '\"another-workspace\"' WHERE key = 'workspace_id'")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return other


async def _to_screen(pilot, app, kind: str):
    if kind == "proposal":  # a BenchFill proposal rejected on the review screen
        await pilot.press("8")
        await wait_until(pilot, loaded(app, "benchfill"), what="review queue")
    elif kind == "retire":  # an item retired from its panel
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        await pilot.press("enter")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ItemPanel" and app.screen.detail is not None,
                         what="item panel")
    elif kind == "gap":
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
    else:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
    if kind == "undo":  # a decision saved on the file as it was, taken back after the change
        await pilot.press("d")
        await wait_until(pilot, lambda: not app.screen.saving and idle(app)(), what="saved")


async def _decide(pilot, app, kind: str) -> None:
    if kind in ("c", "d", "u", "o"):
        await pilot.press(kind)
    elif kind == "gap":
        await pilot.press("c")
    elif kind == "note":
        await pilot.press("e")
        await pilot.press(*"typo")
        await pilot.press("enter")
    elif kind == "batch":
        await pilot.press("space", "space", "space", "d")
    elif kind == "undo":
        await pilot.press("z")
    elif kind == "proposal":
        await pilot.press("r")
        await pilot.pause(0.3)
        await pilot.press("enter")
    elif kind == "retire":
        await pilot.press("t")
        await pilot.pause(0.3)
        await pilot.press(*"stale", "enter")
    await pilot.pause(0.3)
    await wait_until(pilot, idle(app), what="writes settled")


def _change(db: Path, other: Path, how: str) -> None:
    if how == "moved over":
        os.replace(other, db)
    elif how == "copied over":
        shutil.copyfile(other, db)  # the same inode, another workspace's bytes
    else:
        db.unlink()
    for suffix in ("-wal", "-shm"):
        if how != "copied over":
            Path(f"{db}{suffix}").unlink(missing_ok=True)


@pytest.mark.parametrize("how", ["moved over", "copied over", "deleted"])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_file_changed_under_the_workbench_is_noticed_before_any_write(demo_db_template, tmp_path, kind,
                                                                               how):
    db = tmp_path / "demo.db"
    shutil.copy(demo_db_template, db)
    add_flags(db)
    if kind == "proposal":
        small_session(db)
    other = _other_workspace(demo_db_template, tmp_path)
    other_dump, other_bytes = dump(other), other.read_bytes()
    app = BenchloupeApp(db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await _to_screen(pilot, app, kind)
        _change(db, other, how)
        await _decide(pilot, app, kind)
        await wait_until(pilot, lambda: app.file_changed is not None, what="the change noticed")
        word = "deleted" if how == "deleted" else "replaced"
        assert any(word in n for n in _notes(app)), _notes(app)
        assert "file changed: stopped" in str(app.screen.query_one("#topbar").render())
        await _decide(pilot, app, kind if kind in ("gap", "retire", "proposal") else "d")  # a later key: still nothing written
    if how == "deleted":
        assert not db.exists() and not db.parent.joinpath("demo.db-wal").exists()
    elif how == "moved over":
        assert dump(db) == other_dump
    else:  # the open file's WAL still lies beside the copied bytes (SQLite's to sort out): the bytes are untouched
        assert db.read_bytes() == other_bytes


@pytest.mark.parametrize("kind", [k for k in KINDS if k not in ("gap", "retire", "proposal")])
async def test_a_decision_on_an_id_that_now_names_another_cell_is_refused(flagged_db, monkeypatch, kind):
    """No watcher, no pin check: the file stays, its flag now names another cell (a rebuild); the store refuses
    the write because the decision names the cell the curator saw."""
    from benchloupe.store.db import connect

    monkeypatch.setattr(BenchloupeApp, "_watch", lambda self: None)
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await _to_screen(pilot, app, kind)
        screen = app.screen
        ids = [int(screen.flags["id"].iloc[screen.view[i]]) for i in range(3)]
        conn = connect(flagged_db)
        try:  # every flag on screen now names another item (as a rebuilt workspace would)
            conn.execute("UPDATE flags SET item_id = (SELECT max(id) FROM items WHERE benchmark_id ="
                         " flags.benchmark_id) WHERE id IN (?, ?, ?)", ids)
        finally:
            conn.close()
        before = dump(flagged_db)
        await _decide(pilot, app, kind)
        assert any("is not the flag you decided on" in n for n in _notes(app)), _notes(app)
    assert dump(flagged_db) == before


async def test_sqlites_read_only_refusal_is_shown_as_its_cause(flagged_db):
    """A write SQLite refuses because the file became read-only under the app (chmod 444: the workbench opened it
    writable) is shown as the read-only line, never as "attempt to write a readonly database"."""
    import sqlite3

    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        app.report_error(sqlite3.OperationalError("attempt to write a readonly database"), "anomalies")
        await wait_until(pilot, lambda: bool(_notes(app)), what="the notice")
        shown = _notes(app)[-1]
        assert "attempt to write" not in shown and "read-only" in shown, shown
