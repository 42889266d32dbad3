"""Issue 37 #7 and the endpoint cases of #15, against a real hostile server on 127.0.0.1 (tests/hostile_http.py)
and the real ``openai`` client: every reply bomb (gzip, deflate, many gzip members, a 1.2 GB body announced or
not, an endless chunked body) passes the reply-size bound and every dripping server (body or headers) the
whole-request deadline, each ending in one line that names the endpoint and the bound; the per-read timeout is
set far above the deadline, so the deadline is what ends them. A redirect loop is named as one; an HTTP 200
carrying an error object keeps the server's message."""

from __future__ import annotations

import pytest

from benchloupe.engine.benchfill import BenchFillConfig
from benchloupe.engine.benchfill_types import LLMFailure
from benchloupe.jobs import fill
from benchloupe.prompts.client import ChatClient, EndpointConfig
from tests.fake_llm import fake_llm  # noqa: F401
from tests.fill_world import configure_endpoints, store_world
from tests.hostile import check_outcome, run_cli
from tests.hostile_http import QUOTA, REPLY_BOMBS, HostileServer

KEY = "bounds-test-key-0123456789"


@pytest.fixture(scope="module")
def hostile():
    server = HostileServer(expand=20_000_000, drip_s=0.25)
    yield server
    server.close()


def _chat(url: str, **kw):
    ep = EndpointConfig(url, "m", api_key=KEY, timeout=60.0, max_retries=0, **({"deadline": 1.5, "max_reply_mb": 0.05}
                                                                               | kw))
    return ChatClient(ep).chat([{"role": "user", "content": "hi"}], "t")


def test_a_normal_reply_passes_the_bounds(hostile):
    assert _chat(hostile.url("ok")).text == "fine"


@pytest.mark.parametrize("mode", REPLY_BOMBS)
def test_every_reply_bomb_ends_in_one_line_naming_the_endpoint(hostile, mode):
    with pytest.raises(LLMFailure) as failure:
        _chat(hostile.url(mode))
    msg = failure.value.message
    assert "\n" not in msg and hostile.url(mode) in msg and "'m'" in msg, msg
    bound = "deadline" if mode.startswith("drip") else "max_reply_bytes"
    assert bound in msg and ("--deadline" if bound == "deadline" else "--max-reply-mb") in msg, msg
    assert failure.value.fatal


def test_a_redirect_loop_is_named(hostile):
    with pytest.raises(LLMFailure, match="redirects in a loop"):
        _chat(hostile.url("redirect-loop"))


def test_an_error_object_in_a_200_keeps_the_servers_message(hostile):
    with pytest.raises(LLMFailure) as failure:
        _chat(hostile.url("error-200"))
    assert QUOTA in failure.value.message and "insufficient_quota" in failure.value.message


def test_the_bounds_are_stated_in_help_and_checked(tmp_path):
    rc, out, _ = run_cli(["endpoints", "--help"])
    assert rc == 0 and "--deadline SECONDS" in out and "--max-reply-mb" in out
    db = tmp_path / "b.db"
    for value in ("0", "-1", "nan", "inf", "1e309"):
        for option in ("--deadline", "--max-reply-mb"):
            rc, out, err = run_cli(["--db", db, "endpoints", "set", "judge", "--model", "j", option, value])
            check_outcome((option, value), rc, out, err, usage=True)
            assert rc in (1, 2), (option, value)
    rc, out, err = run_cli(["--db", db, "endpoints", "set", "judge", "--model", "j", "--deadline", "7",
                            "--max-reply-mb", "0.5"])
    assert rc == 0, err
    rc, out, err = run_cli(["--db", db, "--json", "endpoints", "show"])
    assert '"deadline": 7' in out and '"max_reply_mb": 0.5' in out, out


@pytest.mark.parametrize("mode", ["drip", "gzip-bomb"])
def test_fill_against_a_hostile_rewriter_stops_with_one_line(fake_llm, hostile, tmp_path, monkeypatch, mode):  # noqa: F811
    db = tmp_path / "f.db"
    bench = store_world(fake_llm, db)
    configure_endpoints(fake_llm, db, monkeypatch, n_annotators=4)
    fill.set_endpoint(db, "rewriter", model="m", base_url=hostile.url(mode), api_key_env="FAKE_LLM_KEY",
                      timeout=60.0, max_retries=0, deadline=1.5, max_reply_mb=0.05)
    with pytest.raises(fill.FillStopped) as stopped:
        fill.start_fill(db, bench, config=BenchFillConfig(max_rounds=1))
    msg = str(stopped.value)
    assert "\n" not in msg and hostile.url(mode) in msg, msg
