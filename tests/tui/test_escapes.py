"""No control sequence from data reaches the terminal (issue 10 #2): the real app runs in a pseudo-terminal at
80x24 over a benchmark whose benchmark name, model names, item keys and item text hold ESC sequences (title and
clipboard OSC writes, a clear-screen CSI, backspaces), is driven by keys through Benchmarks, Items, an item panel
and Models, and every byte it writes to the terminal is read back: the sequences from data are absent and their
escaped forms are on screen."""

from __future__ import annotations

import os
import select
import signal
import struct
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.fake_llm import fake_llm  # noqa: F401 - the fixture

pty = pytest.importorskip("pty")
fcntl = pytest.importorskip("fcntl")
termios = pytest.importorskip("termios")

TITLE = "\x1b]0;PWNED\x07"
CLIP = "\x1b]52;c;UFdORUQ=\x07"
CLEAR = "zap\x1b[2J"
BACKSPACE = "ok\x08\x08\x08BAD"


def hostile_db(path: Path) -> str:
    from benchloupe.store.db import connect
    from benchloupe.store.importers.base import ParsedImport
    from benchloupe.store.writer import write_import

    bench = "ev" + TITLE
    items = pd.DataFrame({"key": ["k" + CLIP, "k2"], "text": [f"{CLEAR} then {BACKSPACE} {TITLE}", "plain"],
                          "answer": ["a" + CLEAR, "1"], "group": ["g", "g"]})
    models = pd.DataFrame({"name": ["m1" + TITLE, "m2" + CLIP, "m3" + BACKSPACE]})
    correct = np.array([[1, 0], [0, 1], [1, 1]], np.int8)
    conn = connect(path)
    try:
        write_import(conn, ParsedImport("plain", "static", items, models, correct=correct, source="test"), fmt="test")
        # imports refuse such a name now (issue 37 #11); a database from before the rule can hold it
        conn.execute("UPDATE benchmarks SET name = ? WHERE name = 'plain'", (bench,))
        conn.commit()
    finally:
        conn.close()
    return bench


class Terminal:
    """The app in a pseudo-terminal: keys in, every output byte kept."""

    def __init__(self, argv: list[str], env: dict, rows: int = 24, cols: int = 80) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the app
            os.execvpe(argv[0], argv, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.out = bytearray()

    def read(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if ready:
                try:
                    self.out += os.read(self.fd, 65536)
                except OSError:
                    return

    def wait_for(self, needle: bytes, seconds: float = 60) -> bool:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if needle in self.out:
                return True
            self.read(0.2)
        return needle in self.out

    def press(self, keys: str, settle: float = 1.0) -> None:
        for k in keys:
            os.write(self.fd, k.encode())
            self.read(0.15)
        self.read(settle)

    def close(self) -> None:
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        self.read(0.5)
        os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_no_escape_sequence_from_data_reaches_the_terminal(tmp_path):
    db = tmp_path / "hostile.db"
    hostile_db(db)
    env = {**os.environ, "TERM": "xterm-256color", "XDG_DATA_HOME": str(tmp_path), "COLUMNS": "80", "LINES": "24"}
    term = Terminal([sys.executable, "-m", "benchloupe", "open", str(db)], env)
    try:
        assert term.wait_for(b"Bench", 90), term.out[-2000:]
        term.read(2.0)
        term.press("\r", 3.0)   # open the benchmark: Items
        term.press("\r", 3.0)   # the first item's panel (the hostile text)
        term.press("\x1b", 1.5)
        term.press("3", 3.0)    # Models
        term.press("q", 1.0)
    finally:
        term.close()
    out = bytes(term.out)
    for raw in (TITLE, CLIP, CLEAR, BACKSPACE):
        assert raw.encode() not in out, f"{raw!r} reached the terminal"
    assert b"\x1b]0;" not in out and b"\x1b]52;" not in out, "an OSC write from data reached the terminal"
    assert b"\x08" not in out
    # the data was drawn, escaped (in panels Rich itself drops BEL and BS; ESC is shown as \x1b)
    for shown in (b"m1\\x1b]0;PWNED", b"m3ok\\x08\\x08", b"zap\\x1b[2J", b"ev\\x1b]0;PW"):
        assert shown in out, f"{shown!r} not drawn"


JUDGED = "\x1b]0;JUDGED\x07"
WIPE = "\x1b[2Jwiped"


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
@pytest.mark.timeout(300, method="thread")
def test_no_escape_sequence_from_an_llm_reply_reaches_the_terminal(tmp_path, monkeypatch, fake_llm):  # noqa: F811
    """A BenchFill session run by the real job against the local OpenAI-compatible server whose judge puts
    ESC sequences and markup in every reason; the review card on 8 Fill and the edit dialog draw it escaped.
    (Rewrites holding control characters never reach review: the engine rejects them, test_benchfill_faults.)"""
    from benchloupe.engine.benchfill import BenchFillConfig
    from benchloupe.jobs import fill
    from tests.fill_world import configure_endpoints, store_world

    db = tmp_path / "fill.db"
    bench = store_world(fake_llm, db)
    configure_endpoints(fake_llm, db, monkeypatch)
    fake_llm.always["judge"] = "ctrl_reason"
    sid = fill.start_fill(db, bench, fill.FillOptions(gap=1), config=BenchFillConfig(max_rounds=2))
    from benchloupe.store import fill as fillstore
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        cands = fillstore.candidates(conn, sid)
    finally:
        conn.close()
    assert len(cands) and cands["verdict"].str.contains(JUDGED, regex=False).all(), "the reason is stored as sent"
    env = {**os.environ, "TERM": "xterm-256color", "XDG_DATA_HOME": str(tmp_path), "COLUMNS": "80", "LINES": "24"}
    term = Terminal([sys.executable, "-m", "benchloupe", "open", str(db)], env)
    try:
        assert term.wait_for(b"Bench", 90), term.out[-2000:]
        term.read(2.0)
        term.press("8", 4.0)    # the review queue: the first proposal's card with the judge's reason
        term.press("e", 2.0)    # the edit dialog over it
        term.press("\x1b", 1.0)
        term.press("q", 1.0)
    finally:
        term.close()
    out = bytes(term.out)
    for raw in (JUDGED, WIPE):
        assert raw.encode() not in out, f"{raw!r} reached the terminal"
    assert b"\x1b]0;JUDGED" not in out
    assert b"\\x1b]0;JUDGED" in out and b"[bold]sure[/bold]" in out, "the reason was not drawn, escaped and literal"
