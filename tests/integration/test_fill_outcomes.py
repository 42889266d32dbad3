"""Issue 10 #8, #11, #12, #6, #2 and a minor one, through the CLI and the store against the local
OpenAI-compatible server: replies without signal end `no_valid_child` with the reason; `fill` exits 1 and says
why when a session ends without a proposal; the journal keeps at most N characters per text and says so;
impossible endpoint settings are refused with one line; malformed replies are one line, not a traceback; a
rewrite with control characters is journaled as received and judged invalid; coverage missed after an accept
is recomputed."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from benchloupe.engine.benchfill import BenchFillConfig
from benchloupe.engine.common import EngineError
from benchloupe.jobs import fill
from benchloupe.store import fill as fillstore
from benchloupe.store import read, runs
from benchloupe.store.db import connect
from benchloupe.store.fill import DEFAULT_MAX_STORED_CHARS
from tests.fake_llm import fake_llm  # noqa: F401
from tests.fill_world import configure_endpoints, store_world

ONE = BenchFillConfig(max_rounds=1)


def _messages(stderr: str) -> list[str]:
    """stderr without the progress lines ("[fill  1.5s] ..."), which a long session prints as it goes."""
    return [ln for ln in stderr.strip().splitlines() if not ln.startswith("[fill ")]


def _cli(db, *args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchloupe", *args, "--db", str(db)], capture_output=True, text=True,
                          timeout=600, env=env or {**os.environ})


def _setup(fake, tmp_path, monkeypatch, **kw):
    db = tmp_path / "o.db"
    bench = store_world(fake, db)
    configure_endpoints(fake, db, monkeypatch, **kw)
    return db, bench


def test_annotators_that_reply_nothing_end_no_valid_child_with_the_reason(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db, bench = _setup(fake_llm, tmp_path, monkeypatch, n_annotators=4)
    for j in range(4):
        fake_llm.always[f"annot-{j}"] = "empty_content"
    with pytest.raises(fill.FillStopped, match="no valid child with an identified difficulty") as stopped:
        fill.start_fill(db, bench, config=ONE)
    assert "no annotator reply held an answer" in str(stopped.value)
    conn = connect(db)
    s = fillstore.session(conn, stopped.value.session_id)
    assert s["state"] == "no_valid_child" and "no annotator reply held an answer" in s["message"]
    assert fillstore.candidates(conn, stopped.value.session_id).empty  # nothing reviewable
    cands = fillstore.candidates(conn, stopped.value.session_id, reviewable_only=False)
    assert cands["difficulty_norm"].isna().all()  # no 2.448 outside [0, 1]
    conn.close()
    r = _cli(db, "fill", "--resume", str(stopped.value.session_id))
    assert r.returncode == 1 and "no valid child" in r.stderr and len(_messages(r.stderr)) == 1


def test_all_at_the_bound_is_not_identified(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    """Annotators far too weak for every child: every answer wrong, b at the search bound -> not proposed."""
    db, bench = _setup(fake_llm, tmp_path, monkeypatch, n_annotators=4)
    for j in range(4):
        fake_llm.abilities[f"annot-{j}"] = -60.0
    with pytest.raises(fill.FillStopped, match="every answer was wrong"):
        fill.start_fill(db, bench, config=ONE)


def test_fill_cli_exits_1_and_says_why_when_the_key_is_missing(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db, bench = _setup(fake_llm, tmp_path, monkeypatch, n_annotators=4)
    env = {k: v for k, v in os.environ.items() if k != "FAKE_LLM_KEY"}
    r = _cli(db, "fill", bench, env=env)
    assert r.returncode == 1, r.stdout
    err = _messages(r.stderr)
    assert len(err) == 1 and "failed: no API key" in err[0] and "$FAKE_LLM_KEY" in err[0]
    assert "finished" not in r.stderr and "api_key in the endpoint config" not in r.stderr
    assert "--api-key-env" in err[0] and "Traceback" not in r.stderr


def test_journal_caps_each_text_and_says_so(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db, bench = _setup(fake_llm, tmp_path, monkeypatch, n_annotators=4)
    fake_llm.huge_chars = 300_000
    fake_llm.script("annot-0", "huge", "huge")
    cap = 4_000
    try:
        fill.start_fill(db, bench, fill.FillOptions(max_stored_chars=cap), config=ONE)
    except fill.FillStopped:
        pass
    conn = connect(db)
    sid = conn.execute("SELECT max(id) FROM fill_sessions").fetchone()[0]
    calls = fillstore.llm_calls(conn, sid)
    assert calls["response"].str.len().max() < cap + 200
    cut = calls[calls["response"].str.contains("characters received, the first 4,000 stored", regex=False)]
    assert len(cut) == 2
    ev = [p for k, p in fillstore.events(conn, sid) if k == "event" and "max_stored_chars" in p["message"]]
    assert len(ev) == 2  # one warning per cut call
    ann = [p for k, p in fillstore.events(conn, sid) if k == "annotation"]
    assert max(len(a["response"]) for a in ann) < fillstore.ANNOTATION_EXCERPT_CHARS + 200
    assert DEFAULT_MAX_STORED_CHARS >= 4096
    conn.close()


def test_a_runaway_rewrite_child_is_dropped_with_a_warning(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db, bench = _setup(fake_llm, tmp_path, monkeypatch, n_annotators=4)
    fake_llm.huge_chars = 100_000
    fake_llm.script("rewriter", "huge")
    try:
        fill.start_fill(db, bench, config=ONE)
    except fill.FillStopped:
        pass
    conn = connect(db)
    sid = conn.execute("SELECT max(id) FROM fill_sessions").fetchone()[0]
    texts = fillstore.candidates(conn, sid, reviewable_only=False)["text"]
    assert texts.str.len().max() < 1_000
    assert any("dropped (max_child_chars" in p["message"] for k, p in fillstore.events(conn, sid) if k == "event")
    conn.close()


@pytest.mark.parametrize("opt,value", [("--max-retries", "-1"), ("--timeout", "-1"), ("--timeout", "0"),
                                       ("--timeout", "inf"), ("--concurrency", "0"), ("--base-url", "localhost:8000")])
def test_impossible_endpoint_settings_are_refused(tmp_path, opt, value):
    db = tmp_path / "e.db"
    args = ["endpoints", "set", "judge", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
    r = _cli(db, *args, opt, value)
    line = r.stderr.strip()
    assert r.returncode == 1 and "\n" not in line and line.startswith("benchloupe: error: "), r.stderr
    assert opt.lstrip("-").replace("-", "_") in line.replace("-", "_") and value in line, line
    conn = connect(db)
    assert read.setting(conn, fill.ENDPOINTS_KEY, None) is None  # nothing stored
    conn.close()


@pytest.mark.parametrize("field,value,expect", [
    ("max_retries", -1, "--max-retries must be a whole number 0 or more, got -1"),
    ("timeout", 0, "--timeout (seconds per request) must be a number above 0, got 0"),
    ("timeout", float("inf"), "--timeout (seconds per request) must be a number above 0, got inf"),
    ("concurrency", 0, "--concurrency must be a whole number 1 or more, got 0"),
    ("trials", 0, "--trials must be a whole number 1 or more, got 0"),
])
def test_the_jobs_api_refuses_them_too(tmp_path, field, value, expect):
    with pytest.raises(EngineError) as err:
        fill.set_endpoint(tmp_path / "e.db", "annotator", name="m", base_url="http://127.0.0.1:9/v1",
                          **{field: value})
    assert str(err.value) == expect


def test_a_stored_impossible_setting_stops_before_the_session_runs(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db, bench = _setup(fake_llm, tmp_path, monkeypatch, n_annotators=4)
    conn = connect(db)  # an endpoint stored by an earlier version that accepted -1
    eps = read.setting(conn, fill.ENDPOINTS_KEY)
    eps["annotators"][1]["max_retries"] = -1
    conn.execute("UPDATE settings SET value = ? WHERE key = ?", (json.dumps(eps), fill.ENDPOINTS_KEY))
    conn.close()
    with pytest.raises(EngineError, match="annotator annot-1 endpoint is misconfigured: --max-retries"):
        fill.start_fill(db, bench, config=ONE)
    conn = connect(db)
    assert fillstore.sessions(conn).empty
    conn.close()


@pytest.mark.parametrize("fault,expect", [("number_content", "content was int"),
                                          ("null_choice", "choices[0] held no message")])
def test_malformed_replies_fail_the_session_with_one_line(fake_llm, tmp_path, monkeypatch, fault, expect):  # noqa: F811
    db, bench = _setup(fake_llm, tmp_path, monkeypatch, n_annotators=4)
    fake_llm.always["judge"] = fault
    r = _cli(db, "fill", bench)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    err = _messages(r.stderr)
    assert len(err) == 1 and expect in err[0] and "gave up after 4 attempts" in err[0]
    conn = connect(db)
    assert fillstore.sessions(conn)["state"].tolist() == ["failed"]
    conn.close()


def test_a_rewrite_with_control_characters_is_journaled_and_rejected(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db, bench = _setup(fake_llm, tmp_path, monkeypatch, n_annotators=4)
    fake_llm.always["rewriter"] = "ctrl"
    with pytest.raises(fill.FillStopped):
        fill.start_fill(db, bench, config=ONE)
    conn = connect(db)
    sid = conn.execute("SELECT max(id) FROM fill_sessions").fetchone()[0]
    calls = fillstore.llm_calls(conn, sid)
    rewrites = calls[calls["role"].str.endswith("/rewrite")]
    assert rewrites["response"].str.contains("\\u001b", regex=False).all()  # the JSON reply, as received
    cands = fillstore.candidates(conn, sid, reviewable_only=False)
    assert len(cands) and cands["text"].str.contains("\x1b", regex=False).all()  # stored as given
    assert (cands["valid"] == 0).all() and cands["verdict"].str.contains("control characters").all()
    conn.close()


def test_coverage_missed_after_an_accept_is_recomputed(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db, bench = _setup(fake_llm, tmp_path, monkeypatch, n_annotators=12)
    sid = fill.start_fill(db, bench, config=BenchFillConfig(max_rounds=2))
    conn = connect(db)
    queue = fillstore.candidates(conn, sid, state="pending")
    bid = read.benchmark_id(conn, bench)
    cov_before = runs.latest_run(conn, bid, ("coverage",))
    conn.close()
    # the state a kill between the accept's commit and its coverage recompute leaves behind
    fill.decide_candidate(db, int(queue["id"].iloc[0]), "accept", recompute=False)
    fill.decide_candidate(db, int(queue["id"].iloc[1]), "reject")  # the next decision notices and recomputes
    conn = connect(db)
    cov_after = runs.latest_run(conn, bid, ("coverage",))
    assert cov_after != cov_before
    assert runs.get_run(conn, cov_after)["metrics"]["n_benchfill_items"] == 1
    conn.close()


def test_the_migration_widens_the_run_status_check(tmp_path):
    """The migration that adds runners keeps an existing database readable by a plain SQLite client."""
    db = tmp_path / "s.db"
    connect(db).close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.execute("INSERT INTO runs (kind, status) VALUES ('x', 'interrupted')")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO runs (kind, status) VALUES ('x', 'bogus')")
    conn.close()
