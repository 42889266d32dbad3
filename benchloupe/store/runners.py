"""Who runs a run or a BenchFill session, and whether that runner is still there (issue 10 #3, #5).

A runner is recorded as JSON ``{"pid", "host", "pstart", "token"}`` beside a ``heartbeat`` (unix seconds) that
the running process renews every :data:`HEARTBEAT_S`. A runner is *gone* when

- it ran on this host and its process no longer exists, or a process with that pid started at another time
  (pid reuse; ``pstart`` is the start time from ``/proc/PID/stat``), or
- it ran on another host (a database on a shared disk) and its heartbeat is older than :data:`STALE_AFTER_S`.

A runner row written before runners were recorded (``{}``) is gone: no live process of this code leaves it.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable

from benchloupe.hints import Alt, say

from .atomic import transaction

HEARTBEAT_S = 5.0
STALE_AFTER_S = 60.0


def _process_start(pid: int) -> str | None:
    """The start time of process *pid* in clock ticks since boot (Linux), or None where /proc is absent."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22; the command name in (...) may hold spaces


def this_runner() -> dict:
    """This process as a runner, with a fresh token (one per run or lease)."""
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "pstart": _process_start(pid), "token": uuid.uuid4().hex}


def parse(runner: str | dict | None) -> dict:
    if isinstance(runner, dict):
        return runner
    try:
        value = json.loads(runner or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, belongs to someone else
        return True
    except OSError:
        return False
    return True


def alive(runner: str | dict | None, heartbeat: float | None, now: float | None = None) -> bool:
    """Whether the recorded runner may still be working (see the module docstring)."""
    r = parse(runner)
    pid = r.get("pid")
    if not isinstance(pid, int) or not r.get("host"):
        return False
    if r["host"] == socket.gethostname():
        if not _pid_alive(pid):
            return False
        started = _process_start(pid)
        return started is None or r.get("pstart") is None or started == r["pstart"]
    now = time.time() if now is None else now
    return heartbeat is not None and heartbeat_age(heartbeat, now) < STALE_AFTER_S


def heartbeat_age(heartbeat: float, now: float) -> float:
    """Seconds between a heartbeat and now, either way: a heartbeat in the future (another host's clock ahead)
    ages as the same distance in the past, so its lease expires like any other instead of never (issue 37 #15)."""
    return abs(now - float(heartbeat))


def describe(runner: str | dict | None) -> str:
    r = parse(runner)
    return f"pid {r['pid']} on {r.get('host', '?')}" if isinstance(r.get("pid"), int) else "an earlier version"


class Heartbeat:
    """A daemon thread that renews a heartbeat every :data:`HEARTBEAT_S` on its own connection.

    ``beat(conn, now)`` does the write; it returns False to stop (the lease or run is no longer ours).
    """

    def __init__(self, open_conn: Callable[[], sqlite3.Connection], beat: Callable[[sqlite3.Connection, float], bool],
                 interval: float = HEARTBEAT_S):
        self._open, self._beat, self._interval = open_conn, beat, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="benchloupe-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _loop(self) -> None:
        conn = None
        try:
            while not self._stop.wait(self._interval):
                if conn is None:
                    conn = self._open()
                try:
                    if not self._beat(conn, time.time()):
                        return
                except sqlite3.Error:  # busy past the timeout, disk full: try again next beat
                    continue
        except Exception:  # noqa: BLE001 - a heartbeat must never take its process down
            return
        finally:
            if conn is not None:
                conn.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._interval + 35.0)


# ------------------------------------------------------------------------------------------- on open
# Called by :func:`benchloupe.store.db.connect` on every open: cheap (one small read per table when nothing
# runs) and free of pandas, so that opening a database stays light.

def mark_interrupted_runs(conn: sqlite3.Connection) -> list[int]:
    """Turn every ``running`` run whose runner is gone into ``interrupted``; returns their ids."""
    rows = conn.execute("SELECT id, runner, heartbeat FROM runs WHERE status = 'running'").fetchall()
    gone = [(int(r[0]), r[1]) for r in rows if not alive(r[1], r[2])]
    if gone:
        with transaction(conn):
            for rid, runner in gone:
                conn.execute(
                    "UPDATE runs SET status = 'interrupted', error = ?, finished_at = strftime('%Y-%m-%dT%H:%M:%SZ',"
                    " 'now') WHERE id = ? AND status = 'running'",
                    (say(f"interrupted: its runner ({describe(runner)}) ended without finishing; run it again, or "
                         "remove it ", Alt(f"with `benchloupe db remove-run {rid}`", "from the command line")), rid))
    return [rid for rid, _ in gone]


def mark_interrupted_sessions(conn: sqlite3.Connection) -> list[int]:
    """BenchFill sessions left ``running`` by a runner that is gone become ``interrupted`` (resumable)."""
    rows = conn.execute("SELECT id, runner, heartbeat FROM fill_sessions WHERE state = 'running'").fetchall()
    gone = [(int(r[0]), r[1]) for r in rows if not alive(r[1], r[2])]
    if gone:
        with transaction(conn):
            for sid, runner in gone:
                conn.execute(
                    "UPDATE fill_sessions SET state = 'interrupted', message = ?, updated_at ="
                    " strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE id = ? AND state = 'running'",
                    (say(f"interrupted: its runner ({describe(runner)}) ended without finishing; ",
                         Alt(f"`benchloupe fill --resume {sid}`", "R on the BenchFill screen (8)"), " continues it"), sid))
    return [sid for sid, _ in gone]
