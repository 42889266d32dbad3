"""What every command shares and nothing else: the user-facing error, exit codes, the database path and connection.

The commands import this module; it imports none of them (so the parser in :mod:`benchloupe.cli.main` and the
commands never import each other in a circle).
"""

from __future__ import annotations

import sys
from pathlib import Path

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class CliError(Exception):
    """An error already phrased for the user (one line: what, where, how to fix)."""


class UsageError(CliError):
    """Wrong usage found by a command rather than by argparse (an unknown import format): one line, exit 2."""


def db_path(args) -> Path:
    """``--db`` if given, else ``$BENCHLOUPE_DB``, else the XDG default. ``--db ''`` is refused: an empty path
    silently meant the default database (issue 24)."""
    from benchloupe.store.db import default_db_path

    given = getattr(args, "db", None)
    if given is not None and not str(given).strip():
        raise CliError("--db is empty: give the database file's path (leave --db out for the default database)")
    return Path(given).expanduser() if given else default_db_path()


def connect_db(args, *, must_exist: bool = True):
    from benchloupe.store.db import connect

    return connect(db_path(args), create=not must_exist)


def stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def stored_table(args, run_id: int, name: str):
    """One table artifact of a stored run as Columns (no pandas), or None."""
    from benchloupe.store import runs

    conn = connect_db(args)
    try:
        return runs.load_table(conn, run_id, name)
    finally:
        conn.close()


def stored_run(args, run_id: int, *artifacts: str) -> tuple:
    """A just-stored run and the named artifacts, read over one short connection: ``(run, artifact, ...)``."""
    from benchloupe.store import runs

    conn = connect_db(args)
    try:
        return (runs.get_run(conn, run_id), *(runs.load_artifact(conn, run_id, a) for a in artifacts))
    finally:
        conn.close()
