"""Live views: the workbench notices other writers (issue 25, "live views"; DESIGN.md "Several processes on one
database").

SQLite's ``PRAGMA data_version`` answers, on one connection, whether any *other* connection committed since it
was last asked: an in-memory read of the WAL index, no lock taken, a few microseconds. :class:`StoreWatcher`
holds such a connection on the UI thread (made there, used only there) and the app asks it :data:`POLL_HZ`
times a second from a timer. When it moved, the screen on view reloads what changed (screens/base.py:
``BenchScreen.live_refresh`` compares the topics' stamps of store/live.py in a worker and fetches only then),
and every other screen reloads when it is next shown. Every write of this app comes from a worker's own
connection, so the watcher sees those too; a stamp that did not move costs one small query in a worker.

The check also compares the database file's identity (device, inode) and the main and WAL files' size and
mtime: a file replaced under the app (a restore, an atomic whole-file write) holds a new inode that the open
connection never sees, and a commit the connection's counter missed still moves the WAL file. A moved
fingerprint reopens the connection and counts as a change (a spurious one, a checkpoint, costs one stamp query).

A database that cannot be read (removed, damaged, locked past the zero timeout) makes the check answer "no
change" and try again at the next tick: it never blocks or fails the UI.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

POLL_HZ = 4


class StoreWatcher:
    """``changed()`` is True when another connection committed since the previous call."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._version: int | None = None
        self._missed = False  # the connection failed: the next good read counts as a change
        self._print: tuple | None = None  # the files' fingerprint at the previous check
        self.checks = 0
        self.last_error: str = ""  # the latest failed open or read, for a status line or a failing test's message
        # The baseline now, on the thread that made the watcher (the app's, before any screen reads): a baseline
        # taken at the first poll would swallow a commit made between a screen's read and that poll.
        self.changed()
        self.checks = 0

    def _fingerprint(self) -> tuple:
        """(dev, inode, size, mtime) of the database file and (size, mtime) of its WAL; () when unreadable."""
        try:
            main = os.stat(self.path)
        except OSError:
            return ()
        try:
            wal = os.stat(f"{self.path}-wal")
            wal_part = (wal.st_size, wal.st_mtime_ns)
        except OSError:
            wal_part = ()
        return (main.st_dev, main.st_ino, main.st_size, main.st_mtime_ns, wal_part)

    def _open(self) -> sqlite3.Connection | None:
        if self._conn is None and self.path.exists():
            try:  # read-only, no waiting: the check must never hold the UI thread
                self._conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=0,
                                             isolation_level=None)
            except sqlite3.Error as exc:
                self._conn = None
                self.last_error = f"open: {exc}"
        return self._conn

    def changed(self) -> bool:
        fingerprint = self._fingerprint()
        replaced = self._print is not None and fingerprint != self._print
        if replaced and self._print[:2] != fingerprint[:2]:
            self.close()  # another file at the path now: read that one
            self._missed = True
        conn = self._open()
        if conn is None:
            return False
        self.checks += 1
        try:
            version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error as exc:
            self.last_error = f"read: {exc}"
            self.close()
            self._missed = True
            return False
        self._print = self._fingerprint()  # after the read: opening the connection may have made the WAL file
        moved = self._missed or replaced or (self._version is not None and version != self._version)
        self._version, self._missed = version, False
        return moved

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
        self._conn = None
        self._version = None

    def __repr__(self) -> str:
        return (f"StoreWatcher({str(self.path)!r}, checks={self.checks}, version={self._version}, "
                f"open={self._conn is not None}, missed={self._missed}, last_error={self.last_error!r})")
