"""Which database files were found sound, remembered across processes (issue 26: every command's whole process).

``PRAGMA quick_check`` reads every page: about 0.5-3 s per process on a 250-300 MB workspace of 5,000 x 14,000
results with its runs, paid by every command and by the workbench's first paint. A file is checked again only when
it is not exactly as a process of this user last saw it sound: the verdict is kept under the file's identity and
state (device, inode, size, modification and change times of the file and of its ``-wal``), in a small JSON file
in the user's cache folder. A process that found a file sound records, when it ends, the state its own writes left
(they went through SQLite). Any other change (another program writing into it, a copy, a restore, a file put in
its place) changes the change time and so the key, and the next open checks it again. What a cached verdict does
not see is what no check between two opens would see either: the disk changing bits under an unchanged file.

Errors here never stop a command: an unreadable, unwritable or garbled cache file is a cache miss.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path

from .atomic import replace_file

_MAX_ENTRIES = 200
_seen: dict[str, tuple] = {}  # real path -> key, for the files this process found sound
_registered = False


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "benchloupe" / "sound.json"


def state(p: Path) -> tuple | None:
    """The key of *p* as it is now (None if it cannot be read)."""
    try:
        st = p.stat()
        key = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        try:
            w = os.stat(str(p) + "-wal")
        except FileNotFoundError:
            w = None
        if w is not None and w.st_size > 0:  # an empty -wal (made by the open itself) holds nothing to check
            key += [w.st_size, w.st_mtime_ns, w.st_ctime_ns]
        else:
            key += [None, None, None]
        return tuple(key)
    except OSError:
        return None


def _load() -> dict:
    try:
        data = json.loads(_cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def known_sound(p: Path) -> bool:
    """Whether *p*, as it is now, is the state a process last found (or left) sound."""
    key = state(p)
    if key is None:
        return False
    real = os.path.realpath(p)
    if _seen.get(real) == key:
        return True
    entry = _load().get(real)
    if isinstance(entry, list) and tuple(entry) == key:
        _track(real, key)  # already on record: nothing to write until this process's own writes change it
        return True
    return False


def remember(p: Path) -> None:
    """*p* was found sound now: record it, and record again at exit the state this process's writes leave."""
    key = state(p)
    if key is None:
        return
    real = os.path.realpath(p)
    _save({real: key})
    _track(real, key)


def _track(real: str, key: tuple) -> None:
    global _registered
    _seen[real] = key
    if not _registered:
        _registered = True
        atexit.register(_at_exit)


def _at_exit() -> None:
    now = {real: state(Path(real)) for real in _seen}
    _save({real: key for real, key in now.items() if key is not None and key != _seen[real]})


def _save(entries: dict) -> None:
    if not entries:
        return
    path = _cache_file()
    try:
        data = _load()
        data.update({k: list(v) for k, v in entries.items()})
        if len(data) > _MAX_ENTRIES:
            data = dict(list(data.items())[-_MAX_ENTRIES:])
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, json.dumps(data).encode("utf-8"), prefix=".sound-", suffix=".json")
    except (OSError, ValueError, TypeError):
        pass
