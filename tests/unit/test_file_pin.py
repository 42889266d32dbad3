"""The store's side of issue 37 #1: a pinned database (the workbench's) that was deleted is never made anew and
one that was replaced is refused, in one line, before anything is read or written; a decision naming a cell is
refused when its flag id now names another cell; a new database carries its own workspace id."""

from __future__ import annotations

import os
import shutil

import pytest

from benchloupe.store import curation
from benchloupe.store import db as store_db
from benchloupe.store.db import FileChanged, connect, pin, unpin
from tests.tui.conftest import add_flags


@pytest.fixture
def pinned(demo_db):
    add_flags(demo_db)
    pin(demo_db)
    yield demo_db
    unpin(demo_db)


def test_a_deleted_pinned_database_is_refused_and_never_made_anew(pinned):
    for suffix in ("", "-wal", "-shm"):
        pinned.with_name(pinned.name + suffix).unlink(missing_ok=True)
    for create in (True, False):
        with pytest.raises(FileChanged, match="deleted while the workbench had it open"):
            connect(pinned, create=create)
    assert not pinned.exists()


def test_a_replaced_pinned_database_is_refused(pinned, tmp_path):
    other = tmp_path / "other.db"
    shutil.copy(pinned, other)
    os.replace(other, pinned)  # another inode
    with pytest.raises(FileChanged, match="was replaced"):
        connect(pinned)


def test_another_workspace_copied_over_in_place_is_refused(pinned, tmp_path):
    conn = connect(pinned)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    other = tmp_path / "other.db"
    shutil.copy(pinned, other)
    conn = connect(other)
    conn.execute("UPDATE settings SET value = '\"another\"' WHERE key = ?", (store_db.WORKSPACE_KEY,))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    shutil.copyfile(other, pinned)  # the same inode, another workspace
    with pytest.raises(FileChanged, match="was replaced"):
        connect(pinned)


def test_a_new_database_has_its_own_workspace_id(tmp_path):
    ids = []
    for name in ("a.db", "b.db"):
        conn = connect(tmp_path / name)
        ids.append(store_db.workspace_id(conn))
        conn.close()
    assert all(ids) and ids[0] != ids[1]


def test_a_decision_naming_another_cell_is_refused(demo_db):
    add_flags(demo_db)
    conn = connect(demo_db)
    try:
        rows = curation.flags(conn, kind="anomaly")
        a, b = rows.iloc[0], rows.iloc[1]
        seen = curation.Cell.of(b)  # the curator saw flag b's cell, the id written is a's
        with pytest.raises(curation.CellChanged, match=f"flag #{int(a['id'])} is not the flag you decided on"):
            curation.set_flag_states(conn, [(int(a["id"]), "dismissed", None)], cells={int(a["id"]): seen})
        assert conn.execute("SELECT count(*) FROM audit_log WHERE entity = 'flag'").fetchone()[0] == 0
        curation.set_flag_states(conn, [(int(a["id"]), "dismissed", None)], cells={int(a["id"]): curation.Cell.of(a)})
    finally:
        conn.close()


@pytest.mark.parametrize("noticed_by", ["the watcher's check", "a connect"])
def test_bytes_copied_over_the_open_file_never_receive_its_wal(pinned, tmp_path, noticed_by):
    """SQLite checkpoints the WAL into the file when the last connection closes: after another workspace was
    copied over the open file (same inode), the app's committed frames would be written into that workspace's
    pages (seen as a flaky TUI test in CI). Once the change is noticed, no close writes into the file."""
    other = tmp_path / "other.db"
    shutil.copy(pinned, other)
    conn = connect(other)
    conn.execute("UPDATE settings SET value = '\"another\"' WHERE key = ?", (store_db.WORKSPACE_KEY,))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    app_conn = connect(pinned)  # the app's connection, with frames in the WAL when the bytes change
    app_conn.execute("CREATE TABLE scratch (x)")
    app_conn.execute("INSERT INTO scratch VALUES (randomblob(20000))")
    assert os.path.getsize(f"{pinned}-wal") > 0
    shutil.copyfile(other, pinned)
    copied = pinned.read_bytes()
    if noticed_by == "a connect":
        with pytest.raises(FileChanged, match="was replaced"):
            connect(pinned)
    else:
        assert "was replaced" in store_db.pinned_problem(pinned, content=True)
    app_conn.close()
    assert pinned.read_bytes() == copied
