"""A hostile endpoint (issue 24, defect 2 and the connection-reset wording), against the real fake server
(tests/fake_llm.py, HTTP on 127.0.0.1) and the real ``openai`` client.

``Retry-After`` beyond the endpoint's cap (``retry_after_max``, default 60 s, ``endpoints set --retry-after-max``):
the call fails at once with one line that says what the server asked and what the cap is, instead of waiting
(``Retry-After: 100000`` made ``fill`` wait 240 s in silence). Within the cap the wait is announced (stderr, the
job line) before it happens. Every form of the header (seconds, an HTTP date, ``retry-after-ms``, on a 429 or a
503) and every role (rewriter, judge, annotator) is tried. A reset connection is named as a reset.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from benchloupe.engine.benchfill_types import LLMFailure
from benchloupe.prompts.client import RETRY_AFTER_MAX, ChatClient, EndpointConfig
from tests.fake_llm import KEY, fake_llm  # noqa: F401
from tests.fill_world import configure_endpoints, store_world
from tests.hostile import PROGRESS, check_outcome

OVER = ["429after:61", "429after:3600", "429after:100000", "429after:1e9", "503after:100000", "429ms:100000000",
        "429date-far"]
WITHIN = ["429after:0", "429after:1", "429ms:10", "503after:0"]


def _client(fake, *, cap: float = RETRY_AFTER_MAX, retries: int = 2, notices: list | None = None):
    if not fake.truth:
        fake.add_item(0.0)  # which the judge checks
    ep = EndpointConfig(fake.base_url, "judge", api_key_env=None, api_key=KEY, timeout=5, max_retries=retries,
                        retry_after_max=cap)
    slept: list[float] = []
    return ChatClient(ep, sleep=slept.append, notify=None if notices is None else notices.append), slept


@pytest.mark.parametrize("fault", OVER)
def test_retry_after_beyond_the_cap_fails_at_once(fake_llm, fault):  # noqa: F811
    fake_llm.scripts["judge"].extend([fault] * 3)
    client, slept = _client(fake_llm)
    with pytest.raises(LLMFailure) as failure:
        client.chat([{"role": "user", "content": "Is [Q-0] valid?\nReference answer: 1"}], "judge")
    msg = failure.value.message
    assert "asks to wait" in msg and "more than this endpoint waits (60 s" in msg and "--retry-after-max" in msg, msg
    assert "\n" not in msg
    assert slept == []  # no wait at all
    assert [m for m, _ in fake_llm.requests] == ["judge"]  # and no second request


@pytest.mark.parametrize("fault", WITHIN)
def test_retry_after_within_the_cap_is_waited_and_said(fake_llm, fault):  # noqa: F811
    fake_llm.scripts["judge"].append(fault)
    notices: list[str] = []
    client, slept = _client(fake_llm, notices=notices)
    reply = client.chat([{"role": "user", "content": "Is [Q-0] valid?\nReference answer: 1"}], "judge")
    assert reply.text and len(reply.calls) == 2
    assert len(slept) == 1 and slept[0] >= float(fault.split(":")[1]) / (1000 if "ms" in fault else 1) - 1e-9
    if slept[0] >= 1.0:  # a wait of a second or more is announced, with what the server asked
        assert len(notices) == 1 and "waiting" in notices[0] and "Retry-After" in notices[0], notices


def test_the_cap_is_configurable(fake_llm):  # noqa: F811
    fake_llm.scripts["judge"].append("429after:90")
    client, slept = _client(fake_llm, cap=120)
    client.chat([{"role": "user", "content": "Is [Q-0] valid?\nReference answer: 1"}], "judge")
    assert slept and slept[0] >= 90
    fake_llm.scripts["judge"].append("429after:5")
    client, slept = _client(fake_llm, cap=2)
    with pytest.raises(LLMFailure, match=r"asks to wait 5 s .*\(2 s"):
        client.chat([{"role": "user", "content": "Is [Q-0] valid?\nReference answer: 1"}], "judge")


def test_a_reset_connection_is_named(fake_llm):  # noqa: F811
    fake_llm.always["judge"] = "reset"
    client, _ = _client(fake_llm, retries=1)
    with pytest.raises(LLMFailure) as failure:
        client.chat([{"role": "user", "content": "Is [Q-0] valid?\nReference answer: 1"}], "judge")
    assert "the server reset the connection" in failure.value.message and "timeout" not in failure.value.message


# ----------------------------------------------------------------------------------------------- the session

def _cli(db, *args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchloupe", *args, "--db", str(db)], capture_output=True, text=True,
                          timeout=300, env=env or {**os.environ})


@pytest.mark.parametrize("role", ["rewriter", "judge", "annot-0"])
@pytest.mark.parametrize("fault", ["429after:100000", "429date-far", "503after:3600"])
def test_fill_fails_with_one_line_when_the_server_asks_too_much(fake_llm, tmp_path, monkeypatch, role, fault):  # noqa: F811
    """The issue's case, every role: the session ends failed (not ``running``) with the reason in one line."""
    db = tmp_path / "f.db"
    bench = store_world(fake_llm, db)
    configure_endpoints(fake_llm, db, monkeypatch, n_annotators=4)
    fake_llm.always[role] = fault
    r = _cli(db, "fill", bench)
    err = PROGRESS.sub("", r.stderr)
    check_outcome((role, fault), r.returncode, r.stdout, err)
    assert r.returncode == 1 and "asks to wait" in err and "--retry-after-max" in err, err
    conn = sqlite3.connect(db)
    states = [s for (s,) in conn.execute("SELECT state FROM fill_sessions")]
    conn.close()
    assert states == ["failed"], states
    if not role.startswith("annot"):  # the rewriter and the judge are called one at a time: one request, no retry
        assert sum(1 for m, _ in fake_llm.requests if m == role) == 1
    # (annotators are called in parallel; before the fix every one of their calls waited 100,000 s per retry)


@pytest.mark.slow
def test_fill_announces_a_wait_on_stderr(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    db = tmp_path / "f.db"
    bench = store_world(fake_llm, db)
    configure_endpoints(fake_llm, db, monkeypatch, n_annotators=4)
    fake_llm.scripts["judge"].append("429after:1")
    r = _cli(db, "fill", bench)
    notes = [ln for ln in r.stderr.splitlines() if "waiting" in ln]
    assert notes and "Retry-After 1 s" in notes[0] and "judge" in notes[0], r.stderr


def test_endpoints_set_takes_the_cap(tmp_path):
    db = tmp_path / "e.db"
    r = _cli(db, "endpoints", "set", "judge", "--model", "j", "--base-url", "http://127.0.0.1:9/v1",
             "--retry-after-max", "5", "--json")
    assert r.returncode == 0, r.stderr
    assert '"retry_after_max": 5.0' in r.stdout
    for bad in ("-1", "nan", "1e309", "100000"):
        r = _cli(db, "endpoints", "set", "judge", "--model", "j", "--retry-after-max", bad)
        assert r.returncode == 1 and "--retry-after-max" in r.stderr and r.stderr.count("\n") == 1, r.stderr
