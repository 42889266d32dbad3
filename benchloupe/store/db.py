"""Opening the item store: WAL journal, foreign keys, migrations on open.

A connection belongs to the thread that made it (sqlite3's default): the TUI's workers open their own with
:func:`connect` rather than sharing the UI thread's.
"""

from __future__ import annotations

import getpass
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .schema import MIGRATIONS, SCHEMA_VERSION


class StoreError(RuntimeError):
    """A database problem a user can act on; the message is one line."""


def default_db_path() -> Path:
    """``$BENCHLOUPE_DB``, else ``$XDG_DATA_HOME/benchloupe/benchloupe.db`` (``~/.local/share/...``)."""
    env = os.environ.get("BENCHLOUPE_DB")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "benchloupe" / "benchloupe.db"


def connect(path: str | os.PathLike, *, create: bool = True, migrate: bool = True) -> sqlite3.Connection:
    """Open (and by default create and migrate) the database at *path*.

    Raises :class:`StoreError` when the file is not a benchloupe database, is newer than this code, or
    cannot be opened.
    """
    p = Path(path)
    if not create and not p.exists():
        raise StoreError(f"{p}: no such database; create it with `benchloupe demo --db {p}` or an import")
    if create:
        p.parent.mkdir(parents=True, exist_ok=True)
    try:
        conn = sqlite3.connect(p, timeout=30.0, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA busy_timeout = 30000")
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        if mode != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{p}: not a usable SQLite database ({exc}); pass another --db path") from exc
    if version > SCHEMA_VERSION:
        conn.close()
        raise StoreError(
            f"{p}: schema version {version} is newer than this benchloupe ({SCHEMA_VERSION}); upgrade benchloupe"
        )
    if migrate and version < SCHEMA_VERSION:
        _migrate(conn, version)
    if migrate:
        _mark_interrupted(conn)
    return conn


def _mark_interrupted(conn: sqlite3.Connection) -> None:
    """Runs and BenchFill sessions whose runner died become ``interrupted`` on open (issue 10 #5)."""
    from . import runners

    try:
        runners.mark_interrupted_runs(conn)
        runners.mark_interrupted_sessions(conn)
    except sqlite3.OperationalError:  # read-only file or folder, locked past the timeout: shown as found
        pass


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    if version == 0:
        tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
        if tables:
            raise StoreError("database has tables but no benchloupe schema version; it is not a benchloupe database")
    for target in range(version, SCHEMA_VERSION):
        with transaction(conn):
            for statement in _split(MIGRATIONS[target]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {target + 1}")


def _split(script: str) -> Iterator[str]:
    """Split a migration script into statements (executescript would commit the open transaction)."""
    buf: list[str] = []
    for line in script.splitlines():
        buf.append(line)
        candidate = "\n".join(buf).strip()
        if candidate.endswith(";") and sqlite3.complete_statement(candidate):
            yield candidate
            buf = []
    rest = "\n".join(buf).strip()
    if rest:
        yield rest


@contextmanager
def transaction(conn: sqlite3.Connection, *, immediate: bool = True) -> Iterator[sqlite3.Connection]:
    """One all-or-nothing transaction: commit on success, roll back on any exception."""
    try:  # BEGIN inside the try: a Ctrl-C / SIGTERM right after it must not leave the transaction open
        conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        yield conn
    except BaseException:
        if conn.in_transaction:  # not after a failed BEGIN, nor after SQLite rolled back itself (SQLITE_FULL)
            conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


def audit(conn: sqlite3.Connection, action: str, entity: str, entity_id: int | None, detail: str = "{}",
          note: str = "") -> None:
    """Append one decision to the audit log (call inside the decision's transaction)."""
    try:
        actor = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in some containers
        actor = ""
    conn.execute(
        "INSERT INTO audit_log (actor, action, entity, entity_id, detail, note) VALUES (?, ?, ?, ?, ?, ?)",
        (actor, action, entity, entity_id, detail, note),
    )


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])
