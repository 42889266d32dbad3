"""The soundness verdict kept across processes (store/soundness.py, issue 26): ``PRAGMA quick_check`` reads every
page (0.5-3 s per process on a leaderboard-size workspace), so a file exactly as a process last found or left it
sound is not checked again; any change made outside benchloupe (a write into it, a copy in its place) is checked
and a damaged file refused as before. Real separate processes on one real file, each with the cache folder of
the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchloupe.store.db import connect, transaction

ROOT = Path(__file__).resolve().parents[2]
OPEN = ("import sys\n"
        "from benchloupe.store import db\n"
        "try:\n"
        "    conn = db.connect(sys.argv[1])\n"
        "except db.StoreError as exc:\n"
        "    print('refused', exc)\n"
        "    raise SystemExit(1)\n"
        "if len(sys.argv) > 2:\n"
        "    with db.transaction(conn):\n"
        "        conn.execute(\"INSERT INTO benchmarks (name) VALUES (?)\", (sys.argv[2],))\n"
        "conn.close()\n"
        "print('checks', db.QUICK_CHECKS[0])\n")


def _open(db: Path, cache: Path, write: str | None = None) -> tuple[int, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", OPEN, str(db), *([write] if write else [])], capture_output=True,
                       text=True, timeout=120, env=env)
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, r.stdout.strip()


@pytest.fixture
def world(tmp_path):
    db = tmp_path / "w.db"
    conn = connect(db, create=True)
    with transaction(conn):
        for i in range(300):
            conn.execute("INSERT INTO benchmarks (name) VALUES (?)", (f"bench-{i:04d}-" + "x" * 200,))
    conn.close()
    return db, tmp_path / "cache"


def test_an_unchanged_file_is_checked_once_across_processes(world):
    db, cache = world
    assert _open(db, cache) == (0, "checks 1")
    assert _open(db, cache) == (0, "checks 0")
    assert _open(db, cache) == (0, "checks 0")


def test_a_process_that_wrote_leaves_its_own_state_known_sound(world):
    db, cache = world
    assert _open(db, cache, write="new-one") == (0, "checks 1")
    assert _open(db, cache, write="new-two") == (0, "checks 0")
    assert _open(db, cache) == (0, "checks 0")


def test_a_file_damaged_by_another_program_after_the_verdict_is_checked_and_refused(world):
    db, cache = world
    assert _open(db, cache) == (0, "checks 1")
    size = db.stat().st_size
    at = (size // 2 // 4096) * 4096 + 100
    with open(db, "r+b") as fh:  # same size, same inode: only the file's times change
        fh.seek(at)
        chunk = fh.read(4096)
        fh.seek(at)
        fh.write(bytes(b ^ 0x5A for b in chunk))
    st = db.stat()
    os.utime(db, ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))  # even one who puts its old time back
    rc, out = _open(db, cache)
    assert rc == 1 and "damaged" in out, out


def test_a_copy_put_in_its_place_is_checked(world, tmp_path):
    db, cache = world
    assert _open(db, cache) == (0, "checks 1")
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())
    os.replace(copy, db)
    assert _open(db, cache) == (0, "checks 1")


@pytest.mark.parametrize("garbage", [b"", b"\x00\xff not json", b"[1, 2]", json.dumps({"x": "y"}).encode()])
def test_a_garbled_cache_file_is_a_miss(world, garbage):
    db, cache = world
    (cache / "benchloupe").mkdir(parents=True)
    (cache / "benchloupe" / "sound.json").write_bytes(garbage)
    assert _open(db, cache) == (0, "checks 1")
    assert _open(db, cache) == (0, "checks 0")


def test_an_unwritable_cache_folder_changes_nothing_but_the_saving(world, tmp_path):
    db, _ = world
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert _open(db, blocker) == (0, "checks 1")
    assert _open(db, blocker) == (0, "checks 1")
