"""Bounds on an endpoint's reply (issue 37 #7): at most ``max_bytes`` of body, decoded, and one whole-request
deadline, whatever the server does.

A gzip-encoded bomb, a 1.2 GB body or an endless chunked reply each took 1.4-1.6 GB before "ran out of memory",
and the per-read ``--timeout`` let a server that drips one byte a second hold a call for as long as it liked. The
HTTP transport the ``openai`` client sends through is wrapped here:

- the body is decoded here, not by the HTTP library (gzip, zlib/deflate; the request asks for no other encoding,
  and a reply in another is refused), counting decoded bytes as they come, and refused the moment it passes
  ``max_bytes``: nothing larger is ever held;
- a watchdog closes the connection when the deadline passes (during the headers, a dripped body, anything), and
  every chunk read checks the clock too;
- either ends in :class:`ReplyRefused`, whose message the client turns into one line naming the endpoint.
"""

from __future__ import annotations

import socket
import threading
import time
import zlib
from collections.abc import Iterator

import httpx2


class ReplyRefused(Exception):
    """A reply passed a bound: ``kind`` is "size", "deadline" or "encoding"; the message says which and how much."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind, self.message = kind, message


def _decoder(encoding: str):
    """A zlib decompressor for a Content-Encoding, or None for identity."""
    enc = encoding.strip().lower()
    if enc in ("", "identity"):
        return None
    if enc in ("gzip", "x-gzip"):
        return lambda: zlib.decompressobj(31)
    if enc == "deflate":
        return lambda: zlib.decompressobj(47)  # zlib-wrapped (what servers send); gzip too
    raise ReplyRefused("encoding", f"the reply is encoded as {encoding!r}, which was not asked for "
                                   "(only gzip and deflate are read)")


class _BoundedStream(httpx2.SyncByteStream):
    def __init__(self, raw, encoding: str, max_bytes: int, deadline: float, deadline_s: float, on_close):
        self.raw, self.max_bytes, self.deadline, self.deadline_s = raw, max_bytes, deadline, deadline_s
        self.make = _decoder(encoding)
        self.on_close = on_close
        self.total = 0

    def _count(self, data: bytes) -> bytes:
        self.total += len(data)
        if self.total > self.max_bytes:
            raise ReplyRefused("size", f"the reply passed {self.max_bytes:,} bytes (max_reply_bytes) and was cut off")
        return data

    def _late(self) -> None:
        if time.monotonic() > self.deadline:
            raise ReplyRefused("deadline", f"no complete reply within {self.deadline_s:g} s (deadline, the whole "
                                           "request's limit)")

    def __iter__(self) -> Iterator[bytes]:
        d = self.make() if self.make else None
        try:
            for chunk in self.raw:
                self._late()
                if d is None:
                    yield self._count(chunk)
                    continue
                data = chunk
                while data:
                    room = self.max_bytes - self.total + 1
                    try:
                        out = d.decompress(data, room)
                    except zlib.error as exc:
                        raise ReplyRefused("encoding", f"the reply's compressed body is corrupt ({exc})") from None
                    if out:
                        yield self._count(out)
                    if d.unconsumed_tail:
                        data = d.unconsumed_tail
                    elif d.eof and d.unused_data:  # another gzip member follows
                        data, d = d.unused_data, self.make()
                    else:
                        data = b""
            self._late()
        except httpx2.TransportError:
            if time.monotonic() >= self.deadline:  # the watchdog closed the connection
                raise ReplyRefused("deadline", f"no complete reply within {self.deadline_s:g} s (deadline, the "
                                               "whole request's limit)") from None
            raise

    def close(self) -> None:
        try:
            self.raw.close()
        finally:
            self.on_close()


class _Tracked:
    """A network stream that notes, on every read and write, which thread is using it: the watchdog of that
    thread's request shuts its socket down (a ``close`` from another thread does not wake a blocked ``recv``)."""

    def __init__(self, stream, active: dict):
        self._stream, self._active = stream, active

    def _mine(self) -> None:
        self._active[threading.get_ident()] = self

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._mine()
        return self._stream.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._mine()
        self._stream.write(buffer, timeout)

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, *args, **kwargs):
        return _Tracked(self._stream.start_tls(*args, **kwargs), self._active)

    def get_extra_info(self, info: str):
        return self._stream.get_extra_info(info)

    def shutdown(self) -> None:
        sock = self._stream.get_extra_info("socket")
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _TrackingBackend:
    """httpcore's synchronous network backend, each stream it opens :class:`_Tracked`."""

    def __init__(self, active: dict):
        import httpcore2

        self._backend, self._active = httpcore2.SyncBackend(), active

    def connect_tcp(self, *args, **kwargs):
        return _Tracked(self._backend.connect_tcp(*args, **kwargs), self._active)

    def connect_unix_socket(self, *args, **kwargs):
        return _Tracked(self._backend.connect_unix_socket(*args, **kwargs), self._active)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class BoundedTransport(httpx2.BaseTransport):
    """An HTTP transport whose replies are bounded in decoded size and in total time (see the module)."""

    def __init__(self, max_bytes: int, deadline_s: float, **transport_kw):
        self.max_bytes, self.deadline_s = int(max_bytes), float(deadline_s)
        self.inner = httpx2.HTTPTransport(**transport_kw)
        self._active: dict[int, _Tracked] = {}  # thread -> the stream it last read or wrote
        pool = getattr(self.inner, "_pool", None)
        if pool is not None and hasattr(pool, "_network_backend"):
            pool._network_backend = _TrackingBackend(self._active)

    def _expire(self, thread: int, done: threading.Event) -> None:
        """The watchdog: past the deadline, shut down the socket this request's thread is using (a blocked read
        then fails at once)."""
        if done.is_set():
            return
        stream = self._active.get(thread)
        if stream is not None:
            stream.shutdown()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "gzip, deflate"
        deadline = time.monotonic() + self.deadline_s
        done = threading.Event()
        inner = self.inner
        timer = threading.Timer(self.deadline_s, self._expire, (threading.get_ident(), done))
        timer.daemon = True
        timer.start()

        def finished() -> None:
            done.set()
            timer.cancel()

        try:
            response = inner.handle_request(request)
        except httpx2.TransportError:
            finished()
            if time.monotonic() >= deadline:
                raise ReplyRefused("deadline", f"no complete reply within {self.deadline_s:g} s (deadline, the "
                                               "whole request's limit)") from None
            raise
        except BaseException:
            finished()
            raise
        try:
            encoding = response.headers.get("content-encoding", "")
            stream = _BoundedStream(response.stream, encoding, self.max_bytes, deadline, self.deadline_s, finished)
            length = response.headers.get("content-length")
            if not encoding and length and length.isdigit() and int(length) > self.max_bytes:
                raise ReplyRefused("size", f"the reply announces {int(length):,} bytes, more than {self.max_bytes:,} "
                                           "(max_reply_bytes)")
        except BaseException:
            response.close()
            finished()
            raise
        headers = [(k, v) for k, v in response.headers.raw
                   if k.lower() not in (b"content-encoding", b"content-length", b"transfer-encoding")]
        return httpx2.Response(status_code=response.status_code, headers=headers, stream=stream,
                               extensions=response.extensions, request=request)

    def close(self) -> None:
        self.inner.close()
