"""Hostile database files (issue 24, defects 3 and 4): every foreign-SQLite kind under every command, and damaged
databases under every writing command.

Foreign: a file that is not benchloupe's is refused, whatever it holds (a view only, a table with an index or a
trigger, another application id, a user_version with no tables, an empty 0-byte file, a bare SQLite header,
our table names under another application's id) and is left byte for byte as it was, with no -wal or -shm
beside it. Ours: new databases carry our application id; one made before the id existed is recognised by its
tables and gets the id.

Damaged: 4,096 bytes flipped inside a demo-sized database (SQLite's quick_check reports it) is refused by
every command that writes, and by the readers, with one line that names the damage and the ``db check``
advice, never SQL text (``show`` printed a 900-character statement), and the file keeps its bytes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchloupe.store.db import APPLICATION_ID, connect
from tests.hostile import check_outcome, run_cli, run_process


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


def _make_foreign(path: Path, kind: str) -> None:
    if kind == "empty-file":
        path.write_bytes(b"")
        return
    conn = sqlite3.connect(path)
    statements = {
        "view-only": ["CREATE VIEW v AS SELECT 1 AS x"],
        "table-index": ["CREATE TABLE t (x)", "CREATE INDEX i ON t (x)"],
        "table-trigger": ["CREATE TABLE t (x)", "CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; END"],
        "application-id": ["PRAGMA application_id = 1234"],
        "user-version": ["PRAGMA user_version = 7"],
        "user-version-ours": ["PRAGMA user_version = 1"],
        "header-only": ["PRAGMA page_size = 4096", "VACUUM"],
        "our-tables-their-id": ["PRAGMA application_id = 99", "CREATE TABLE benchmarks (id)", "CREATE TABLE items (id)",
                                "CREATE TABLE models (id)", "CREATE TABLE static_results (id)",
                                "CREATE TABLE runs (id)"],
        "wal-foreign": ["PRAGMA journal_mode = WAL", "CREATE TABLE notes (body)", "INSERT INTO notes VALUES ('mine')"],
        "virtual-fts": ["CREATE VIRTUAL TABLE f USING fts5(body)"],
    }[kind]
    for s in statements:
        conn.execute(s)
    conn.commit()
    conn.close()


FOREIGN = ["view-only", "table-index", "table-trigger", "application-id", "user-version", "user-version-ours",
           "empty-file", "header-only", "our-tables-their-id", "wal-foreign", "virtual-fts"]
# every command family, with arguments that would write if the file were ours
COMMANDS = {
    "list": ["list"], "show": ["show", "b"], "open": ["open"], "db-check": ["db", "check"],
    "db-remove-run": ["db", "remove-run", "1"], "import": ["import", "wide", "{csv}", "-b", "b"],
    "demo": ["demo", "--bare"], "export": ["export", "items", "b"], "alias": ["alias", "m1", "x1"],
    "flags": ["flags"], "flags-set": ["flags", "--set", "1", "open"], "search": ["search", "fox"],
    "fit": ["fit", "static", "b"], "coverage": ["coverage", "b"], "anomalies": ["anomalies", "b"],
    "audit": ["audit", "neartie", "b"], "endpoints-set": ["endpoints", "set", "judge", "--model", "j"],
    "endpoints-show": ["endpoints", "show"], "fill": ["fill", "b"], "fill-list": ["fill", "--list"],
    "review": ["review"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind", FOREIGN)
def test_foreign_file_is_refused_untouched(kind, command, tmp_path):
    db = tmp_path / "other.db"
    _make_foreign(db, kind)
    csv = tmp_path / "s.csv"
    csv.write_text("model,q1\nm1,1\n")
    before = _sha(db)
    argv = [a.replace("{csv}", str(csv)) for a in COMMANDS[command]]
    rc, out, err = run_cli(["--db", db, *argv])
    check_outcome((kind, command), rc, out, err)
    assert rc == 1 and ("not a benchloupe database" in err or "empty file" in err), (kind, command, err)
    assert _sha(db) == before, (kind, command)
    assert not Path(f"{db}-wal").exists() or kind == "wal-foreign", (kind, command)
    assert not Path(f"{db}-shm").exists() or kind == "wal-foreign", (kind, command)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary files left


def test_the_issues_instances(tmp_path):
    """A file holding only a view, or only ``PRAGMA application_id=1234``, was opened as an empty benchloupe
    database and modified by ``list``."""
    for kind in ("view-only", "application-id"):
        db = tmp_path / f"{kind}.db"
        _make_foreign(db, kind)
        before = _sha(db)
        rc, _, err = run_cli(["--db", db, "list"])
        assert rc == 1 and "not a benchloupe database" in err and _sha(db) == before, (kind, err)


def test_new_databases_carry_our_application_id(tmp_path):
    work = tmp_path / "work"  # tmp_path also holds the test's temporary home and XDG folders (tests/conftest.py)
    work.mkdir()
    db = work / "new.db"
    csv = work / "s.csv"
    csv.write_text("model,q1\nm1,1\n")
    rc, _, err = run_cli(["--db", db, "import", "wide", csv, "-b", "b"])
    assert rc == 0, err
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID == 0x424C7570
    conn.close()
    assert sorted(p.name for p in work.iterdir()) == ["new.db", "new.db-shm", "new.db-wal", "s.csv"] or \
        sorted(p.name for p in work.iterdir()) == ["new.db", "s.csv"]


def test_a_database_from_before_the_id_is_ours_and_gets_it(tmp_path):
    db = tmp_path / "old.db"
    connect(db).close()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA application_id = 0")  # as every database was before issue 24
    conn.commit()
    conn.close()
    rc, _, err = run_cli(["--db", db, "list"])
    assert rc == 0, err
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    conn.close()


def test_two_processes_creating_one_database_both_succeed(tmp_path):
    """A new file is made under a temporary name and linked into place: the second process opens the first's
    file (it never sees an empty or half-made one, which would now be refused)."""
    import subprocess
    import sys

    db = tmp_path / "race.db"
    csv = tmp_path / "s.csv"
    csv.write_text("model,q1\nm1,1\n")
    procs = [subprocess.Popen([sys.executable, "-m", "benchloupe", "--db", str(db), "import", "wide", str(csv), "-b",
                               f"b{i}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    assert all(rc == 0 for rc, _ in results), results
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# ---------------------------------------------------------------------------------------------- damaged files

@pytest.fixture(scope="module")
def damaged_dbs(showcase_template, tmp_path_factory) -> dict[str, Path]:
    """A demo-sized database (3 benchmarks, runs: the session's showcase, tests/conftest.py) with 4,096 bytes
    flipped at three places SQLite checks."""
    root = tmp_path_factory.mktemp("damaged")
    good = root / "good.db"
    shutil.copy(showcase_template, good)  # its WAL folded in: the file is the whole database
    out = {}
    size = good.stat().st_size
    for label, frac in (("middle", 0.5), ("quarter", 0.25), ("three-quarters", 0.75)):
        bad = root / f"{label}.db"
        shutil.copy(good, bad)
        at = (int(size * frac) // 4096) * 4096 + 100
        with open(bad, "r+b") as fh:
            fh.seek(at)
            chunk = fh.read(4096)
            fh.seek(at)
            fh.write(bytes(b ^ 0x5A for b in chunk))
        check = sqlite3.connect(bad)
        try:
            ok = check.execute("PRAGMA quick_check(1)").fetchone()[0] == "ok"
        except sqlite3.DatabaseError:
            ok = False
        finally:
            check.close()
        assert not ok, f"{label}: the flip did not damage what quick_check reads"
        out[label] = bad
    out["good"] = good
    return out


WRITERS = {  # every command that writes to the database (and would have written into the damaged file)
    "import": ["import", "long", "{csv}", "-b", "demo-math"], "fit-static": ["fit", "static", "demo-math"],
    "fit-joint": ["fit", "joint", "demo-math", "--arena", "demo-arena"], "evaluate": ["evaluate", "demo-arena"],
    "compress": ["compress", "demo-math", "--recovery", "no"], "anomalies": ["anomalies", "demo-math"],
    "bootstrap": ["bootstrap", "demo-math", "--B", "2"], "contamination": ["contamination", "demo-math"],
    "audit": ["audit", "neartie", "demo-chem"], "coverage": ["coverage", "demo-math"],
    "calibrate": ["calibrate", "demo-math"], "alias": ["alias", "m1", "x1"],
    "flags-set": ["flags", "--set", "1", "confirmed"], "endpoints-set": ["endpoints", "set", "judge", "--model", "j"],
    "fill": ["fill", "demo-math"], "demo-force": ["demo", "--force", "--bare"], "db-remove-run": ["db", "remove-run", "1"],
    "screen": ["screen", "demo-math", "--model", "x"], "estimate": ["estimate", "demo-math"],
}
READERS = {"list": ["list"], "show": ["show", "demo-math"], "export": ["export", "items", "demo-math"],
           "flags": ["flags"], "search": ["search", "item"], "fill-list": ["fill", "--list"],
           "endpoints-show": ["endpoints", "show"], "review": ["review"]}


@pytest.mark.parametrize("command", sorted(WRITERS) + sorted(READERS))
@pytest.mark.parametrize("where", ["middle", "quarter", "three-quarters"])
def test_damaged_database_is_refused_with_the_db_check_advice(where, command, damaged_dbs, tmp_path):
    db = tmp_path / "bad.db"
    shutil.copy(damaged_dbs[where], db)
    csv = tmp_path / "add.csv"
    csv.write_text("model,item,correct\nnew-model,q-new,1\n")
    before = _sha(db)
    argv = [a.replace("{csv}", str(csv)) for a in {**WRITERS, **READERS}[command]]
    rc, out, err = run_cli(["--db", db, *argv])
    check_outcome((where, command), rc, out, err)
    assert rc == 1 and "damaged" in err and "db check" in err, (where, command, err)
    assert len(err) < 400, (where, command, err)
    assert _sha(db) == before, (where, command)


def test_db_check_on_a_damaged_file_says_so_on_stderr(damaged_dbs, tmp_path):
    db = tmp_path / "bad.db"
    shutil.copy(damaged_dbs["middle"], db)
    r = run_process(["--db", db, "db", "check"])
    assert r.returncode == 1 and "ok                       False" in r.stdout
    assert r.stderr.count("\n") == 1 and "damaged" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_show_never_prints_sql_text(damaged_dbs, tmp_path):
    """``show`` printed pandas' "Execution failed on sql '...'" with the whole statement."""
    db = tmp_path / "bad.db"
    shutil.copy(damaged_dbs["middle"], db)
    rc, _, err = run_cli(["--db", db, "show", "demo-math"])
    assert rc == 1 and "SELECT" not in err and "Execution failed" not in err and len(err) < 400, err


def test_a_sound_copy_still_works(damaged_dbs, tmp_path):
    """The check costs one quick_check per file and process; a sound file passes it (the control)."""
    db = tmp_path / "good.db"
    shutil.copy(damaged_dbs["good"], db)
    rc, out, err = run_cli(["--db", db, "list"])
    assert rc == 0 and "demo-math" in out, err


def _small_db(path: Path) -> None:
    from benchloupe.store.importers.base import ParsedImport
    from benchloupe.store.writer import write_import

    conn = connect(path)
    y = (np.random.default_rng(0).random((4, 6)) < 0.5).astype(np.int8)
    write_import(conn, ParsedImport("b", "static", pd.DataFrame({"key": [f"q{j}" for j in range(6)]}),
                                    pd.DataFrame({"name": [f"m{i}" for i in range(4)]}), correct=y), fmt="t")
    conn.close()


def test_empty_and_odd_db_paths(tmp_path):
    """``--db ''`` (was: the default database), a folder, a device, a FIFO: one line each, nothing created."""
    fifo = tmp_path / "pipe.db"
    os.mkfifo(fifo)
    for path, words in (("", "--db is empty"), (str(tmp_path), "is a directory"), ("/dev/null", "not a regular file"),
                        (str(fifo), "not a regular file")):
        rc, out, err = run_cli(["--db", path, "list"])
        check_outcome(path, rc, out, err)
        assert rc == 1 and words in err, (path, err)
    assert not (tmp_path / "xdg").exists()  # the default database was not created
    db = tmp_path / "ok.db"
    _small_db(db)
    rc, _, err = run_cli(["--db", db, "list"])
    assert rc == 0, err
