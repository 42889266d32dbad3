"""tui/live.py's StoreWatcher: every commit by another connection, and a database file replaced under the app
(a restore, an atomic whole-file write), is noticed at the next check. CI once timed out waiting for another
process's decision with the app's data version still 0; the watcher now also compares the files' identity and
size/mtime, so a change the connection cannot see still counts."""

from __future__ import annotations

import os
import sqlite3

from benchloupe.tui.live import StoreWatcher


def _db(path, value: int) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (v INTEGER)")
    conn.execute("INSERT INTO t VALUES (?)", (value,))
    conn.close()


def test_a_commit_by_another_connection_is_noticed_once(tmp_path):
    path = tmp_path / "w.db"
    _db(path, 1)
    watcher = StoreWatcher(path)
    try:
        assert watcher.changed() is False  # the baseline
        assert watcher.changed() is False
        _db(path, 2)
        assert watcher.changed() is True
        assert watcher.changed() is False
    finally:
        watcher.close()


def test_a_database_file_replaced_under_the_watcher_is_noticed(tmp_path):
    path = tmp_path / "w.db"
    _db(path, 1)
    watcher = StoreWatcher(path)
    try:
        assert watcher.changed() is False
        other = tmp_path / "new.db"
        _db(other, 7)
        os.replace(other, path)  # the old connection holds the old inode: its data_version never moves
        assert watcher.changed() is True
        assert watcher.changed() is False
        _db(path, 8)  # and commits to the new file are seen from then on
        assert watcher.changed() is True
    finally:
        watcher.close()


def test_a_commit_before_the_first_check_is_noticed_at_it(tmp_path):
    """The baseline is taken when the watcher is made (the app makes it before any screen reads), not at its first
    poll: a screen that loaded before the first 0.25 s tick, then another process's decision, then the first tick
    used to take the decided state as the baseline and never report it (CI: test_team's open card timed out, when
    an earlier test's job had warmed the forkserver and the screen loaded fast)."""
    path = tmp_path / "w.db"
    _db(path, 1)
    watcher = StoreWatcher(path)
    try:
        _db(path, 2)  # before any check
        assert watcher.changed() is True
        assert watcher.changed() is False
    finally:
        watcher.close()
