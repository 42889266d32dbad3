"""One client for OpenAI-compatible chat completions (issue 5: "Everything about LLMs lives in prompts/").

- Endpoint = base URL + model + API key.  The key comes from ``api_key`` in the config or the environment
  variable ``api_key_env``; it is never logged, stored, or put in a message (scrubbed from server errors).
- Every HTTP attempt becomes an :class:`LLMCallRecord` (prompt, response, latency, tokens, status, error)
  returned with the reply, so the caller journals it in its own thread.
- Retries with exponential backoff (``backoff_initial * 2**attempt``, capped, ``Retry-After`` honoured up to
  the cap) on 429, 5xx, timeouts, connection errors and non-JSON bodies; the ``openai`` package's own retries
  are off so each attempt is visible.  401/403/404/other 4xx are not retried.
- Bounded concurrency: at most ``concurrency`` requests in flight per endpoint (a semaphore), whatever the
  number of threads calling :meth:`ChatClient.chat`.
- Failures raise :class:`LLMFailure` with one line: fatal ones stop a BenchFill session, keeping its state.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import openai

from benchloupe.engine.benchfill_types import LLMCallRecord, LLMFailure

NO_KEY = "not-needed"


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
    backoff_initial: float = 0.5
    backoff_max: float = 20.0
    api_key: str | None = field(default=None, repr=False, compare=False)


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

    def __init__(self, endpoint: EndpointConfig, sleep: Callable[[float], None] = time.sleep):
        self.endpoint = endpoint
        self._sleep = sleep
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
        return " ".join(text.split())[:300]

    def _openai(self) -> openai.OpenAI:
        with self._lock:
            if self._client is not None:
                return self._client
            ep = self.endpoint
            if not ep.base_url or not ep.base_url.strip():
                raise LLMFailure(f"no endpoint configured for model {ep.model!r}: set its base_url", fatal=True)
            if not ep.model:
                raise LLMFailure(f"no model name configured for endpoint {ep.base_url}", fatal=True)
            key = ep.api_key or (os.environ.get(ep.api_key_env) if ep.api_key_env else NO_KEY)
            if not key:
                raise LLMFailure(f"no API key for {ep.model!r} at {ep.base_url}: set ${ep.api_key_env} "
                                 "or api_key in the endpoint config", fatal=True)
            self._key = key
            self._client = openai.OpenAI(api_key=key, base_url=ep.base_url, timeout=ep.timeout, max_retries=0)
            return self._client

    def chat(self, messages: list[dict[str, str]], tag: str) -> ChatReply:
        """Send one chat completion with retries; raise LLMFailure(fatal=True) when it cannot succeed."""
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
                    text, usage, truncated = self._once(client, messages)
            except _Retryable as err:
                last = err
                calls.append(self._record(tag, attempt, prompt, None, t0, started, None, err.status,
                                          err.http_status, err.error))
                if attempt < ep.max_retries:
                    delay = min(ep.backoff_max, ep.backoff_initial * 2**attempt)
                    if err.retry_after is not None:
                        delay = min(ep.backoff_max, max(delay, err.retry_after))
                    self._sleep(delay)
                continue
            except LLMFailure as failure:
                calls.append(self._record(tag, attempt, prompt, None, t0, started, None, "error",
                                          None, failure.message))
                raise LLMFailure(failure.message, fatal=True, calls=calls) from None
            calls.append(self._record(tag, attempt, prompt, text, t0, started, usage, "ok", 200, None))
            return ChatReply(text, tuple(calls), truncated)
        assert last is not None
        raise LLMFailure(f"{ep.model!r} at {ep.base_url}: gave up after {ep.max_retries + 1} attempts, "
                         f"last error: {last.error}", fatal=True, calls=calls)

    def _once(self, client: openai.OpenAI, messages: list[dict[str, str]]):
        ep = self.endpoint
        kwargs: dict[str, object] = {}
        if ep.temperature is not None:
            kwargs["temperature"] = ep.temperature
        if ep.max_tokens is not None:
            kwargs["max_tokens"] = ep.max_tokens
        try:
            resp = client.chat.completions.create(model=ep.model, messages=messages, **kwargs)
        except openai.APITimeoutError:
            raise _Retryable("timeout", None, f"no reply within {ep.timeout:g} s (timeout)") from None
        except openai.APIConnectionError as exc:
            raise _Retryable("connection", None, f"cannot reach {ep.base_url}: {self._scrub(str(exc))}") from None
        except openai.AuthenticationError as exc:
            where = "api_key in the endpoint config" if ep.api_key else f"${ep.api_key_env}"
            raise LLMFailure(f"{ep.base_url} rejected the API key for {ep.model!r} (HTTP 401): check {where} "
                             f"[{self._scrub(exc.message)}]", fatal=True) from None
        except openai.PermissionDeniedError as exc:
            raise LLMFailure(f"{ep.base_url} denied access to {ep.model!r} (HTTP 403): "
                             f"{self._scrub(exc.message)}", fatal=True) from None
        except openai.NotFoundError as exc:
            raise LLMFailure(f"model {ep.model!r} not found at {ep.base_url} (HTTP 404): check the model name "
                             f"[{self._scrub(exc.message)}]", fatal=True) from None
        except openai.APIStatusError as exc:
            code = exc.status_code
            if code == 429 or code >= 500:
                after = exc.response.headers.get("retry-after")
                retry_after = float(after) if after and after.replace(".", "", 1).isdigit() else None
                raise _Retryable(f"http_{code}", code, f"HTTP {code}: {self._scrub(exc.message)}",
                                 retry_after) from None
            raise LLMFailure(f"{ep.base_url} refused the request for {ep.model!r} (HTTP {code}): "
                             f"{self._scrub(exc.message)}", fatal=True) from None
        except (openai.APIResponseValidationError, json.JSONDecodeError, ValueError) as exc:
            raise _Retryable("bad_body", None, f"reply was not valid JSON: {self._scrub(str(exc))}") from None
        if isinstance(resp, (str, bytes)):  # the openai package hands back a non-JSON body as text
            raise _Retryable("bad_body", None, f"reply was not valid JSON: {self._scrub(str(resp))[:80]!r}")
        choices = getattr(resp, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise _Retryable("bad_body", None, f"reply was not a chat completion: {self._scrub(repr(resp))}")
        text = choices[0].message.content or ""
        truncated = choices[0].finish_reason == "length"
        return text, getattr(resp, "usage", None), truncated

    def _record(self, tag, attempt, prompt, response, t0, started, usage, status, http_status, error):
        return LLMCallRecord(
            tag=tag, endpoint=self.endpoint.base_url or "", model=self.endpoint.model, attempt=attempt,
            prompt=prompt, response=response, latency_s=time.perf_counter() - t0,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            status=status, http_status=http_status, error=error, started_at=started)
