"""Malformed input through the real CLI: one clear line, exit 1, and the database byte-for-byte unchanged."""

from __future__ import annotations

import gzip
import hashlib
import subprocess
import sys

import pytest

from benchloupe.store.db import connect


def _digest(db) -> str:
    files = [db, db.with_name(db.name + "-wal")]
    return "|".join(hashlib.sha256(f.read_bytes()).hexdigest() if f.exists() else "-" for f in files)


@pytest.fixture
def settled_demo(demo_db):
    conn = connect(demo_db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return demo_db


def _csv(tmp_path, name, text: str | bytes):
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


CASES = {
    "bad header": ("wide", "h.csv", "model,i1,i1\nm1,0,1\n", ["i1"]),
    "non-binary value": ("wide", "nb.csv", "model,i1,i2\nm1,0,2\nm2,1,0\n", ["line 2", "i2"]),
    "NaN": ("wide", "nan.csv", "model,i1,i2\nm1,0,NaN\n", ["NaN"]),
    "duplicate keys": ("long", "dup.csv", "model,item,correct\nm1,q1,1\nm1,q1,0\n", ["duplicate", "line 3"]),
    "unknown model column": ("long", "col.csv", "who,item,correct\nm1,q1,1\n", ["model"]),
    "wrong encoding": ("wide", "enc.csv", "model,i1\nm\xe9,1\n".encode("latin-1"), ["UTF-8"]),
    "empty file": ("wide", "empty.csv", b"", ["empty"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_file_is_one_line_and_changes_nothing(settled_demo, tmp_path, case):
    fmt, name, content, must_mention = CASES[case]
    path = _csv(tmp_path, name, content)
    before = _digest(settled_demo)
    r = subprocess.run([sys.executable, "-m", "benchloupe", "import", fmt, str(path), "--benchmark", "x",
                        "--db", str(settled_demo)], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert str(path) in r.stderr or path.name in r.stderr
    for word in must_mention:
        assert word.lower() in r.stderr.lower(), (word, r.stderr)
    assert _digest(settled_demo) == before


def test_truncated_gzip(settled_demo, tmp_path):
    good = gzip.compress(("model,i1,i2\n" + "m1,0,1\n" * 2000).encode())
    path = _csv(tmp_path, "t.csv.gz", good[: len(good) // 2])
    before = _digest(settled_demo)
    r = subprocess.run([sys.executable, "-m", "benchloupe", "import", "wide", str(path), "--db", str(settled_demo)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "gzip" in r.stderr
    assert _digest(settled_demo) == before


def test_bad_import_into_new_path_creates_no_database(tmp_path):
    path = _csv(tmp_path, "nb.csv", "model,i1\nm1,7\n")
    db = tmp_path / "never.db"
    r = subprocess.run([sys.executable, "-m", "benchloupe", "import", "wide", str(path), "--db", str(db)],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert not db.exists()
