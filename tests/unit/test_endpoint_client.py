"""Issue 12, "The endpoint client, as the ecosystem expects it": OPENAI_BASE_URL / OPENAI_API_KEY as defaults,
a per-user TOML endpoints file shared by every database with per-database overrides, Retry-After as seconds
or an HTTP date and retry-after-ms, jittered backoff, JSON mode where the server supports it. Against the real
local OpenAI-compatible server (tests/fake_llm.py) with the real `openai` client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tomllib
from email.utils import formatdate

import pytest

from benchloupe.engine.benchfill import BenchFillConfig
from benchloupe.engine.benchfill_types import LLMFailure
from benchloupe.jobs import fill
from benchloupe.prompts import endpoints_file
from benchloupe.prompts.client import ChatClient, EndpointConfig, retry_after_seconds
from benchloupe.store import fill as fillstore
from benchloupe.store.db import connect
from tests.fake_llm import KEY, fake_llm  # noqa: F401
from tests.fill_world import store_world

MSG = [{"role": "user", "content": "Item:\n[Q-0] What is 1 + 1?\nReference answer: 2"}]


def _cli(db, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchloupe", *args, "--db", str(db)], capture_output=True,
                          text=True, timeout=600, env={**os.environ})


def test_openai_env_vars_are_the_defaults(fake_llm, monkeypatch):  # noqa: F811
    fake_llm.add_item(0.0)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    reply = ChatClient(EndpointConfig(None, "judge")).chat(MSG, "t")
    assert reply.calls[0].status == "ok" and reply.calls[0].endpoint == fake_llm.base_url
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(LLMFailure, match=r"set its base_url .* or \$OPENAI_BASE_URL"):
        ChatClient(EndpointConfig(None, "judge")).chat(MSG, "t")


def test_a_session_from_env_defaults_and_the_user_file(fake_llm, tmp_path, monkeypatch):  # noqa: F811
    """Endpoints set once with --user serve every database; no --base-url / --api-key-env: $OPENAI_*."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    db = tmp_path / "a.db"
    bench = store_world(fake_llm, db)
    for role in ("rewriter", "judge"):
        r = _cli(db, "endpoints", "set", role, "--model", role, "--user")
        assert r.returncode == 0, r.stderr
    for j in range(4):
        r = _cli(db, "endpoints", "set", "annotator", "--name", f"annot-{j}", "--trials", "2", "--user")
        assert r.returncode == 0, r.stderr
    path = endpoints_file.path()
    assert path == tmp_path / "xdg-config" / "benchloupe" / "endpoints.toml"
    data = tomllib.loads(path.read_text())
    assert data["rewriter"] == {"model": "rewriter"} and len(data["annotators"]) == 4
    other = tmp_path / "b.db"
    connect(other).close()  # read-only commands never create a database (issue 37 #14)
    shown = json.loads(_cli(other, "endpoints", "show", "--json").stdout)
    assert shown["judge"]["model"] == "judge" and shown["judge"]["source"] == "user"
    # a database's own setting overrides the file for that database only
    r = _cli(other, "endpoints", "set", "judge", "--model", "judge-2", "--base-url", "http://127.0.0.1:9/v1")
    assert r.returncode == 0, r.stderr
    assert json.loads(_cli(other, "endpoints", "show", "--json").stdout)["judge"]["source"] == "database"
    assert json.loads(_cli(db, "endpoints", "show", "--json").stdout)["judge"]["model"] == "judge"
    sid = None
    try:
        sid = fill.start_fill(db, bench, config=BenchFillConfig(max_rounds=1))
    except fill.FillStopped as exc:
        assert exc.state == "no_valid_child", exc
        sid = exc.session_id
    conn = connect(db)
    calls = fillstore.llm_calls(conn, sid)
    conn.close()
    assert len(calls) and (calls["base_url"] == fake_llm.base_url).all() and (calls["status"] == "ok").all()


def test_a_malformed_user_file_is_one_line(tmp_path):
    path = endpoints_file.path()
    path.parent.mkdir(parents=True)
    path.write_text("[rewriter\nmodel = 1\n")
    connect(tmp_path / "c.db").close()  # read-only commands never create a database (issue 37 #14)
    r = _cli(tmp_path / "c.db", "endpoints", "show")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert str(path) in r.stderr and "cannot read the endpoints file" in r.stderr


def test_user_file_round_trips_hostile_text():
    eps = {"rewriter": {"model": 'q"uote\\back\x1bslash\n', "base_url": "http://h/v1", "timeout": 2.5,
                        "json_mode": True, "max_retries": 3},
           "judge": None, "annotators": [{"name": "Llama [3]", "model": "m", "trials": 4}]}
    endpoints_file.save(eps)
    back = endpoints_file.load()
    assert back["rewriter"] == eps["rewriter"] and back["annotators"] == eps["annotators"] and back["judge"] is None


def test_retry_after_seconds_http_date_and_ms():
    now = time.time()
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert 4.0 <= retry_after_seconds({"retry-after": formatdate(now + 5, usegmt=True)}, now) <= 5.0
    assert retry_after_seconds({"retry-after": formatdate(now - 60, usegmt=True)}, now) == 0.0
    for bad in ({"retry-after": "soon"}, {"retry-after": "nan"}, {}, None):
        assert retry_after_seconds(bad) is None


@pytest.mark.parametrize("fault,lo,hi", [("429date", 0.9, 2.01), ("429ms", 0.25, 0.3)])
def test_the_server_asked_wait_is_honoured(fake_llm, fault, lo, hi):  # noqa: F811
    fake_llm.add_item(0.0)
    fake_llm.script("judge", fault)
    waits: list[float] = []
    client = ChatClient(EndpointConfig(fake_llm.base_url, "judge", api_key=KEY, backoff_initial=0.001),
                        sleep=waits.append)
    reply = client.chat(MSG, "t")
    assert [c.status for c in reply.calls] == ["http_429", "ok"]
    assert len(waits) == 1 and lo <= waits[0] <= hi, waits


def test_json_mode_is_asked_for_the_rewriter_and_judge_only(fake_llm):  # noqa: F811
    from benchloupe.engine.benchfill_types import ChildDraft, FillItem
    from benchloupe.prompts.llm import LLMJudge

    fake_llm.add_item(0.0)
    plain = ChatClient(EndpointConfig(fake_llm.base_url, "judge", api_key=KEY))
    LLMJudge(plain).verify(ChildDraft("[Q-0] x", "1"), FillItem("p", "p", "1", 0.5), "t")
    assert fake_llm.response_formats == []
    client = ChatClient(EndpointConfig(fake_llm.base_url, "judge", api_key=KEY, json_mode=True))
    LLMJudge(client).verify(ChildDraft("[Q-0] x", "1"), FillItem("p", "p", "1", 0.5), "t")
    client.chat(MSG, "an annotator's call")  # free text: never JSON mode
    assert fake_llm.response_formats == [("judge", {"type": "json_object"})]
    fake_llm.json_mode_supported = False
    with pytest.raises(LLMFailure, match="does not support JSON mode .* --no-json-mode") as err:
        LLMJudge(client).verify(ChildDraft("[Q-0] x", "1"), FillItem("p", "p", "1", 0.5), "t")
    assert "\n" not in err.value.message and len(err.value.calls) == 1  # not retried


def test_json_mode_from_the_cli(tmp_path):
    db = tmp_path / "j.db"
    r = _cli(db, "endpoints", "set", "rewriter", "--model", "m", "--json-mode")
    assert r.returncode == 0 and "JSON mode" in r.stdout, r.stderr
    eps = json.loads(_cli(db, "endpoints", "show", "--json").stdout)
    assert eps["rewriter"]["json_mode"] is True
    _cli(db, "endpoints", "set", "rewriter", "--model", "m", "--no-json-mode")
    assert json.loads(_cli(db, "endpoints", "show", "--json").stdout)["rewriter"]["json_mode"] is False
