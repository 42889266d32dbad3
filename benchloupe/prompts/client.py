"""One client for OpenAI-compatible chat completions (issue 5: "Everything about LLMs lives in prompts/").

- Endpoint = base URL + model + API key.  The ecosystem's conventions are the defaults: no base URL means
  ``$OPENAI_BASE_URL``, the key is read from the environment variable ``api_key_env`` (default
  ``$OPENAI_API_KEY``; ``api_key`` in the config is for programs only); it is never logged, stored, or put in a
  message (scrubbed from server errors).
- Every HTTP attempt becomes an :class:`LLMCallRecord` (prompt, response, latency, tokens, status, error)
  returned with the reply, so the caller journals it in its own thread.
- Retries with exponential backoff and jitter (``backoff_initial * 2**attempt`` capped at ``backoff_max``,
  then drawn uniformly from its upper half so that many clients do not retry in step) on 429, 5xx, timeouts,
  connection errors and non-JSON or malformed bodies; a server's ``retry-after-ms`` or ``Retry-After``
  (seconds or an HTTP date) is a floor, obeyed up to ``retry_after_max`` (default :data:`RETRY_AFTER_MAX`,
  60 s; ``endpoints set ROLE --retry-after-max S``). A server that asks for more fails the call at once with
  one line that says so (``Retry-After: 100000`` made a session wait 240 s in silence, issue 24); every wait of
  a second or more is announced through ``notify`` (the CLI's stderr, the workbench's job line). The
  ``openai`` package's own retries are off so each attempt is visible.  401/403/404/other 4xx are not retried.
- JSON mode: with ``json_mode`` the rewriter's and judge's requests ask for ``response_format =
  {"type": "json_object"}`` (servers that support it then reply with a JSON object only); a server that
  refuses the option stops the session with one line saying how to turn it off.
- Bounded concurrency: at most ``concurrency`` requests in flight per endpoint (a semaphore), whatever the
  number of threads calling :meth:`ChatClient.chat`.
- Failures raise :class:`LLMFailure` with one line: fatal ones stop a BenchFill session, keeping its state.
"""

from __future__ import annotations

import json
import math
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import openai

from benchloupe.engine.benchfill_types import LLMCallRecord, LLMFailure
from benchloupe.hints import Alt, Opt, say
from benchloupe.prompts import simulated
from benchloupe.prompts.bounded import ReplyRefused
from benchloupe.prompts.endpoint import (  # noqa: F401 - RETRY_AFTER_MAX, redact_url: the client's names too
    BASE_URL_ENV,
    RETRY_AFTER_MAX,
    EndpointConfig,
    redact_url,
)
from benchloupe.words import clip

NO_KEY = "not-needed"
def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """A server's requested wait: ``retry-after-ms`` (milliseconds), else ``Retry-After`` as seconds or as an
    HTTP date (RFC 9110 section 10.2.3); None when absent or unreadable."""
    if not headers:
        return None
    get = headers.get
    ms = get("retry-after-ms")
    try:
        if ms is not None and math.isfinite(float(ms)):
            return max(0.0, float(ms) / 1000.0)
    except ValueError:
        pass
    after = get("retry-after")
    if after is None:
        return None
    try:
        value = float(after)
        return max(0.0, value) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(after)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True)
class ChatReply:
    text: str
    calls: tuple[LLMCallRecord, ...]
    truncated: bool


class _Retryable(Exception):
    def __init__(self, status: str, http_status: int | None, error: str, retry_after: float | None = None):
        super().__init__(error)
        self.status, self.http_status, self.error, self.retry_after = status, http_status, error, retry_after


class ChatClient:
    """Thread-safe chat-completions client for one endpoint."""

    def __init__(self, endpoint: EndpointConfig, sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None, notify: Callable[[str], None] | None = None):
        self.endpoint = endpoint
        self._sleep = sleep
        self.notify = notify  # one line per wait of a second or more: what the call waits for, and how long
        self._rng = rng or random.Random()
        self._sem = threading.BoundedSemaphore(max(1, endpoint.concurrency))
        self._lock = threading.Lock()
        self._client: openai.OpenAI | None = None
        self._key: str | None = None

    @property
    def concurrency(self) -> int:
        return max(1, self.endpoint.concurrency)

    def _scrub(self, text: str) -> str:
        if self._key and self._key != NO_KEY and self._key in text:
            text = text.replace(self._key, "***")
        return clip(text, 300)

    def _openai(self) -> openai.OpenAI:
        with self._lock:
            if self._client is not None:
                return self._client
            ep = self.endpoint
            url = ep.url
            if not url:
                raise LLMFailure(say(f"no endpoint configured for model {ep.model!r}: set its base_url (",
                                     Alt("`benchloupe endpoints set ROLE --base-url URL`", "E on the BenchFill screen"),
                                     f") or ${BASE_URL_ENV}"), fatal=True)
            if simulated.is_simulated(url):
                try:
                    url = simulated.resolve(url)
                except LookupError as exc:
                    raise LLMFailure(str(exc), fatal=True) from None
            elif not url.lower().startswith(("http://", "https://")):
                raise LLMFailure(f"${BASE_URL_ENV} must start with http:// or https://, got {url!r}", fatal=True)
            if not ep.model:
                raise LLMFailure(f"no model name configured for endpoint {url}", fatal=True)
            key = ep.api_key or (os.environ.get(ep.api_key_env) if ep.api_key_env and not simulated.is_simulated(
                ep.url) else NO_KEY)
            if not key:
                raise LLMFailure(say(f"no API key for {ep.model!r} at {url}: set ${ep.api_key_env}, or name another "
                                     "variable ", Alt("with `benchloupe endpoints set ROLE --api-key-env NAME`",
                                                      "in the endpoint's settings (E on the BenchFill screen)")), fatal=True)
            self._key = key
            import httpx2

            from benchloupe.prompts.bounded import BoundedTransport

            transport = BoundedTransport(int(ep.max_reply_mb * 2**20), ep.deadline)
            http = httpx2.Client(transport=transport, timeout=ep.timeout, follow_redirects=True)
            self._client = openai.OpenAI(api_key=key, base_url=url, timeout=ep.timeout, max_retries=0, http_client=http)
            return self._client

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry *attempt* + 1: capped exponential backoff with jitter (its upper
        half), at least what the server asked for (up to ``retry_after_max``)."""
        ep = self.endpoint
        base = min(ep.backoff_max, ep.backoff_initial * 2**attempt)
        delay = base * self._rng.uniform(0.5, 1.0)
        if retry_after is not None:
            delay = max(delay, min(retry_after, ep.retry_after_max))
        return delay

    def chat(self, messages: list[dict[str, str]], tag: str, *, json_reply: bool = False) -> ChatReply:
        """Send one chat completion with retries; raise LLMFailure(fatal=True) when it cannot succeed.
        ``json_reply``: the caller wants a JSON object (JSON mode is asked for where the endpoint enables it)."""
        ep = self.endpoint
        client = self._openai()
        prompt = json.dumps(messages, ensure_ascii=False)
        calls: list[LLMCallRecord] = []
        last: _Retryable | None = None
        for attempt in range(ep.max_retries + 1):
            started = time.time()
            t0 = time.perf_counter()
            try:
                with self._sem:
                    text, usage, truncated = self._once(client, messages, json_reply and ep.json_mode)
            except _Retryable as err:
                last = err
                calls.append(self._record(tag, attempt, prompt, None, t0, started, None, err.status,
                                          err.http_status, err.error))
                if attempt < ep.max_retries:
                    if err.retry_after is not None and err.retry_after > ep.retry_after_max:
                        raise LLMFailure(self._too_long(err), fatal=True, calls=calls) from None
                    delay = self.backoff(attempt, err.retry_after)
                    if delay >= 1.0 and self.notify is not None:
                        asked = f", the server's Retry-After {err.retry_after:g} s" if err.retry_after else ""
                        self.notify(f"{ep.model} at {ep.shown_url}: {clip(err.error, 80)}; waiting {delay:.0f} s before retry "
                                    f"{attempt + 1} of {ep.max_retries}{asked}")
                    self._sleep(delay)
                continue
            except LLMFailure as failure:
                calls.append(self._record(tag, attempt, prompt, None, t0, started, None, "error",
                                          None, failure.message))
                raise LLMFailure(failure.message, fatal=True, calls=calls) from None
            calls.append(self._record(tag, attempt, prompt, text, t0, started, usage, "ok", 200, None))
            return ChatReply(text, tuple(calls), truncated)
        error = last.error if last is not None else "no attempt was made"
        tries = ep.max_retries + 1
        raise LLMFailure(f"{ep.model!r} at {ep.shown_url}: gave up after {tries} attempt{'s' if tries > 1 else ''}, "
                         f"last error: {error}", fatal=True, calls=calls)

    def _refused(self, exc: ReplyRefused) -> str:
        """The one line for a reply past a bound (issue 37 #7): which endpoint, which bound, how to raise it."""
        ep = self.endpoint
        how = {"size": say("raise it ", Alt("with `benchloupe endpoints set ROLE --max-reply-mb N`",
                                            "in the endpoint's settings (E on the BenchFill screen)")),
               "deadline": say("raise it ", Alt("with `benchloupe endpoints set ROLE --deadline SECONDS`",
                                                "in the endpoint's settings (E on the BenchFill screen)"),
                               " if the server is only slow"),
               }.get(exc.kind, "check the server")
        return f"{ep.model!r} at {ep.shown_url}: {exc.message}; {how}"

    def _too_long(self, err: _Retryable) -> str:
        """The one line for a server that asks to wait longer than ``retry_after_max``."""
        ep = self.endpoint
        return say(f"{ep.model!r} at {ep.shown_url} answered {clip(err.error, 60)} and asks to wait {err.retry_after:,.0f} s "
                   f"before retrying, more than this endpoint waits ({ep.retry_after_max:g} s, ", Opt("retry_after_max"),
                   "); try again later, or raise the limit ",
                   Alt("with `benchloupe endpoints set ROLE --retry-after-max SECONDS`",
                       "in the endpoint's settings (E on the BenchFill screen)"))

    def _once(self, client: openai.OpenAI, messages: list[dict[str, str]], json_mode: bool = False):
        ep = self.endpoint
        kwargs: dict[str, object] = {}
        if ep.temperature is not None:
            kwargs["temperature"] = ep.temperature
        if ep.max_tokens is not None:
            kwargs["max_tokens"] = ep.max_tokens
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        try:
            resp = client.chat.completions.create(model=ep.model, messages=messages, **kwargs)
        except ReplyRefused as exc:
            raise LLMFailure(self._refused(exc), fatal=True) from None
        except openai.APITimeoutError:
            raise _Retryable("timeout", None, f"no reply within {ep.timeout:g} s (timeout)") from None
        except openai.APIConnectionError as exc:
            refused = _refusal(exc)
            if refused is not None:
                raise LLMFailure(self._refused(refused), fatal=True) from None
            raise _Retryable("connection", None, f"cannot reach {ep.shown_url}: {self._scrub(_connection_cause(exc))}") from None
        except openai.AuthenticationError as exc:
            where = "api_key in the endpoint config" if ep.api_key else f"${ep.api_key_env}"
            raise LLMFailure(f"{ep.shown_url} rejected the API key for {ep.model!r} (HTTP 401): check {where} "
                             f"[{self._scrub(exc.message)}]", fatal=True) from None
        except openai.PermissionDeniedError as exc:
            raise LLMFailure(f"{ep.shown_url} denied access to {ep.model!r} (HTTP 403): "
                             f"{self._scrub(exc.message)}", fatal=True) from None
        except openai.NotFoundError as exc:
            raise LLMFailure(f"model {ep.model!r} not found at {ep.shown_url} (HTTP 404): check the model name "
                             f"[{self._scrub(exc.message)}]", fatal=True) from None
        except openai.APIStatusError as exc:
            code = exc.status_code
            if code == 429 or code >= 500:
                raise _Retryable(f"http_{code}", code, f"HTTP {code}: {self._scrub(exc.message)}",
                                 retry_after_seconds(exc.response.headers)) from None
            if json_mode and "response_format" in str(exc.message):
                raise LLMFailure(say(f"{ep.shown_url} does not support JSON mode for {ep.model!r} (HTTP {code}): turn it off ",
                                     Alt("with `benchloupe endpoints set ROLE --no-json-mode`",
                                         "in the endpoint's settings (E on the BenchFill screen)"),
                                     f" [{self._scrub(exc.message)}]"), fatal=True) from None
            raise LLMFailure(f"{ep.shown_url} refused the request for {ep.model!r} (HTTP {code}): "
                             f"{self._scrub(exc.message)}", fatal=True) from None
        except (openai.APIResponseValidationError, json.JSONDecodeError, ValueError) as exc:
            raise _Retryable("bad_body", None, f"reply was not valid JSON: {self._scrub(str(exc))}") from None
        if isinstance(resp, (str, bytes)):  # the openai package hands back a non-JSON body as text
            raise _Retryable("bad_body", None, f"reply was not valid JSON: {clip(self._scrub(str(resp)), 80)!r}")
        choices = getattr(resp, "choices", None)
        error = (getattr(resp, "model_extra", None) or {}).get("error") if not choices else None
        if error:  # HTTP 200 carrying an error object (a quota, an overloaded backend): the server's own words
            said = error.get("message") if isinstance(error, dict) else error
            kind = error.get("type") or error.get("code") if isinstance(error, dict) else None
            raise _Retryable("bad_body", None, f"the server answered HTTP 200 with an error"
                                               f"{f' ({kind})' if kind else ''}: {self._scrub(str(said))}")
        if not isinstance(choices, list) or not choices:
            raise _Retryable("bad_body", None, f"reply was not a chat completion: {clip(self._scrub(repr(resp)), 120)}")
        choice = choices[0]
        message = getattr(choice, "message", None) if choice is not None else None
        if message is None:
            raise _Retryable("bad_body", None, f"reply's choices[0] held no message: {clip(self._scrub(repr(choice)), 80)}")
        text = getattr(message, "content", None)
        if text is None:
            text = ""  # a refusal or a tool call: no text, which the caller treats as an empty reply
        if not isinstance(text, str):
            raise _Retryable("bad_body", None, f"reply's message content was {type(text).__name__} "
                                               f"{clip(self._scrub(repr(text)), 60)}, not text")
        truncated = getattr(choice, "finish_reason", None) == "length"
        return text, getattr(resp, "usage", None), truncated

    def _record(self, tag, attempt, prompt, response, t0, started, usage, status, http_status, error):
        return LLMCallRecord(
            tag=tag, endpoint=self.endpoint.shown_url, model=self.endpoint.model, attempt=attempt,
            prompt=prompt, response=response, latency_s=time.perf_counter() - t0,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            status=status, http_status=http_status, error=error, started_at=started)


def _refusal(exc: BaseException) -> ReplyRefused | None:
    """The :class:`ReplyRefused` somewhere in an exception's chain of causes, or None."""
    seen: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and all(cause is not c for c in seen):
        if isinstance(cause, ReplyRefused):
            return cause
        seen.append(cause)
        cause = cause.__cause__ or cause.__context__
    return None


def _connection_cause(exc: BaseException) -> str:
    """What broke a connection, in words: the server reset it, refused it, closed it, the name did not resolve
    (the openai package says only "Connection error."; a reset was reported as a timeout, issue 24). The whole
    chain of causes is read, the most specific finding first."""
    import errno

    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and all(cause is not c for c in chain):
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    texts = [f"{type(c).__name__} {c}".lower() for c in chain]
    if any(isinstance(c, ConnectionResetError) or getattr(c, "errno", None) == errno.ECONNRESET for c in chain) \
            or any("reset by peer" in t or "connection reset" in t for t in texts):
        return "the server reset the connection"
    if any(isinstance(c, ConnectionRefusedError) or getattr(c, "errno", None) == errno.ECONNREFUSED for c in chain):
        return "connection refused (is the server running on that port?)"
    if any("name or service not known" in t or "nodename nor servname" in t or "getaddrinfo" in t for t in texts):
        return "the host name does not resolve"
    if any("toomanyredirects" in t or "redirects" in t for t in texts):
        return "the server redirects in a loop (too many redirects); check the base URL"
    if any("server disconnected" in t or "remoteprotocolerror" in t for t in texts):
        return "the server closed the connection without a reply"
    return clip(str(exc), 200) or "connection error"
