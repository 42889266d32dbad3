"""Opening the item store: WAL journal, foreign keys, migrations on open.

A connection belongs to the thread that made it (sqlite3's default): the TUI's workers open their own with
:func:`connect` rather than sharing the UI thread's.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from benchloupe.hints import Alt, say

from . import soundness
from .atomic import transaction  # also the store's name for it: `from benchloupe.store.db import transaction`
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


BUSY_TIMEOUT_S = 30.0  # how long a connection waits for another writer's lock before "database is locked"
MARKER_TABLES = ("benchmarks", "items", "models", "static_results", "runs")  # what makes a file benchloupe's


def describe_sqlite_error(exc: BaseException, path: str | os.PathLike) -> str:
    """One line for a SQLite failure a user can act on (locked, full, read-only, damaged, unopenable)."""
    msg = str(exc).strip() or type(exc).__name__
    low = msg.lower()
    if "locked" in low or "busy" in low:
        return (f"{path}: the database is locked by another process (a running import, fit or the workbench) "
                f"and stayed locked for {BUSY_TIMEOUT_S:g} s; retry when it has finished")
    if "disk is full" in low or "disk full" in low:
        return f"{path}: the disk is full; nothing was written; free some space and retry"
    if "readonly" in low or "read-only" in low:
        problem = write_problem(path)
        if problem:
            return problem
        return say(f"{path}: the database is read-only (the file or its folder is not writable); fix the "
                   "permissions or ", Alt("pass another --db", "open the workbench on another database file"))
    if "malformed" in low or "not a database" in low or "disk i/o" in low or "corrupt" in low:
        return damaged_error(path, msg).args[0]
    if "unable to open" in low:
        p = Path(path)
        if p.is_file() and not os.access(p, os.R_OK | os.W_OK):  # the file's own permissions, not its folder
            return (f"{path}: cannot open the database: its own permissions keep you out ({_mode_of(p)}); ask "
                    "its owner to give you read and write access (chmod u+rw, or g+rw for a team)")
        return f"{path}: cannot open the database ({msg}); check that its folder exists and is writable"
    return f"{path}: database error ({msg})"


_MAY_CREATE = [True]  # whether a connect in this process may make a new database (cli/main.py: writing commands)


@contextlib.contextmanager
def creation(allowed: bool) -> Iterator[None]:
    """Within it, :func:`connect` makes no new database (and no folder for one) unless *allowed*: a command
    that only reads (``endpoints show``, ``fill --list``, ``review``, an analysis of a benchmark that cannot be
    there) on a mistyped ``--db`` says there is no such database instead of leaving an empty one behind (issue
    37 #14)."""
    before = _MAY_CREATE[0]
    _MAY_CREATE[0] = bool(allowed)
    try:
        yield
    finally:
        _MAY_CREATE[0] = before


def connect(path: str | os.PathLike, *, create: bool = True, migrate: bool = True) -> sqlite3.Connection:
    """Open (and by default create and migrate) the database at *path*.

    Nothing is written before the file is known to be benchloupe's (:func:`_classify`): a new file is created
    whole (schema and :data:`APPLICATION_ID` written under a temporary name, then linked into place, so no other
    process ever sees it half made); an existing file must carry our application id or, from before the id was
    set, our tables; anything else (another application's SQLite file, even one holding only a view, a trigger
    or a foreign ``application_id``/``user_version``, and an empty 0-byte file) is refused untouched. An ordinary
    open (``migrate``) also runs ``PRAGMA quick_check`` once per file and process (:func:`_check_sound`), so that
    no command writes into a file SQLite reports as damaged (issue 24). Raises :class:`StoreError` when the file
    is not a benchloupe database, is newer than this code, is damaged, or cannot be opened.
    """
    p = Path(path)
    if not str(path).strip():
        raise StoreError(say("the database path is empty; ", Alt("pass a file with --db PATH", "open the workbench on a database file")))
    if p.is_dir():
        raise StoreError(say(f"{p}: is a directory; ", Alt("pass a database file with --db", "open the workbench on a database file")))
    create = create and _MAY_CREATE[0]
    pinned = _pin_key(p) in _PINNED
    if pinned:  # the workbench's file: the same one, never made anew (issue 37 #1)
        _check_pinned(p, None)
        create = False
    if not create and not p.exists():
        raise StoreError(say(f"{p}: no such database; create it ", Alt(f"with `benchloupe demo --db {p}` or an import",
                                                                     "with the demo or an import")))
    created = False
    if create:
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(say(f"{p}: cannot create its folder ({exc.strerror or exc}); ", Alt("pass another --db", "open the workbench on another database file"))) from None
        if not p.exists():
            created = _create_new(p)
    if p.exists() and not p.is_file():
        raise StoreError(say(f"{p}: not a regular file (a device, a pipe or a socket); ",
                             Alt("pass a database file with --db", "open the workbench on a database file")))
    if p.exists() and not os.access(p, os.R_OK):
        raise StoreError(say(f"{p}: you cannot read the database file ({_mode_of(p)}): its own permissions "
                             "keep you out, not its folder; ask its owner to give you read access (chmod u+rw, "
                             "or g+rw for a team) or ", Alt("pass another --db",
                                                            "open the workbench on another database file")))
    conn = None
    try:
        if p.stat().st_size == 0:
            raise StoreError(say(f"{p}: an empty file (0 bytes), not a benchloupe database; it was left untouched; "
                                 "delete it or ", Alt("pass another --db", "open the workbench on another database file")))
        readonly = None if created else write_problem(p)
        conn = _open_readonly(p) if readonly else sqlite3.connect(p, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        version, app_id = _classify(conn, p)
        if pinned:
            _check_pinned(p, conn)
        if migrate:
            _check_sound(conn, p)
        if readonly and migrate and version < SCHEMA_VERSION:
            raise StoreError(f"{readonly}; besides, its schema is older than this benchloupe's, and a member "
                             "with write access must open it once to upgrade it")
        if not readonly:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        if migrate and version < SCHEMA_VERSION:
            _migrate(conn, version)
        if migrate and app_id == 0 and not readonly:  # a benchloupe file from before the id was set: mark it ours
            _set_application_id(conn)
    except StoreError:
        if conn is not None:
            conn.close()
        raise
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        if "not a database" in str(exc) or "file is encrypted" in str(exc):
            raise StoreError(say(f"{p}: not a usable SQLite database ({exc}); ", Alt("pass another --db", "open the workbench on another database file"))) from None
        raise StoreError(describe_sqlite_error(exc, p)) from exc
    except OSError as exc:  # the file vanished or cannot be read between the checks and the open
        if conn is not None:
            conn.close()
        raise StoreError(f"{p}: cannot open the database ({exc.strerror or exc})") from None
    if migrate:
        _mark_interrupted(conn)
    share_sidecars(p)
    return conn


# ``PRAGMA application_id`` of every database benchloupe creates (the header's 4 bytes at offset 68): "BLup".
APPLICATION_ID = 0x424C7570


def _foreign(p: Path, what: str) -> StoreError:
    return StoreError(say(f"{p}: not a benchloupe database (another application's SQLite file: {what}); it was left "
                          "untouched; ", Alt("pass another --db", "open the workbench on another database file")))


def _classify(conn: sqlite3.Connection, p: Path) -> tuple[int, int]:
    """(user_version, application_id) of a file that is benchloupe's; :class:`StoreError` for any other.

    Ours: our application id, or (written before the id was set) id 0 with our marker tables. Everything else
    is foreign, whatever it holds: tables, views, indexes or triggers only, another application id, or a
    user_version with none of our tables. Reads only the header and the schema table."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    objects = [(r[0], r[1]) for r in conn.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")]
    tables = {name for kind, name in objects if kind == "table"}
    ours = app_id == APPLICATION_ID or (app_id == 0 and set(MARKER_TABLES) <= tables)
    if app_id not in (0, APPLICATION_ID):
        raise _foreign(p, f"application_id {app_id}")
    if not ours:
        if objects:
            shown = ", ".join(f"{kind} {name}" for kind, name in sorted(objects)[:6])
            raise _foreign(p, shown + (" ..." if len(objects) > 6 else ""))
        if version:
            raise _foreign(p, f"user_version {version}, no tables")
        raise _foreign(p, "no benchloupe schema")  # a SQLite header and nothing else: never ours
    if version > SCHEMA_VERSION:
        raise StoreError(f"{p}: schema version {version} is newer than this benchloupe ({SCHEMA_VERSION}); upgrade benchloupe")
    if version == 0 or not tables:
        raise _foreign(p, f"benchloupe's application id but {'no schema version' if not version else 'no tables'}")
    return version, app_id


def _create_new(p: Path) -> bool:
    """A new database at *p*: the schema and our application id are written to a temporary file in the same
    folder, with the team's permissions (:func:`_share_new`), which is then hard-linked to *p* (atomic, and it
    fails if *p* appeared meanwhile: then that file is opened as it is). So a crash or a second process never
    sees a half-made or empty file (issue 24: an empty file is not benchloupe's). True when this call made it."""
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".new", dir=p.parent)
    except OSError as exc:
        raise StoreError(say(f"{p}: cannot create the database ({exc.strerror or exc}); ",
                             Alt("pass another --db", "open the workbench on another database file"))) from None
    os.close(fd)
    made = False
    try:
        _share_new(Path(tmp), p.parent)
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute("PRAGMA journal_mode = WAL")
            _migrate(conn, 0)
            workspace_id(conn, make=True)  # this workspace's own id (a copy of the file keeps it)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.close()
        try:
            os.link(tmp, p)
            made = True
        except FileExistsError:
            pass  # another process created it first: open theirs
        except OSError:  # no hard links here (some network or FAT file systems): a rename, if still absent
            if not p.exists():
                os.replace(tmp, p)
                made = True
    except sqlite3.Error as exc:
        raise StoreError(describe_sqlite_error(exc, p)) from exc
    except OSError as exc:
        raise StoreError(say(f"{p}: cannot create the database ({exc.strerror or exc}); ",
                             Alt("pass another --db", "open the workbench on another database file"))) from None
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(tmp + suffix).unlink(missing_ok=True)
    return made


def _set_application_id(conn: sqlite3.Connection) -> None:
    try:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    except sqlite3.OperationalError:  # read-only or locked: stays as it was, still recognised by its tables
        pass


_SOUND: set[tuple[int, int]] = set()  # (device, inode) of files this process found sound


def damaged_error(p: str | os.PathLike, detail: str) -> StoreError:
    """The one line for a database SQLite reports as damaged: nothing was written, how to see more, the fix."""
    detail = " ".join(str(detail).replace("*** in database main ***", "").split())[:120]
    return StoreError(say(f"{p}: the database file is damaged ({detail}); nothing was written; ",
                          Alt("`benchloupe db check` shows the details; ", ""),
                          "restore it from a backup or ", Alt("pass another --db", "open the workbench on another database file")))


QUICK_CHECKS = [0]  # how many times this process ran ``PRAGMA quick_check`` (tests/unit/test_soundness.py)


def _check_sound(conn: sqlite3.Connection, p: Path) -> None:
    """``PRAGMA quick_check`` once per file and process, and not at all when the file is exactly as a process of
    this user last found or left it sound (:mod:`benchloupe.store.soundness`; the check reads every page, 0.5-3 s
    on a 250-300 MB workspace of 5,000 x 14,000 results): a damaged file is refused before anything reads or
    writes it further."""
    st = p.stat()
    key = (st.st_dev, st.st_ino)
    if key in _SOUND or soundness.known_sound(p):
        _SOUND.add(key)
        return
    QUICK_CHECKS[0] += 1
    try:
        rows = [r[0] for r in conn.execute("PRAGMA quick_check(1)")]
    except sqlite3.DatabaseError as exc:
        raise damaged_error(p, str(exc)) from None
    if rows != ["ok"]:
        raise damaged_error(p, rows[0] if rows else "quick_check returned nothing")
    _SOUND.add(key)
    soundness.remember(p)


# ------------------------------------------------------------------ a file shared by a Unix group (issue 25 #5)
# A team shares one database in a group-writable folder. A new database file gets 0666 minus the umask, and when
# its folder is group-writable, group read and write too, with the folder's group: whoever creates it, the
# team can write it. SQLite creates the -wal and -shm files next to it (whichever process opens it first after
# the last one closed) with the database file's permission bits but the creator's own group unless the folder is
# setgid; every open hands those files that are ours to the database file's group and mode, so the next
# member can open them. README, "Working as a team": chmod 2775 the folder (setgid) and umask 002.

def _share_new(p: Path, folder_path: Path) -> None:
    """Give the new database file (made under a temporary name by :func:`_create_new`) the permissions above."""
    try:
        folder = folder_path.stat()
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
        if folder.st_mode & 0o020:
            mode |= 0o060
        os.chmod(p, mode)  # mkstemp made it 0600
        if folder.st_mode & 0o020 and os.stat(p).st_gid != folder.st_gid:
            os.chown(p, -1, folder.st_gid)
    except OSError:
        pass  # the file keeps what it was made with


def _open_readonly(p: Path) -> sqlite3.Connection:
    """A database this user may read but not write: opened read-only (``mode=ro``); when SQLite cannot make the
    -shm file it needs for that (nobody else has the database open and the folder is not writable), as an
    immutable file (no locks: what another writer does later shows on the next open)."""
    uri = p.resolve().as_uri()
    for query in ("?mode=ro", "?mode=ro&immutable=1"):
        conn = sqlite3.connect(uri + query, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:
            conn.close()
    return sqlite3.connect(uri + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)


def share_sidecars(p: Path) -> None:
    """Give the -wal and -shm files this process owns the database file's group and permission bits, always
    keeping the owner's read and write: a database made read-only for a while (chmod 444) must not leave its
    -wal and -shm read-only after it is writable again (issue 37 #13)."""
    try:
        st = os.stat(p)
    except OSError:
        return
    for suffix in ("-wal", "-shm"):
        side = Path(f"{p}{suffix}")
        try:
            s = os.stat(side)
            if s.st_uid != os.getuid():
                continue
            if s.st_gid != st.st_gid:
                os.chown(side, -1, st.st_gid)
            mode = (st.st_mode & 0o666) | 0o600
            if (s.st_mode & 0o777) != mode:
                os.chmod(side, mode)
        except OSError:
            continue  # not there, or not ours to change: SQLite's own permissions stand


def _mode_of(p: Path) -> str:
    """``-r--r--r--, owner ann, group team`` of *p* (what a permission line names)."""
    import stat

    try:
        st = p.stat()
    except OSError:
        return "permissions unknown"
    try:
        import grp
        import pwd

        owner = pwd.getpwuid(st.st_uid).pw_name
        group = grp.getgrgid(st.st_gid).gr_name
    except (KeyError, ImportError):
        owner, group = str(st.st_uid), str(st.st_gid)
    return f"{stat.filemode(st.st_mode)}, owner {owner}, group {group}"


def write_problem(path: str | os.PathLike) -> str | None:
    """Why this user cannot write the database at *path* (one line), or None when they can: the file, its
    -wal/-shm files or its folder is not writable for them (a team member without group write access gets a
    read-only workbench that says so)."""
    p = Path(path)
    if not p.exists():
        return None if os.access(p.parent if p.parent.exists() else p.parent.parent, os.W_OK) else (
            f"{p.parent}: the folder is not writable for you, so no database can be made there")
    # SQLite follows a symlink to the real file and keeps -wal and -shm beside it: the real file and its real
    # folder are what must be writable, not the folder of the link (issue 37 #15)
    p = Path(os.path.realpath(p))

    def who(target: Path) -> str:
        try:
            import grp
            import stat

            st = target.stat()
            try:
                group = grp.getgrgid(st.st_gid).gr_name
            except KeyError:
                group = str(st.st_gid)
            return f"{stat.filemode(st.st_mode)}, group {group}"
        except (OSError, ImportError):
            return "permissions unknown"

    fix = "ask its owner to add you to its group with write access (README, \"Working as a team\")"
    if not os.access(p, os.W_OK):
        return f"read-only: you cannot write {p} ({who(p)}); you can look but not decide; {fix}"
    for suffix in ("-wal", "-shm"):
        side = Path(f"{p}{suffix}")
        if side.exists() and not os.access(side, os.W_OK):
            return f"read-only: you cannot write {side} ({who(side)}); you can look but not decide; {fix}"
    if not os.access(p.parent, os.W_OK) and not all(Path(f"{p}{s}").exists() for s in ("-wal", "-shm")):
        return (f"read-only: the folder {p.parent} is not writable for you ({who(p.parent)}) and SQLite keeps "
                f"its -wal and -shm files there; {fix}")
    return None


def _mark_interrupted(conn: sqlite3.Connection) -> None:
    """Runs and BenchFill sessions whose runner died become ``interrupted`` on open (issue 10 #5)."""
    from . import runners

    try:
        runners.mark_interrupted_runs(conn)
        runners.mark_interrupted_sessions(conn)
    except sqlite3.OperationalError:  # read-only file or folder, locked past the timeout: shown as found
        pass


def _migrate(conn: sqlite3.Connection, version: int) -> None:
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


def audit(conn: sqlite3.Connection, action: str, entity: str, entity_id: int | None, detail: str = "{}",
          note: str = "", *, actor: str | None = None) -> int:
    """Append one decision to the audit log (call inside the decision's transaction); its id. The actor is the
    curator's name (store/actor.py: ``--as``, ``$BENCHLOUPE_USER``, the login), not only the Unix user."""
    from .actor import current

    return int(conn.execute(
        "INSERT INTO audit_log (actor, action, entity, entity_id, detail, note) VALUES (?, ?, ?, ?, ?, ?)",
        (actor if actor is not None else current(), action, entity, entity_id, detail, note),
    ).lastrowid)


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


# ------------------------------------------------------------------ the file a workbench has open (issue 37 #1)
# The workbench reads and writes through a new connection per worker. When the file at its path is replaced (a
# restore from backup, another workspace copied or moved over it) or deleted while it is open, those connections
# would open the new file, or create an empty one, and a decision made on a card read from the old file would land
# on whatever flag has that id now. A path the workbench opened is *pinned*: its (device, inode) and the random
# workspace id stored in its settings; every :func:`connect` to a pinned path checks both before anything is read
# or written, never creates the file, and refuses with one line when either differs.
WORKSPACE_KEY = "workspace_id"


class FileChanged(StoreError):
    """The database file a workbench has open was replaced or deleted under it: nothing was read or written."""


_PINNED: dict[str, tuple[int, int, str | None]] = {}  # absolute path -> (device, inode, workspace id)


def _pin_key(path: str | os.PathLike) -> str:
    return os.path.abspath(os.fspath(path))


def workspace_id(conn: sqlite3.Connection, *, make: bool = False) -> str | None:
    """The random id of the workspace (its settings), made now when *make* and there is none (a database from
    before it was kept, or a new one); None when there is none and it cannot be written (a read-only file)."""
    import json
    import uuid

    row = conn.execute("SELECT value FROM settings WHERE key = ?", (WORKSPACE_KEY,)).fetchone()
    if row is None and make:
        try:
            with transaction(conn):
                conn.execute("INSERT OR IGNORE INTO settings (key, value) VALUES (?, ?)",
                             (WORKSPACE_KEY, json.dumps(uuid.uuid4().hex)))
        except sqlite3.Error:
            return None
        row = conn.execute("SELECT value FROM settings WHERE key = ?", (WORKSPACE_KEY,)).fetchone()
    try:
        return str(json.loads(row[0])) if row is not None else None
    except ValueError:
        return str(row[0])


def pin(path: str | os.PathLike) -> None:
    """Pin the database at *path* (it must exist) as the file this process works on (the workbench)."""
    unpin(path)
    conn = connect(path, create=False)
    try:
        conn.execute("PRAGMA busy_timeout = 500")  # another writer's lock: pinned by its inode alone
        st = os.stat(path)
        _PINNED[_pin_key(path)] = (st.st_dev, st.st_ino, workspace_id(conn, make=True))
    finally:
        conn.close()


def unpin(path: str | os.PathLike) -> None:
    _PINNED.pop(_pin_key(path), None)


def file_problem(path: str | os.PathLike) -> str | None:
    """Why the pinned database at *path* is no longer the file that was opened (one line), from the file's
    identity alone (a ``stat``); None when it is, or when *path* is not pinned."""
    pinned = _PINNED.get(_pin_key(path))
    if pinned is None:
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return (f"{path}: the database file was deleted while the workbench had it open; nothing more is read or "
                "written and no new database is made in its place; restore the file, or quit (q) and open another")
    except OSError as exc:
        return f"{path}: the database file cannot be read any more ({exc.strerror or exc}); nothing was written"
    if (st.st_dev, st.st_ino) != pinned[:2]:
        return _replaced(path)
    return None


def _replaced(path) -> str:
    return (f"{path}: the database file was replaced while the workbench had it open (a restore, or another "
            "workspace copied over it); nothing more is read or written, so no decision lands on what you did not "
            "see; quit (q) and open it again to work on what it holds now")


_WAL_GUARDS: dict[str, sqlite3.Connection] = {}


def _hold_wal(path) -> None:
    """Keep this process's WAL frames out of a file that now holds other bytes (a workspace copied over the open
    one keeps its inode). SQLite checkpoints the WAL into the database file when a connection closes and no other
    connection holds the file: it would write the pages this app committed into the workspace copied over it.
    A read-only connection, opened now and held for the rest of the process, keeps every later close from being
    the last one, and cannot checkpoint itself; the WAL stays beside the file as it was (SQLite's to sort out
    when that file is next opened). A path no longer there (deleted, or another inode) needs none: SQLite does
    not checkpoint into a file that has moved."""
    key = _pin_key(path)
    if key in _WAL_GUARDS or not os.path.exists(path):
        return
    try:
        guard = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=0,
                                isolation_level=None, check_same_thread=False)
    except sqlite3.Error:
        return
    try:
        guard.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # takes the shared lock it holds
    except sqlite3.Error:
        pass  # other bytes under our WAL may not read; the lock is taken before the page is
    _WAL_GUARDS[key] = guard


def _check_pinned(p: Path, conn: sqlite3.Connection | None) -> None:
    """:class:`FileChanged` when *p* is pinned and is not the file that was opened (identity, then, with *conn*,
    the workspace id it holds: a file copied over the open one keeps its inode)."""
    pinned = _PINNED.get(_pin_key(p))
    if pinned is None:
        return
    problem = file_problem(p)
    if problem is None and conn is not None and pinned[2] is not None:
        try:
            now = workspace_id(conn)
        except sqlite3.Error:
            now = None
        if now != pinned[2]:
            _hold_wal(p)
            problem = _replaced(p)
    if problem:
        raise FileChanged(problem)


def pinned_problem(path: str | os.PathLike, *, content: bool = False) -> str | None:
    """:func:`file_problem`, and with *content* also whether the file still holds the pinned workspace (a read
    of its settings, read-only and without waiting: for a watcher that saw the file change)."""
    problem = file_problem(path)
    pinned = _PINNED.get(_pin_key(path))
    if problem or not content or pinned is None or pinned[2] is None:
        return problem
    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=0,
                               isolation_level=None)
        try:
            now = workspace_id(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        if "malformed" in str(exc) or "not a database" in str(exc):  # other bytes under the open file's WAL
            _hold_wal(path)
            return _replaced(path)
        return None  # busy now: the next check (or the next connect) decides
    if now == pinned[2]:
        return None
    _hold_wal(path)
    return _replaced(path)
