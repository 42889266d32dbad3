"""A hostile OpenAI-compatible server on 127.0.0.1 (raw sockets, one thread per connection), for the bounds on an
endpoint's reply (issue 37 #7) and the small endpoint cases of #15. The first path segment picks the behaviour,
one per class (:data:`REPLY_BOMBS`, :data:`ODD_REPLIES`): ``http://127.0.0.1:PORT/<mode>/v1``.

- ``gzip-bomb``, ``deflate-bomb``, ``gzip-members``: a small compressed body that expands to ``expand`` bytes;
- ``big``: a body announced as 1.2 GB and sent until the client hangs up; ``big-unannounced`` the same without a
  length; ``chunked-endless``: chunks forever;
- ``drip``: the headers, then one body byte every ``drip_s``; ``drip-headers``: the status line, then one header
  byte every ``drip_s``;
- ``redirect-loop``: a 307 to itself; ``error-200``: HTTP 200 carrying ``{"error": {...}}`` (a quota message);
- ``ok``: a normal chat completion.
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import zlib

REPLY_BOMBS = ("gzip-bomb", "deflate-bomb", "gzip-members", "big", "big-unannounced", "chunked-endless", "drip",
               "drip-headers")
ODD_REPLIES = ("redirect-loop", "error-200")
QUOTA = "You exceeded your current quota, please check your plan and billing details."


def completion(text: str = "fine") -> bytes:
    return json.dumps({"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}]}).encode()


class HostileServer:
    def __init__(self, *, expand: int = 20_000_000, drip_s: float = 0.5):
        self.expand, self.drip_s = expand, drip_s
        self.stop_event = threading.Event()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        head = b'{"id": "c1", "object": "chat.completion", "choices": [{"message": {"content": "'
        zeros = b"0" * (1 << 20)
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        self.gzip_body = z.compress(head) + b"".join(z.compress(zeros) for _ in range(expand >> 20)) + z.flush()
        z = zlib.compressobj(9, zlib.DEFLATED, 15)
        self.deflate_body = z.compress(head) + b"".join(z.compress(zeros) for _ in range(expand >> 20)) + z.flush()
        member = gzip.compress(zeros, 9)
        self.members_body = gzip.compress(head) + member * ((expand >> 20) + 1)
        threading.Thread(target=self._serve, daemon=True).start()

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/v1"

    def close(self) -> None:
        self.stop_event.set()
        self.sock.close()

    def _serve(self) -> None:
        while not self.stop_event.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _read_request(self, conn: socket.socket) -> str:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return ""
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        length = next((int(v.split(":", 1)[1]) for v in lines if v.lower().startswith("content-length:")), 0)
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        return lines[0].split(" ")[1]

    def _one(self, conn: socket.socket) -> None:
        try:
            with conn:
                path = self._read_request(conn)
                mode = path.strip("/").split("/")[0]
                self._reply(conn, mode, path)
        except OSError:  # the client hung up: what every bomb is waiting for
            pass

    def _send_all(self, conn, status: str, headers: dict, body: bytes) -> None:
        head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        conn.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)

    def _reply(self, conn: socket.socket, mode: str, path: str) -> None:
        js = "application/json"
        if mode == "ok":
            body = completion()
            self._send_all(conn, "200 OK", {"Content-Type": js, "Content-Length": len(body)}, body)
        elif mode in ("gzip-bomb", "deflate-bomb", "gzip-members"):
            body = {"gzip-bomb": self.gzip_body, "deflate-bomb": self.deflate_body,
                    "gzip-members": self.members_body}[mode]
            enc = "deflate" if mode == "deflate-bomb" else "gzip"
            self._send_all(conn, "200 OK", {"Content-Type": js, "Content-Encoding": enc, "Content-Length": len(body)},
                           body)
        elif mode in ("big", "big-unannounced", "chunked-endless"):
            headers = {"Content-Type": js}
            if mode == "big":
                headers["Content-Length"] = 1_200_000_000
            if mode == "chunked-endless":
                headers["Transfer-Encoding"] = "chunked"
            first, block = b'{"choices": [{"message": {"content": "', b"x" * 65536
            if mode == "chunked-endless":
                first = f"{len(first):x}\r\n".encode() + first + b"\r\n"
                block = f"{len(block):x}\r\n".encode() + block + b"\r\n"
            self._send_all(conn, "200 OK", headers, first)
            while not self.stop_event.is_set():
                conn.sendall(block)
        elif mode == "drip":
            body = completion()
            self._send_all(conn, "200 OK", {"Content-Type": js, "Content-Length": len(body) + 10_000}, b"")
            for byte in body + b" " * 10_000:
                if self.stop_event.wait(self.drip_s):
                    return
                conn.sendall(bytes([byte]))
        elif mode == "drip-headers":
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            for byte in b"X-Slow: " + b"a" * 100_000:
                if self.stop_event.wait(self.drip_s):
                    return
                conn.sendall(bytes([byte]))
        elif mode == "redirect-loop":
            self._send_all(conn, "307 Temporary Redirect", {"Location": path, "Content-Length": 0}, b"")
        elif mode == "error-200":
            body = json.dumps({"error": {"message": QUOTA, "type": "insufficient_quota", "code": "insufficient_quota"}}
                              ).encode()
            self._send_all(conn, "200 OK", {"Content-Type": js, "Content-Length": len(body)}, body)
