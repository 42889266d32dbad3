"""The suite never touches the real user's home (issue 32, point 15).

An earlier suite wrote 200 pytest databases into the user's own ``~/.cache/benchloupe/sound.json`` (the
soundness cache of store/soundness.py), pushing out the user's entries. Three layers keep that from coming back:

1. :func:`isolate` (called from ``pytest_configure``, before collection): ``HOME`` and every ``XDG_*`` base folder
   point at a temporary folder for the whole session, in this process and so in every subprocess, tmux pane and
   xdist worker it starts. Each test then gets its own folders too (the ``_isolated_home`` fixture).
2. An audit hook (PEP 578) refuses, in the test process, any write, rename, removal, ``mkdir`` or SQLite open
   under the real home's benchloupe folders with ``PermissionError`` and records it; the test during which it
   happened fails (:func:`take_violations`), even where the code under test swallows the error.
3. :func:`changed_by_suite` compares the real home's benchloupe folders before and after the session: a file
   added or changed there whose bytes name a temporary folder of this session (its pytest base folder, its
   session home) fails the session. Another process of the user's (a curator's ``benchloupe`` beside the suite)
   or another checkout's suite may change those folders meanwhile; that is only reported, never a failure.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

SESSION_HOME_PREFIX = "benchloupe-tests-home-"
_XDG = {"XDG_DATA_HOME": ".local/share", "XDG_CONFIG_HOME": ".config", "XDG_CACHE_HOME": ".cache",
        "XDG_STATE_HOME": ".local/state"}

_guarded: tuple[str, ...] = ()
_violations: list[str] = []
_session_home: Path | None = None


_REAL = "BENCHLOUPE_TESTS_REAL_HOME"  # the real HOME and XDG_* values, kept for xdist workers and subprocesses


def _real_environ() -> dict[str, str]:
    """HOME and XDG_* as the user had them: saved by the first :func:`isolate` (an xdist worker inherits the
    controller's already replaced HOME, and the saved values with it)."""
    if os.environ.get(_REAL):
        return json.loads(os.environ[_REAL])
    return {k: os.environ[k] for k in ("HOME", *_XDG) if os.environ.get(k)}


def real_benchloupe_dirs() -> list[Path]:
    """The benchloupe folders of the real user: under ``~`` and under any ``XDG_*`` the caller had set."""
    real = _real_environ()
    home = Path(real.get("HOME") or os.path.expanduser("~"))
    dirs = {home / sub / "benchloupe" for sub in _XDG.values()}
    for var in _XDG:
        if real.get(var):
            dirs.add(Path(real[var]) / "benchloupe")
    return sorted(dirs)


def snapshot(dirs: list[Path]) -> dict[str, tuple[int, int]]:
    """Every file under *dirs* with its size and modification time."""
    out: dict[str, tuple[int, int]] = {}
    for d in dirs:
        for root, _sub, files in os.walk(d):
            for f in files:
                p = os.path.join(root, f)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                out[p] = (st.st_size, st.st_mtime_ns)
    return out


def _path(arg) -> str | None:
    if isinstance(arg, int) or arg is None:
        return None
    try:
        return os.path.abspath(os.fsdecode(arg))
    except (TypeError, ValueError):
        return None


def _under_guard(arg) -> str | None:
    p = _path(arg)
    if p is None:
        return None
    for g in _guarded:
        if p == g or p.startswith(g + os.sep):
            return p
    return None


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {"os.mkdir": (0,), "os.remove": (0,), "os.rmdir": (0,), "os.rename": (0, 1),
                "os.truncate": (0,), "os.symlink": (1,), "os.link": (1,), "shutil.copyfile": (1,),
                "sqlite3.connect": (0,), "os.chmod": (0,), "os.utime": (0,)}


def _hook(event: str, args: tuple) -> None:
    if not _guarded:
        return
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                  (mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS)
        hit = _under_guard(path) if writing else None
    elif event in _PATH_EVENTS:
        hit = next((h for i in _PATH_EVENTS[event] if i < len(args) and (h := _under_guard(args[i]))), None)
    else:
        return
    if hit:
        _violations.append(f"{event} {hit}")
        raise PermissionError(f"the test suite may not write into the real home: {event} {hit}")


def isolate() -> Path:
    """Point HOME and the XDG folders at a temporary session home and guard the real ones; return the
    session home. Idempotent."""
    global _guarded, _session_home
    if _session_home is not None:
        return _session_home
    _guarded = tuple(str(d) for d in real_benchloupe_dirs())
    os.environ[_REAL] = json.dumps(_real_environ())
    _session_home = Path(tempfile.mkdtemp(prefix=SESSION_HOME_PREFIX))
    os.environ["HOME"] = str(_session_home)
    for var, sub in _XDG.items():
        os.environ[var] = str(_session_home / sub)
    for var in ("BENCHLOUPE_DB", "BENCHLOUPE_ENDPOINTS"):
        os.environ.pop(var, None)
    sys.addaudithook(_hook)
    # at the interpreter's exit, not at pytest's unconfigure: the soundness cache's exit hook (registered later,
    # so run earlier) still writes into the session home after pytest is done
    atexit.register(_cleanup)
    return _session_home


def _cleanup() -> None:
    if _session_home is not None:
        shutil.rmtree(_session_home, ignore_errors=True)


def guarded() -> tuple[str, ...]:
    return _guarded


def take_violations() -> list[str]:
    """The refused writes recorded since the last call (and forget them)."""
    out = list(_violations)
    del _violations[:]
    return out


def changed_by_suite(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]],
                     own: list[str]) -> tuple[list, list]:
    """(files changed that name one of this session's folders *own*, other files changed) between two
    snapshots. Only this session's folders count: other pytest runs of the same user (another checkout's suite)
    may write there meanwhile and are not this session's doing."""
    marks = [m.rstrip(os.sep).encode() + os.sep.encode() for m in own if m]
    mine, others = [], []
    for p, st in after.items():
        if before.get(p) == st:
            continue
        try:
            data = Path(p).read_bytes()
        except OSError:
            data = b""
        (mine if any(m in data for m in marks) else others).append(p)
    return mine, others


def session_home() -> Path | None:
    return _session_home
