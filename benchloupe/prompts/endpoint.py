"""Where and how to call one model: :class:`EndpointConfig`, its checks, and the URL helpers (issue 36 point 4:
apart from the client, so that ``benchloupe endpoints set/show`` and the endpoint settings of the faces load
neither the ``openai`` package nor the BenchFill engine; :mod:`benchloupe.prompts.client` calls the endpoints)."""

from __future__ import annotations

import math
import os
import re
import unicodedata
from dataclasses import dataclass, field

from benchloupe.engine.common import EngineError
from benchloupe.hints import Opt, say
from benchloupe.prompts import simulated

BASE_URL_ENV = "OPENAI_BASE_URL"
RETRY_AFTER_MAX = 60.0  # seconds of a server's Retry-After that a call waits at most (configurable per endpoint)
DEADLINE = 300.0  # seconds one HTTP request may take in all, headers and body (``endpoints set ROLE --deadline S``)
MAX_REPLY_MB = 32.0  # MiB of one decoded reply body (``endpoints set ROLE --max-reply-mb N``)


def _number(value, name: str, *, minimum: float, integer: bool = False, strict: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > minimum if strict else value >= minimum) and (not integer or float(value).is_integer())
    if not ok:
        what = "a whole number" if integer else "a number"
        bound = f"above {minimum:g}" if strict else f"{minimum:g} or more"
        raise EngineError(say(name, f" must be {what} {bound}, got {value!r}"))


@dataclass(frozen=True)
class EndpointConfig:
    """Where and how to call one model.  ``api_key_env=None`` for servers that take no key."""

    base_url: str | None
    model: str
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 4
    concurrency: int = 8
    temperature: float | None = None
    max_tokens: int | None = None
    json_mode: bool = False
    backoff_initial: float = 0.5
    backoff_max: float = 20.0
    retry_after_max: float = RETRY_AFTER_MAX
    deadline: float = DEADLINE
    max_reply_mb: float = MAX_REPLY_MB
    api_key: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Refuse settings that cannot work, with the option's name (issue 10 #6: a negative retry count was
        accepted and then failed mid-session)."""
        if self.base_url is not None and not isinstance(self.base_url, str):
            raise EngineError(f"base_url must be a URL, got {self.base_url!r}")
        if self.base_url:
            check_base_url(self.base_url, say(Opt("base_url")))
        if self.base_url and not self.base_url.strip().lower().startswith(("http://", "https://")) and \
                self.base_url.strip().lower() != simulated.SIMULATED_URL:
            raise EngineError(f"base_url must start with http:// or https:// (or be {simulated.SIMULATED_URL}, "
                              f"the built-in simulated endpoint), got {self.base_url!r}")
        _number(self.timeout, say(Opt("timeout"), " (seconds per request)"), minimum=0, strict=True)
        _number(self.max_retries, say(Opt("max_retries")), minimum=0, integer=True)
        _number(self.concurrency, say(Opt("concurrency")), minimum=1, integer=True)
        if self.temperature is not None:
            _number(self.temperature, say(Opt("temperature")), minimum=0)
        if self.max_tokens is not None:
            _number(self.max_tokens, say(Opt("max_tokens")), minimum=1, integer=True)
        _number(self.backoff_initial, "backoff_initial", minimum=0)
        _number(self.backoff_max, "backoff_max", minimum=0)
        _number(self.retry_after_max, say(Opt("retry_after_max"), " (seconds)"), minimum=0)
        _number(self.deadline, say(Opt("deadline"), " (seconds for a whole request)"), minimum=0, strict=True)
        _number(self.max_reply_mb, say(Opt("max_reply_mb"), " (MiB of one reply)"), minimum=0, strict=True)

    @property
    def url(self) -> str:
        """The base URL in use: the configured one, else ``$OPENAI_BASE_URL``, else empty."""
        return (self.base_url or os.environ.get(BASE_URL_ENV) or "").strip()

    @property
    def shown_url(self) -> str:
        """:attr:`url` as messages and the journal show it: any ``user:password@`` of ``$OPENAI_BASE_URL``
        replaced by ``***@`` (a configured base URL cannot hold one: :func:`check_base_url`)."""
        return redact_url(self.url)


def _userinfo(url: str) -> str | None:
    """The ``user:password`` part of a URL's authority, or None."""
    rest = url.split("://", 1)[1] if "://" in url else url
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    return authority.rsplit("@", 1)[0] if "@" in authority else None


def redact_url(url: str) -> str:
    """*url* with any credentials in its authority shown as ``***``."""
    info = _userinfo(url)
    return url.replace(info + "@", "***@", 1) if info is not None else url


def check_base_url(url: str, what: str = "base_url") -> None:
    """Refuse a base URL that holds credentials (issue 37 #9: ``https://user:password@host`` was stored in the
    team's database, printed by ``endpoints show`` and written into every journaled call) or a control character
    or line break (a newline in a URL was accepted), in one line that never repeats the password."""
    if _userinfo(url) is not None:
        raise EngineError(say(f"{what} {redact_url(url)!r} holds credentials (user:password@); the shared "
                              "database never stores them: give the URL without them, and the key through the "
                              "environment (", Opt("api_key_env", "NAME"), ") or the per-user endpoints file (",
                              Opt("user"), ")"))
    bad = next((c for c in url if unicodedata.category(c)[0] in "CZ" and c != " "), None)
    if bad is not None or " " in url.strip():
        which = f"U+{ord(bad):04X}" if bad is not None else "a space"
        raise EngineError(f"{what} {url!r} holds a line break, space or control character ({which}); give the URL "
                          "on one line, as http://host:port/v1")
