"""All-or-nothing writes, below everything else in the store: a transaction (the sqlite-utils ``db.atomic()``
habit) and a file replaced whole (:func:`replace_file`: the report's files, the soundness cache).

:mod:`benchloupe.store.db` re-exports :func:`transaction`; it lives here so that :mod:`benchloupe.store.runners`,
which :mod:`benchloupe.store.db` calls on open to mark interrupted runs, can use it without importing db back
(issue 27).
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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


def replace_file(path: Path, data: bytes, *, prefix: str, suffix: str = "", shared: bool = False) -> None:
    """*path* holds *data* or what it held before, never a part: *data* goes to a temporary file (*prefix*,
    *suffix*) in the same folder, renamed over *path*; on any failure the temporary file is removed and the error
    raised. ``shared``: the file gets the permissions a new file gets under the umask (the temporary file's are
    0600)."""
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=path.parent if str(path.parent) else ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if shared:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
