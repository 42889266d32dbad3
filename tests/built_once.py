"""Session files built once for all pytest-xdist workers (issue 36, point 4): the demo workspace and the
showcase (the demo with its analyses) take seconds to build; every worker building its own copy would pay it
once per worker on a machine where the workers already share the cores."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def built_once(tmp_path_factory, name: str, build) -> Path:
    """``build(path)`` once for the whole test session, and the path. Under pytest-xdist the workers share one
    build: the first to get the lock builds into the session's common temporary folder, the others wait for it
    and reuse the file (a test copies it before writing: the file is a template)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        path = tmp_path_factory.mktemp(name) / f"{name}.db"
        build(path)
        return path
    root = tmp_path_factory.getbasetemp().parent / f"built-once-{name}"  # common to every worker
    root.mkdir(exist_ok=True)
    path, done = root / f"{name}.db", root / "done"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            build(path)
            done.touch()
    return path


def checkpointed(build):
    """*build*, then the WAL folded into the file, so a plain copy of the file is the whole database."""
    def run(path: Path) -> None:
        from benchloupe.store.db import connect

        build(path)
        conn = connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    return run
