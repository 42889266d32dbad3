"""Who is deciding: the curator's name recorded on every write (issue 25, "who decided").

A team shares one database, often under one Unix account (a service user on the shared server), so the login
alone cannot say who confirmed a flag. The actor is, in this order: the name given with ``--as NAME`` (the CLI
and ``benchloupe open``; :func:`set_actor`), ``$BENCHLOUPE_USER``, then the login name. :func:`set_actor` also
exports ``$BENCHLOUPE_USER``, so the job processes the workbench starts (jobs/process.py: they inherit the
environment) write under the same name.

A name is checked by :mod:`benchloupe.names` (issue 37 #8): NFC, at most :data:`MAX_CHARS` characters, nothing
invisible, no compatibility forms, no lookalike scripts, no comma (names are listed with commas); anything else is
refused with one line naming ``--as`` or ``$BENCHLOUPE_USER``, and an unusable ``$BENCHLOUPE_USER`` is refused, never
replaced by the login in silence. Two names with the same :func:`identity` (NFC, case-folded) are one curator.
"""

from __future__ import annotations

import getpass
import os

from benchloupe import names
from benchloupe.hints import Alt

ENV = "BENCHLOUPE_USER"
MAX_CHARS = 40
_explicit: str | None = None
_UNSET = object()
_env_before: object = _UNSET  # $BENCHLOUPE_USER as it was before the first set_actor (None: not set)


def check_name(name: str, where: str | Alt = Alt("--as", "the open command's as option")) -> str:
    """*name* normalised, or ValueError with one line saying what is wrong with it and where it came from."""
    return names.check(name, what="curator name", where=where, max_chars=MAX_CHARS, commas=False)


def identity(name: str) -> str:
    """The curator a name stands for: one per normalised, case-folded name (``Ann`` and ``ann`` are one)."""
    return names.identity(name)


def set_actor(name: str | None) -> str:
    """Make *name* (checked) this process's actor, and its children's through ``$BENCHLOUPE_USER``; None goes
    back to the environment and the login. Returns the actor now in effect."""
    global _explicit, _env_before
    if name is None:
        _explicit = None
        if _env_before is not _UNSET:  # $BENCHLOUPE_USER back to what it was
            if _env_before is None:
                os.environ.pop(ENV, None)
            else:
                os.environ[ENV] = str(_env_before)
            _env_before = _UNSET
    else:
        value = check_name(name)
        if _env_before is _UNSET:
            _env_before = os.environ.get(ENV)
        _explicit = value
        os.environ[ENV] = value
    return current()


def login() -> str:
    """The Unix login name, or ``uid N`` where the account has no name (a container, a numeric ``--user``)."""
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry and no LOGNAME/USER
        return f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"


def current() -> str:
    """The actor of this process's writes: ``--as``, then ``$BENCHLOUPE_USER``, then the login name. A
    ``$BENCHLOUPE_USER`` that is not a usable name is refused (ValueError, one line), never replaced by the login."""
    if _explicit is not None:
        return _explicit
    env = os.environ.get(ENV)
    if env:  # set but empty is unset (the shell's ``BENCHLOUPE_USER= cmd``); blanks are refused
        return check_name(env, f"${ENV}")
    return login()


def short_time(stamp: str | None, *, today: str | None = None) -> str:
    """A stored UTC time (``2026-05-03T14:02:11.123``, SQLite's ``strftime``) as local ``14:02``, with the
    date in front when it is not today (``2026-05-02 14:02``); empty for none."""
    import datetime as dt

    if not stamp:
        return ""
    try:
        t = dt.datetime.fromisoformat(str(stamp).rstrip("Z")).replace(tzinfo=dt.UTC).astimezone()
    except ValueError:
        return str(stamp)
    now = today or dt.datetime.now().astimezone().date().isoformat()
    return t.strftime("%H:%M") if t.date().isoformat() == now else t.strftime("%Y-%m-%d %H:%M")


def by_at(actor: str | None, stamp: str | None) -> str:
    """``by bea at 14:02`` (the parts that are known: a missing one, None, "" or NaN from a frame, is left out;
    an undone note read "open at nan", issue 32 point 6)."""
    def known(v) -> bool:
        return v is not None and str(v) not in ("", "nan", "NaN", "NaT", "<NA>")

    parts = ([f"by {actor}"] if known(actor) else []) + ([f"at {short_time(stamp)}"] if known(stamp) else [])
    return " ".join(parts)
