"""Issue 10 #5: a run records its runner; a SIGKILLed run becomes ``interrupted`` on the next open (list, show,
db check), SIGINT/SIGTERM end it ``cancelled``, a failed database write ends it ``failed`` with the real cause.
Real processes, real signals, a real SQLite file."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from benchloupe.store import runners, runs
from benchloupe.store.db import connect
from tests.hostile import default_sigint

FIT = ["fit", "joint", "demo-chem", "--arena", "demo-arena"]
AUDIT = ["audit", "neartie", "demo-chem", "--min-family-models", "6", "--report", "-"]


def _cli(*args, **kw) -> subprocess.Popen:
    kw.setdefault("preexec_fn", default_sigint)  # the SIGINT test's signal reaches it however the tests started
    return subprocess.Popen([sys.executable, "-m", "benchloupe", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _running_ids(db) -> list[int]:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return [r[0] for r in conn.execute("SELECT id FROM runs WHERE status = 'running'")]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def _signal_when_running(db, args, sig, after: float = 0.0) -> tuple[subprocess.Popen, int]:
    before = set(_running_ids(db))
    proc = _cli(*args, "--db", str(db))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        new = set(_running_ids(db)) - before
        if new:
            time.sleep(after)
            os.kill(proc.pid, sig)
            proc.wait(timeout=120)
            return proc, new.pop()
        if proc.poll() is not None:
            pytest.fail(f"the command ended before it could be signalled: {proc.stderr.read()}")
        time.sleep(0.01)
    proc.kill()
    pytest.fail("no running run appeared")


def _raw_status(db, rid) -> tuple[str, str, dict]:
    conn = sqlite3.connect(db)
    status, error, runner = conn.execute("SELECT status, error, runner FROM runs WHERE id = ?", (rid,)).fetchone()
    conn.close()
    return status, error, json.loads(runner)


@pytest.mark.parametrize("args", [FIT, AUDIT], ids=["fit", "audit-neartie"])
def test_sigkilled_run_is_interrupted_on_the_next_open(demo_db, args):
    proc, rid = _signal_when_running(demo_db, args, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    status, _, runner = _raw_status(demo_db, rid)
    assert status == "running" and runner["pid"] == proc.pid and runner["host"] == socket.gethostname()
    check = subprocess.run([sys.executable, "-m", "benchloupe", "db", "check", "--db", str(demo_db), "--json"],
                           capture_output=True, text=True, timeout=120)
    assert json.loads(check.stdout)["runs_by_status"].get("interrupted") == 1, check.stdout
    assert _raw_status(demo_db, rid)[0] == "running"  # db check shows it and writes nothing
    listed = subprocess.run([sys.executable, "-m", "benchloupe", "show", "demo-chem", "--db", str(demo_db), "--json"],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    status, error, _ = _raw_status(demo_db, rid)
    assert status == "interrupted" and f"pid {proc.pid}" in error
    assert '"interrupted"' in listed.stdout
    check = subprocess.run([sys.executable, "-m", "benchloupe", "db", "check", "--db", str(demo_db), "--json"],
                           capture_output=True, text=True, timeout=120)
    assert json.loads(check.stdout)["integrity"] == "ok"
    conn = connect(demo_db)
    assert runs.status_counts(conn).get("interrupted") == 1
    assert not conn.execute("SELECT count(*) FROM run_models WHERE run_id = ?", (rid,)).fetchone()[0]
    conn.close()
    rm = subprocess.run([sys.executable, "-m", "benchloupe", "db", "remove-run", str(rid), "--db", str(demo_db)],
                        capture_output=True, text=True, timeout=120)
    assert rm.returncode == 0 and f"removed run {rid}" in rm.stdout, rm.stderr
    conn = connect(demo_db)
    assert runs.get_run(conn, rid) is None
    done = runs.create_run(conn, "static", None, config={}, seed=None, code_version="", input_fingerprint="")
    runs.save_outputs(conn, done, runs.RunOutputs())  # a finished run is not removed this way
    conn.close()
    rm = subprocess.run([sys.executable, "-m", "benchloupe", "db", "remove-run", str(done), "--db", str(demo_db)],
                        capture_output=True, text=True, timeout=120)
    assert rm.returncode == 1 and "only an interrupted, cancelled or failed run" in rm.stderr


@pytest.mark.parametrize("sig,why", [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")])
def test_sigterm_and_sigint_cancel_the_run(demo_db, sig, why):
    proc, rid = _signal_when_running(demo_db, FIT, sig, after=0.2)  # inside the fit
    err = proc.stderr.read()
    assert "Traceback" not in err and proc.returncode != 0
    status, error, _ = _raw_status(demo_db, rid)
    assert status == "cancelled" and why in error and "KeyboardInterrupt" not in error


@pytest.mark.slow
def test_a_live_run_of_another_process_is_left_running(demo_db):
    """Opening the database while a fit runs does not interrupt it; a run whose host stopped beating does."""
    proc, rid = None, None
    before = set(_running_ids(demo_db))
    proc = _cli(*FIT, "--db", str(demo_db))
    try:
        while not (set(_running_ids(demo_db)) - before) and proc.poll() is None:
            time.sleep(0.01)
        rid = (set(_running_ids(demo_db)) - before).pop()
        conn = connect(demo_db)  # marks nothing: the runner is alive
        assert _raw_status(demo_db, rid)[0] == "running"
        conn.close()
    finally:
        proc.wait(timeout=120)
    assert proc.returncode == 0 and _raw_status(demo_db, rid)[0] == "done"
    conn = connect(demo_db)
    remote = {"pid": 1, "host": "another-host", "pstart": None, "token": "t"}
    fresh = runs.create_run(conn, "static", None, config={}, seed=None, code_version="", input_fingerprint="",
                            runner=remote)
    stale = runs.create_run(conn, "static", None, config={}, seed=None, code_version="", input_fingerprint="",
                            runner=remote)
    conn.execute("UPDATE runs SET heartbeat = ? WHERE id = ?", (time.time() - runners.STALE_AFTER_S - 1, stale))
    assert runs.mark_interrupted(conn) == [stale]
    assert runs.get_run(conn, fresh)["status"] == "running"
    conn.close()


def _fsize_limit(limit: int):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre


@pytest.mark.slow
def test_a_fit_that_cannot_write_its_results_fails_with_the_cause_and_the_database_stays_sound(demo_db):
    """The file-size limit makes every write past it fail like a full disk (EFBIG at the system call)."""
    conn = connect(demo_db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    r = subprocess.run([sys.executable, "-m", "benchloupe", *FIT, "--db", str(demo_db)], capture_output=True,
                       text=True, timeout=300, preexec_fn=_fsize_limit(48 * 1024))
    assert r.returncode == 1, (r.stdout, r.stderr)
    messages = [ln for ln in r.stderr.strip().splitlines() if not ln.startswith("[")]  # not progress lines
    assert "Traceback" not in r.stderr and len(messages) == 1, r.stderr
    assert "cannot rollback" not in r.stderr
    conn = connect(demo_db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    status, error = conn.execute("SELECT status, error FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    assert status in ("failed", "interrupted"), (status, error)
    if status == "failed":
        assert "could not write to the database" in error
    conn.close()
