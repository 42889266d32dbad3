"""One all-or-nothing write (the sqlite-utils ``db.atomic()`` habit), below everything else in the store.

:mod:`benchloupe.store.db` re-exports :func:`transaction`; it lives here so that :mod:`benchloupe.store.runners`,
which :mod:`benchloupe.store.db` calls on open to mark interrupted runs, can use it without importing db back
(issue 27).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def transaction(conn: sqlite3.Connection, *, immediate: bool = True) -> Iterator[sqlite3.Connection]:
    """One all-or-nothing transaction: commit on success, roll back on any exception."""
    try:  # BEGIN inside the try: a Ctrl-C / SIGTERM right after it must not leave the transaction open
        conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        yield conn
    except BaseException:
        # SQLite may already have rolled back (a full disk, an I/O error); a second ROLLBACK would then raise
        # "cannot rollback - no transaction is active" and hide the real cause.
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        raise
    else:
        conn.execute("COMMIT")
