"""``anomalies --json`` prints the unexpected cells the job computed, not a read-back of the flags it has just
stored (issue 26: 0.8 s of reading 210,060 flags back at 5,000 x 14,000), and a long list of them is written a
column at a time from the job's arrays. The output must stay what the read-back printed, byte for byte: every
test here builds the old output from the store (``curation.flag_cells``, the rows the command used to print) and
compares the whole text, on static, binomial, arena, joint and preference workspaces, with hostile names, with
fewer and more than ``LONG_LIST`` cells."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from benchloupe.cli import output
from benchloupe.cli.main import main
from benchloupe.store import curation
from benchloupe.store.db import connect
from benchloupe.store.importers.base import ParsedImport
from benchloupe.store.writer import write_import
from tests.hostile import default_sigint

FIELDS = ("source", "residual", "expected_p", "observed")
HOSTILE = ['m"%s', "a\x1b[31mred", "bidi\u202eevil", "line\u2028sep", "tab\tnew\nline", "é%%d", "nul\x7fdel", "\\x00"]


def _run(capsys, db, *argv) -> str:
    capsys.readouterr()
    assert main([*argv, "--db", str(db), "--json"]) == 0
    return capsys.readouterr().out


def _old_text(db, printed: str) -> str:
    """What the command printed before: its own payload with the unexpected cells read back from the store."""
    payload = json.loads(printed)
    conn = connect(db)
    try:
        cells = curation.flag_cells(conn, payload["run_id"], "anomaly", FIELDS)
    finally:
        conn.close()
    assert len(cells) == payload["metrics"]["candidates"]
    payload["unexpected_cells"] = cells
    return output.json_text(payload) + "\n"


def _hostile_workspace(path, *, binomial: bool = False, seed: int = 0):
    rng = np.random.default_rng(seed)
    n_models, n_items = 70, 90
    names = [HOSTILE[i % len(HOSTILE)] + f"-{i}" for i in range(n_models)]
    keys = [HOSTILE[(i + 3) % len(HOSTILE)] + f"/q{i}" for i in range(n_items)]
    theta, b = rng.normal(size=n_models), rng.normal(size=n_items)
    p = 1 / (1 + np.exp(-(theta[:, None] - b[None, :])))
    conn = connect(path)
    try:
        if binomial:
            trials = rng.integers(0, 4, size=p.shape).astype(np.int32)  # 0 trials: missing
            succ = rng.binomial(trials, p).astype(np.int32)
            parsed = ParsedImport("hostile", "static", pd.DataFrame({"key": keys}), pd.DataFrame({"name": names}),
                                  successes=succ, trials=trials)
        else:
            y = (rng.random(p.shape) < p).astype(np.int8)
            y[rng.random(p.shape) < 0.1] = -1
            parsed = ParsedImport("hostile", "static", pd.DataFrame({"key": keys}), pd.DataFrame({"name": names}),
                                  correct=y)
        write_import(conn, parsed, fmt="test")
    finally:
        conn.close()


@pytest.mark.parametrize("argv", [
    ("anomalies", "demo-math"),  # a short list: indented as json.dumps(indent=2)
    ("anomalies", "demo-chem", "--threshold", "1.5"),  # more than LONG_LIST cells: one row per line
    ("anomalies", "demo-math", "--arena", "demo-arena", "--threshold", "1.0"),  # joint: static and arena cells
    ("anomalies", "demo-arena", "--threshold", "0.5"),  # arena only
    ("anomalies", "demo-arena"),  # no cell at all
])
def test_anomalies_json_is_the_read_back_text_on_the_demo(demo_db, capsys, argv):
    text = _run(capsys, demo_db, *argv)
    assert text == _old_text(demo_db, text)


@pytest.mark.parametrize("binomial", [False, True])
@pytest.mark.parametrize("threshold", ["3.5", "0.8"])
def test_anomalies_json_is_the_read_back_text_with_hostile_names(tmp_path, capsys, binomial, threshold):
    db = tmp_path / "h.db"
    _hostile_workspace(db, binomial=binomial)
    text = _run(capsys, db, "anomalies", "hostile", "--threshold", threshold)
    assert text == _old_text(db, text)
    cells = json.loads(text)["unexpected_cells"]
    assert cells and {c["model"] for c in cells} <= {HOSTILE[i % len(HOSTILE)] + f"-{i}" for i in range(70)}
    assert not any(ch in text for ch in "\x1b\x7f\u202e\u2028")  # escaped for the terminal, same JSON value


def test_anomalies_text_lists_the_same_first_cells(demo_db, capsys):
    """Without --json the table of the first 30 cells is the one the read-back rows made."""
    text = _run(capsys, demo_db, "anomalies", "demo-chem", "--threshold", "1.5")
    rid = json.loads(text)["run_id"]
    capsys.readouterr()
    assert main(["anomalies", "demo-chem", "--threshold", "1.5", "--db", str(demo_db)]) == 0
    printed = capsys.readouterr().out
    conn = connect(demo_db)
    try:
        cells = curation.flag_cells(conn, rid + 1, "anomaly", FIELDS)
    finally:
        conn.close()
    want = output.table(pd.DataFrame(cells[:30]))
    assert printed.rstrip("\n").endswith(want)


def _locked(db) -> bool:
    """Whether another connection holds the write lock (BEGIN IMMEDIATE refused at once)."""
    conn = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        conn.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_in_the_flags_write_leaves_the_database_as_it_was(tmp_path, sig):
    """Ctrl-C or SIGTERM while ``anomalies`` writes ~100,000 flags (the multi-row inserts, with the references
    checked once and foreign keys off for that transaction, issue 26): exit 130, the run cancelled with none of
    its outputs, every reference sound, and the next run writes its flags whole."""
    db = tmp_path / "big.db"
    rng = np.random.default_rng(1)
    n_models, n_items = 300, 400
    y = (rng.random((n_models, n_items)) < rng.random(n_items)).astype(np.int8)
    conn = connect(db)
    write_import(conn, ParsedImport("big", "static", pd.DataFrame({"key": [f"q{j}" for j in range(n_items)]}),
                                    pd.DataFrame({"name": [f"m{i}" for i in range(n_models)]}), correct=y),
                 fmt="test")
    conn.close()
    argv = [sys.executable, "-m", "benchloupe", "anomalies", "big", "--threshold", "0.05", "--db", str(db), "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    held, deadline = 0, time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        held = held + 1 if _locked(db) else 0
        if held >= 8:  # held over eight polls (~50 ms): the outputs' transaction (~0.4 s), not a quick write (~20 ms)
            proc.send_signal(sig)
            break
        time.sleep(0.005)
    _, err = proc.communicate(timeout=120)
    assert held >= 8, f"the write was not caught: {err}"
    assert proc.returncode == 130 and "Traceback" not in err, err
    raw = sqlite3.connect(db)
    try:
        status, = raw.execute("SELECT status FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        assert status == "cancelled"
        for table in ("flags", "run_models", "run_items", "run_artifacts"):
            assert raw.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
        assert raw.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    finally:
        raw.close()
    text = subprocess.run(argv, capture_output=True, text=True, timeout=300).stdout
    done = json.loads(text)
    conn = connect(db)
    try:
        n = conn.execute("SELECT count(*) FROM flags WHERE run_id = ?", (done["run_id"],)).fetchone()[0]
        assert n == done["metrics"]["candidates"] > 50_000
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    finally:
        conn.close()
