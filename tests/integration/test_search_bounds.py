"""Search bounded and interruptible (issue 37, point 4).

One word repeated 500/1,000/2,000/4,000 times took 0.6/2.2/8.3/32.9 s (FTS5's cost grows with the square of the
terms), a 15,000-term ``--raw`` OR query ran past 60 s, and SIGINT or SIGTERM during a long search were ignored
for more than 20 s (the query runs in SQLite's C code, where Python runs no signal handler). Now repeated plain
words count once, a query over the stated maximum is one line, and a signal ends a long search with 130.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchloupe.store.db import connect
from benchloupe.store.importers.base import ParsedImport
from benchloupe.store.search import MAX_QUERY_CHARS, max_words, search_items
from benchloupe.store.writer import write_import
from tests.hostile import check_outcome, default_sigint, dump, run_cli

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["alpha", "beta", "gamma", "delta", "kappa", "sigma", "omega", "theta"]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """3,000 items whose text is 40 words of an 8-word vocabulary: every word is in nearly every item."""
    path = tmp_path_factory.mktemp("search") / "s.db"
    rng = np.random.default_rng(0)
    n = 3000
    texts = [" ".join(rng.choice(WORDS, size=40)) for _ in range(n)]
    items = pd.DataFrame({"key": [f"q{j:05d}" for j in range(n)], "text": texts})
    conn = connect(path)
    write_import(conn, ParsedImport("words", "static", items, pd.DataFrame({"name": ["m"]}),
                                    correct=np.ones((1, n), np.int8), source="test"), fmt="test")
    conn.close()
    return path


@pytest.mark.parametrize("repeats", [2, 500, 4000])
def test_a_repeated_word_is_the_word_once(db, repeats):
    conn = connect(db)
    try:
        once = search_items(conn, "gamma", limit=20)
        assert search_items(conn, " ".join(["gamma", "GAMMA"] * (repeats // 2)), limit=20) == once
    finally:
        conn.close()


@pytest.mark.parametrize("mode,query", [
    ("plain", " ".join(f"w{k}" for k in range(max_words() + 1))),  # distinct words, one over
    ("raw", " OR ".join(WORDS * 9)),  # 72 terms of FTS5 syntax
    ("raw", " OR ".join(f"w{k}" for k in range(15000))),  # the 15,000-term OR query
    ("plain", "gamma " * (MAX_QUERY_CHARS // 6 + 1)),  # repeated words, but past the character maximum
])
def test_a_query_over_the_maximum_is_one_line_and_changes_nothing(db, mode, query):
    before = dump(db)
    rc, out, err = run_cli(["search", *(["--raw"] if mode == "raw" else []), query, "--db", db])
    check_outcome(mode, rc, out, err, before, dump(db), expect="fail")
    assert "at most 64 words and 100,000 characters" in err and "fewer words" in err


def test_a_query_at_the_maximum_runs(db):
    rc, out, err = run_cli(["search", *WORDS * 8, "--db", db, "--limit", "3"])  # 64 words, 8 distinct
    check_outcome("max", rc, out, err, expect="ok")
    rc, out, err = run_cli(["search", "--raw", " OR ".join(WORDS * 8), "--db", db, "--limit", "3"])
    check_outcome("raw max", rc, out, err, expect="ok")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads a process's CPU time from /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_a_long_search_with_130(db, signum):
    """A raw query of 400 repeated terms (the maximum raised for the test) runs for a minute or more here (its FTS5
    cost grows with the square of the terms); the signal, sent once the process has spent 1.5 s of CPU (past its
    start-up, inside the query), ends it with 130 and one line. Ignored, the search would finish and exit 0."""
    env = {**os.environ, "BENCHLOUPE_SEARCH_MAX_WORDS": "100000", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "benchloupe", "search", "--raw", " ".join(["gamma"] * 400),
                             "--db", str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=default_sigint)  # a suite started in the background passes SIGINT ignored
    try:
        while proc.poll() is None and _cpu_seconds(proc.pid) < 1.5:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1]
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert err == "benchloupe: interrupted\n" and out == ""


def test_the_help_states_the_maximum():
    rc, out, err = run_cli(["search", "--help"])
    assert rc == 0 and f"at most {max_words()} words" in " ".join(out.split())
    assert f"{MAX_QUERY_CHARS:,} characters" in " ".join(out.split())
