"""The built-in *simulated* endpoint: a real OpenAI-compatible HTTP server on 127.0.0.1 (issue 11 item 10).

A new user has no endpoint and no key; the demo workspace's BenchFill endpoints are this server, so the loop
(paper 003 Algorithm 2) runs out of the box. It is a stdlib :class:`ThreadingHTTPServer` in a daemon thread
answering ``POST /v1/chat/completions`` and ``GET /v1/models`` for the real ``openai`` client, as three kinds of
simulated model over the items the session registered (:meth:`SimulatedWorld.load`):

- ``simulated-rewriter`` reads the target and the parent from the rewriter prompt and writes children whose
  hidden normalised difficulty is ``z_parent + PULL * (z_target - z_parent) + N(0, NOISE)``; a demo-math item
  ("Compute x + y × z", "Solve for n", perimeter, pens) gets new numbers with as many digits as that
  difficulty asks (the demo's own rule, engine/simulate.py) and its true answer; any other item keeps its
  stem and options in a new order. ``WRONG_RATE`` of children carry a wrong reference answer.
- ``simulated-judge`` marks a child valid when its reference answer is the true one (and grades free-form
  replies against the reference).
- every other model is an annotator: it answers correctly with probability
  ``g + (1 - g) * sigmoid(theta - b)``, with ``theta`` the ability the session calibrates with and ``b`` the
  child's hidden difficulty on the benchmark's scale, so online calibration lands near the rewriter's aim.
  A text it was never shown gets a reply without an answer (no signal: never a guessed grade).

The marker is explicit: an endpoint whose ``base_url`` is ``simulated://demo`` (:data:`SIMULATED_URL`) is this
server; the client resolves it to the live ``http://127.0.0.1:PORT/v1`` when it first connects
(:func:`resolve`). One server per process, shared by reference count (:func:`acquire` / :func:`release`):
the app holds it while a workspace with simulated endpoints is open, a session or a CLI command for as long
as it runs. Nothing here reads or writes the store.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from benchloupe.engine.benchfill_types import FillItem
from benchloupe.hints import Alt, say

SCHEME = "simulated://"
SIMULATED_URL = "simulated://demo"
REWRITER, JUDGE = "simulated-rewriter", "simulated-judge"
LABEL = "simulated"
PULL, NOISE, WRONG_RATE = 0.8, 0.03, 0.08
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MAX_BODY = 8 << 20


def is_simulated(url: object) -> bool:
    """Whether a configured base URL names the built-in simulated endpoint."""
    return isinstance(url, str) and url.strip().lower().startswith(SCHEME)


def uses_simulated(endpoints: dict) -> bool:
    """Whether any role of an endpoints dict (jobs.fill.get_endpoints) is the simulated endpoint."""
    roles = [endpoints.get("rewriter"), endpoints.get("judge"), *(endpoints.get("annotators") or [])]
    return any(is_simulated((r or {}).get("base_url")) for r in roles)


def simulated_roles(endpoints: dict) -> tuple[list[str], list[str]]:
    """(roles on the simulated endpoint, roles elsewhere) of an endpoints dict, in words: "rewriter", "judge",
    "annotator NAME" (issue 32: ``fill`` called every endpoint simulated when the judge was a real URL)."""
    sim, real = [], []
    for role in ("rewriter", "judge"):
        e = endpoints.get(role)
        if e:
            (sim if is_simulated(e.get("base_url")) else real).append(role)
    for a in endpoints.get("annotators") or []:
        (sim if is_simulated(a.get("base_url")) else real).append(f"annotator {a.get('name')}")
    return sim, real


def demo_endpoints(annotators: list[tuple[str, int]]) -> dict:
    """The demo workspace's endpoints: simulated rewriter and judge, and (name, trials) simulated annotators."""
    common = {"base_url": SIMULATED_URL, "api_key_env": "", "timeout": 10.0, "max_retries": 2, "concurrency": 8}
    return {"rewriter": {"model": REWRITER, **common}, "judge": {"model": JUDGE, **common},
            "annotators": [{"name": n, "model": n, "trials": t, **common} for n, t in annotators]}


# ------------------------------------------------------------------------------------------------ the world

@dataclass
class _Truth:
    key: int  # the problem it belongs to
    z: float
    answer: str
    choices: tuple[str, ...] = ()


@dataclass
class _Bench:
    thetas: dict[str, float]
    raw_min: float
    raw_max: float
    guessing: float


_PREFIX = 16  # texts are filed by their first characters, then matched as a prefix of the prompt


def _norm(text: str) -> str:
    return " ".join(text.split())


_MATH = [
    (re.compile(r"^(?P<label>\S+\.) Compute \d+ \+ \d+ × \d+\.$"),
     lambda x, y, z: (f"Compute {x} + {y} × {z}.", x + y * z)),
    (re.compile(r"^(?P<label>\S+\.) Solve for n: \d+n \+ \d+ = \d+\.$"),
     lambda x, y, z: (f"Solve for n: {y}n + {x} = {y * z + x}.", z)),
    (re.compile(r"^(?P<label>\S+\.) A rectangle is \d+ by \d+\. What is its perimeter\?$"),
     lambda x, y, z: (f"A rectangle is {x} by {y}. What is its perimeter?", 2 * (x + y))),
    (re.compile(r"^(?P<label>\S+\.) A shop sells \d+ pens a day for \d+ days and then \d+ more\. "
                r"How many pens in total\?$"),
     lambda x, y, z: (f"A shop sells {x} pens a day for {z} days and then {y} more. How many pens in total?",
                      x * z + y)),
]
_OPTION = re.compile(r"^([A-Z])[).]\s+(.*)$")


class SimulatedWorld:
    """The hidden truth behind the simulated models: items and children by text, benchmarks' abilities."""

    def __init__(self, seed: int = 0):
        self._lock = threading.Lock()
        self._rng = np.random.default_rng(seed)
        self._seed = seed
        self._by_first: dict[str, list[tuple[str, _Truth]]] = {}
        self._benches: dict[int, _Bench] = {}
        self._answer_rngs: dict[tuple[str, str], np.random.Generator] = {}
        self.requests = 0

    def load(self, items: list[FillItem] | tuple[FillItem, ...], annotators: dict[str, float], raw_min: float,
             raw_max: float, guessing: float = 0.0) -> int:
        """Register a session's items (normalised difficulty z) and annotators (model -> ability on the
        scale [raw_min, raw_max]); returns the key its children are filed under."""
        with self._lock:
            key = len(self._benches)
            self._benches[key] = _Bench(dict(annotators), float(raw_min), float(raw_max), float(guessing))
            for it in items:
                self._put(it.text, _Truth(key, float(it.z), str(it.answer), tuple(it.choices)))
        return key

    def _put(self, text: str, truth: _Truth) -> None:
        norm = _norm(text)
        bucket = self._by_first.setdefault(norm[:_PREFIX], [])
        bucket[:] = [(t, v) for t, v in bucket if t != norm] + [(norm, truth)]

    def find(self, text: str) -> tuple[str, _Truth] | None:
        """The registered text that *text* starts with (the longest), and its truth."""
        norm = _norm(text)
        with self._lock:
            hits = [(t, v) for k in range(1, _PREFIX + 1) for t, v in self._by_first.get(norm[:k], [])
                    if norm.startswith(t)]
        return max(hits, key=lambda h: len(h[0])) if hits else None

    def models(self) -> list[str]:
        with self._lock:
            return [REWRITER, JUDGE, *sorted({m for b in self._benches.values() for m in b.thetas})]

    # -------------------------------------------------------------------------------- the three models
    def rewrite(self, prompt: str) -> str:
        target = float(re.search(r"Target difficulty: ([\d.]+) / 10", prompt).group(1)) / 10.0
        n = int(re.search(r"Rewrite the parent into (\d+) new", prompt).group(1))
        block = re.search(r"Parent item \(difficulty ([\d.]+) / 10\):\n(.*?)\nAnswer: (.*?)\n\nRewrite", prompt,
                          re.S)
        found = self.find(block.group(2)) if block else None
        if block is None or found is None:
            return "I can only rewrite items of the demo workspace (simulated rewriter)."
        parent_text, truth = found
        want_choices = '"choices"' in prompt
        children = []
        with self._lock:
            for k in range(n):
                z = truth.z + PULL * (target - truth.z) + NOISE * float(self._rng.normal())
                child = self._child(block.group(2).strip(), truth, z, k, want_choices)
                if child is None:
                    continue
                text, answer, choices = child
                self._put(text, _Truth(truth.key, z, answer, choices))
                shown = answer
                if self._rng.random() < WRONG_RATE:
                    shown = self._wrong(answer, choices)
                d = {"question": text, "answer": shown}
                if want_choices:
                    d["choices"] = list(choices)
                children.append(d)
        return json.dumps({"children": children})

    def _child(self, parent: str, truth: _Truth, z: float, k: int, want_choices: bool):
        first, *rest = parent.splitlines()
        for pattern, make in _MATH:
            m = pattern.match(first.strip())
            if m and not rest:
                digits = 1 + int(min(max(z, 0.0), 1.0) * 3.99)
                for _ in range(20):
                    x, y, w = (int(v) for v in self._rng.integers(10 ** (digits - 1), 10**digits, size=3))
                    body, answer = make(x, y, w)
                    text = f"{m.group('label')} {body}"
                    if text != parent and self.find_unlocked(text) is None:
                        return text, str(answer), ()
                return None
        options = [m.group(2) for m in map(_OPTION.match, rest) if m]
        stem = "\n".join([first, *(ln for ln in rest if not _OPTION.match(ln))])
        choices = tuple(truth.choices) or tuple(options)
        if not choices:
            return f"{stem} (simulated variant {int(self._rng.integers(100, 1000))}-{k + 1})", truth.answer, ()
        right = self._right_option(truth, choices)
        order = [int(i) for i in self._rng.permutation(len(choices))]
        new = tuple(choices[i] for i in order)
        letter = LETTERS[new.index(right)] if right in new else truth.answer
        text = f"{stem} (simulated variant {int(self._rng.integers(100, 1000))}-{k + 1})"
        if not want_choices:
            text += "\n" + "\n".join(f"{LETTERS[i]}) {c}" for i, c in enumerate(new))
        return text, letter, new if want_choices else ()

    def find_unlocked(self, text: str):
        norm = _norm(text)
        return next((v for t, v in self._by_first.get(norm[:_PREFIX], []) if t == norm), None)

    @staticmethod
    def _right_option(truth: _Truth, choices: tuple[str, ...]) -> str:
        a = truth.answer.strip().strip("().").upper()
        if len(a) == 1 and a in LETTERS[: len(choices)]:
            return choices[LETTERS.index(a)]
        return truth.answer

    def _wrong(self, answer: str, choices: tuple[str, ...]) -> str:
        if choices:
            letters = [c for c in LETTERS[: len(choices)] if c != answer]
            return letters[int(self._rng.integers(len(letters)))] if letters else answer
        try:
            return str(int(answer) + 1)
        except ValueError:
            return answer + " (or not)"

    def judge(self, prompt: str) -> str:
        item = re.search(r"Item:\n(.*?)\nReference answer: (.*)", prompt, re.S)
        found = self.find(item.group(1)) if item else None
        if found is None:
            return json.dumps({"valid": False, "reason": "the simulated judge does not know this item"})
        given = item.group(2).strip().splitlines()[0].strip()
        ok = given.strip().upper() == found[1].answer.strip().upper()
        return json.dumps({"valid": ok, "reason": "the reference answer checks out (simulated judge)" if ok
                           else "the reference answer is wrong (simulated judge)"})

    def grade(self, prompt: str) -> str:
        m = re.search(r"Reference answer: (.*?)\n\nResponse to grade:\n(.*?)\n\nIs the response", prompt, re.S)
        ok = bool(m) and m.group(1).strip().lower() in m.group(2).lower()
        return json.dumps({"correct": ok})

    def answer(self, model: str, prompt: str) -> str | None:
        """An annotator's reply, or None for a model no session registered."""
        found = self.find(prompt)
        with self._lock:
            bench = self._benches.get(found[1].key) if found else None
            if found is None or bench is None:
                known = any(model in b.thetas for b in self._benches.values())
                return "I have not seen this item (simulated annotator)." if known else None
            theta = bench.thetas.get(model)
            if theta is None:
                return None
            text, truth = found
            rng = self._answer_rngs.get((text, model))
            if rng is None:
                seed = [self._seed, sum(map(ord, text)) % 2**31, sum(map(ord, model)), len(text), len(model)]
                rng = self._answer_rngs[(text, model)] = np.random.default_rng(seed)
            b = bench.raw_min + truth.z * (bench.raw_max - bench.raw_min)
            p = bench.guessing + (1.0 - bench.guessing) * 1.0 / (1.0 + math.exp(-(theta - b)))
            correct = rng.random() < p
            given = truth.answer if correct else self._wrong(truth.answer, truth.choices)
        return f"Working it out (simulated annotator).\nAnswer: {given}"


# ------------------------------------------------------------------------------------------------ the server

class SimulatedServer:
    """The HTTP server over one :class:`SimulatedWorld`; ``base_url`` is ``http://127.0.0.1:PORT/v1``."""

    def __init__(self, world: SimulatedWorld | None = None):
        self.world = world or SimulatedWorld()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> SimulatedServer:
        sim = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet: the app owns the terminal
                pass

            def _send(self, code: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):  # noqa: N802
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": LABEL} for m in sim.world.models()]})
                else:
                    self._send(404, _error(f"no route {self.path}"))

            def do_POST(self):  # noqa: N802
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    length = -1
                if not 0 <= length <= MAX_BODY:
                    self.close_connection = True
                    self._send(400, _error(f"Content-Length must be 0..{MAX_BODY} bytes"))
                    return
                self._send(*sim.handle(self.path, self.rfile.read(length)))

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

            def handle_error(self, request, client_address):  # never a traceback on the app's terminal
                pass

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="simulated-endpoint", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def handle(self, path: str, body: bytes) -> tuple[int, dict]:
        if not path.rstrip("/").endswith("/chat/completions"):
            return 404, _error(f"no route {path}")
        try:
            req = json.loads(body)
            model = str(req["model"])
            prompt = req["messages"][-1]["content"]
            if not isinstance(prompt, str):
                raise TypeError("content")
        except (ValueError, KeyError, IndexError, TypeError):
            return 400, _error("the body must be a chat completion request (model, messages)")
        self.world.requests += 1
        try:
            if model == REWRITER:
                content = self.world.rewrite(prompt)
            elif model == JUDGE:
                content = self.world.grade(prompt) if "Response to grade:" in prompt else self.world.judge(prompt)
            else:
                content = self.world.answer(model, prompt)
        except (AttributeError, ValueError):  # a prompt that is not the packaged template's
            content = "The simulated models read only benchloupe's own prompt templates."
        if content is None:
            return 404, _error(f"The model `{model}` does not exist at the simulated endpoint")
        return 200, {"id": f"chatcmpl-sim-{self.world.requests}", "object": "chat.completion",
                     "created": int(time.time()), "model": model, "system_fingerprint": LABEL,
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(content) // 4,
                               "total_tokens": (len(prompt) + len(content)) // 4}}


def _error(message: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


# ------------------------------------------------------------------------------------------------ one per process

_LOCK = threading.Lock()
_SERVER: SimulatedServer | None = None
_USERS = 0


def acquire() -> SimulatedServer:
    """The process's simulated server, started on first use; every acquire needs its :func:`release`."""
    global _SERVER, _USERS
    with _LOCK:
        if _SERVER is None:
            _SERVER = SimulatedServer().start()
        _USERS += 1
        return _SERVER


def release() -> None:
    """Drop one hold; the last one stops the server (its port closes)."""
    global _SERVER, _USERS
    with _LOCK:
        _USERS = max(0, _USERS - 1)
        if _USERS == 0 and _SERVER is not None:
            _SERVER.stop()
            _SERVER = None


@contextmanager
def serving() -> Iterator[SimulatedServer]:
    server = acquire()
    try:
        yield server
    finally:
        release()


def current() -> SimulatedServer | None:
    with _LOCK:
        return _SERVER


def resolve(url: str) -> str:
    """The live http URL for ``simulated://...``; other URLs as they are. Raises LookupError when the
    simulated server is not running."""
    if not is_simulated(url):
        return url
    server = current()
    if server is None:
        raise LookupError(say("the simulated endpoint is not running (it runs while ",
                              Alt("`benchloupe fill`", "a BenchFill session"), " or the app has a demo session open)"))
    return server.base_url
