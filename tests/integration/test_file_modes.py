"""Permissions that change on the open database (issue 37 #13), generated over chmod 000 / 444 x every decision
kind of the command line (a triage, a note, an undo, an alias) and a read: the one line names the real cause
(the file's own permissions, or the read-only line; never "check that its folder exists" or SQLite's "attempt
to write a readonly database"), the database is unchanged, and after chmod 664 the -wal and -shm files are
writable again (they were given the 444 mode and stayed read-only). Run as an ordinary user: as root, a forked
child that drops to another uid (root ignores permissions)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import tempfile
from pathlib import Path

import pytest

from tests.hostile import dump

USER = 42001


def _as_user(fn) -> tuple[int, str]:
    if os.geteuid() != 0:
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            code = fn()
        return code, buf.getvalue()
    from tests.integration.test_team_permissions import as_user

    return as_user(USER, USER, [], fn)


@pytest.fixture
def user_db(demo_db_template):
    """The demo with flags in a folder the ordinary user owns (pytest's temporary folders are root's only)."""
    from tests.tui.conftest import add_flags

    base = Path(tempfile.mkdtemp(prefix="benchloupe-modes-"))
    base.chmod(0o755)
    folder = base / "work"
    folder.mkdir()
    db = folder / "demo.db"
    shutil.copy(demo_db_template, db)
    add_flags(db)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    import benchloupe.cli.main as climain

    climain.main(["--db", str(db), "flags", "demo-math"])  # every module the commands use, loaded before a fork
    climain.main(["--db", str(db), "alias", "nope", "x"])
    if os.geteuid() == 0:
        for p in (folder, db):
            os.chown(p, USER, USER)
    yield db
    shutil.rmtree(base, ignore_errors=True)


COMMANDS = {
    "read": ["flags", "demo-math"],
    "triage": ["flags", "--set", "1", "dismissed"],
    "note": ["flags", "--set", "1", "open", "--note", "typo"],
    "undo": ["flags", "--undo"],
    "alias": ["alias", "polaris/Qwen2.5-27B-Instruct", "other-name"],
}


def _cli(db, argv):
    import benchloupe.cli.main as climain

    return _as_user(lambda: climain.main(["--db", str(db), *argv]))


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("mode", [0o000, 0o444])
def test_a_changed_mode_gives_the_real_cause_and_the_sidecars_stay_writable(user_db, mode, command):
    argv = COMMANDS[command]
    if command == "undo":
        assert _cli(user_db, ["flags", "--set", "2", "unsure"])[0] == 0
    before = dump(user_db)
    os.chmod(user_db, mode)
    code, out = _cli(user_db, argv)
    lines = [line for line in out.splitlines() if line.startswith("benchloupe: error:")]
    assert "Traceback" not in out and "attempt to write" not in out and "folder exists" not in out, out
    if mode == 0o000:
        assert code == 1 and len(lines) == 1 and "its own permissions keep you out" in lines[0], out
    elif command == "read":
        assert code == 0, out
    else:
        assert code == 1 and len(lines) == 1 and "read-only: you cannot write" in lines[0], out
    os.chmod(user_db, 0o664)
    assert dump(user_db) == before
    for suffix in ("-wal", "-shm"):
        side = Path(f"{user_db}{suffix}")
        if side.exists():
            assert stat.S_IMODE(side.stat().st_mode) & 0o600 == 0o600, (suffix, oct(side.stat().st_mode))
    code, out = _cli(user_db, ["flags", "--set", "3", "confirmed"])  # writable again: a decision goes through
    assert code == 0, out


def test_share_sidecars_never_makes_them_read_only(tmp_path):
    from benchloupe.store.db import connect, share_sidecars

    db = tmp_path / "x.db"
    conn = connect(db)  # keeps -wal and -shm open
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
        os.chmod(db, 0o444)
        share_sidecars(db)
        for suffix in ("-wal", "-shm"):
            side = Path(f"{db}{suffix}")
            assert stat.S_IMODE(side.stat().st_mode) == 0o644, suffix
    finally:
        os.chmod(db, 0o644)
        conn.close()
