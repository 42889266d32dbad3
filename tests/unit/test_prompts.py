"""prompts/: templates, tolerant parsing of model output, and the client against a real local server."""

from __future__ import annotations

import json
import socket

import pytest

from benchloupe.engine.benchfill_types import ChildDraft, FillItem, LLMFailure, RewriteRequest
from benchloupe.prompts.client import ChatClient, EndpointConfig
from benchloupe.prompts.llm import LLMJudge, LLMRewriter, parse_children, parse_json_loose
from benchloupe.prompts.templates import load_template, parse_template
from tests.fake_llm import KEY, REPLY_TIMEOUT_S, fake_llm  # noqa: F401

KIDS = [{"question": f"[C-{i}] What is {i} + 1?", "answer": str(i + 1)} for i in range(4)]


def test_templates_render_every_placeholder_and_keep_item_text_literal():
    for name in ("rewriter", "judge", "grading", "annotate"):
        assert load_template(name).name == name
    msgs = load_template("judge").render(question="Is ${x} {y} $z?", choices="", answer="1")
    assert msgs[0]["role"] == "system" and "Is ${x} {y} $z?" in msgs[1]["content"]
    with pytest.raises(KeyError):
        load_template("judge").render(question="q")
    with pytest.raises(ValueError):
        parse_template("bad", "no sections")


def test_template_override_folder(tmp_path, monkeypatch):
    (tmp_path / "judge.txt").write_text("=== system ===\nS\n=== user ===\nCUSTOM $question $choices $answer")
    monkeypatch.setenv("BENCHLOUPE_PROMPTS", str(tmp_path))
    assert load_template("judge").render(question="q", choices="", answer="a")[1]["content"] == "CUSTOM q  a"


@pytest.mark.parametrize("reply", [
    json.dumps({"children": KIDS}),
    "Here you go:\n```json\n" + json.dumps({"children": KIDS}) + "\n```\nEnjoy!",
    json.dumps(KIDS),
])
def test_children_parse_from_json_fenced_and_bare_lists(reply):
    assert [c.answer for c in parse_children(reply)] == ["1", "2", "3", "4"]


def test_truncated_reply_keeps_the_complete_children():
    text = json.dumps({"children": KIDS})
    cut = text[: text.index('"[C-2]')]  # cut inside the third child
    kids = parse_children(cut)
    assert [c.answer for c in kids] == ["1", "2"]
    assert parse_children("Sorry, I cannot help with that.") == []
    assert parse_json_loose('prefix {"valid": false, "reason": "x"} suffix') == {"valid": False, "reason": "x"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_retries_429_and_500_then_succeeds_and_records_every_attempt(fake_llm):  # noqa: F811
    fake_llm.script("judge", "429", "500")
    client = ChatClient(EndpointConfig(fake_llm.base_url, "judge", api_key=KEY, backoff_initial=0.001))
    fake_llm.add_item(0.0)
    reply = LLMJudge(client).verify(ChildDraft("[Q-0] x", "1"), FillItem("p", "p", "1", 0.5), "t")
    assert [c.status for c in reply.calls] == ["http_429", "http_500", "ok"]
    assert reply.calls[-1].completion_tokens and reply.calls[-1].latency_s > 0


def test_backoff_is_exponential_capped_and_jittered(fake_llm):  # noqa: F811
    fake_llm.always["judge"] = "429"
    waits: list[float] = []
    ep = EndpointConfig(fake_llm.base_url, "judge", api_key=KEY, max_retries=5, backoff_initial=0.5,
                        backoff_max=3.0)
    with pytest.raises(LLMFailure) as err:
        ChatClient(ep, sleep=waits.append).chat([{"role": "user", "content": "hi"}], "t")
    caps = [0.5, 1.0, 2.0, 3.0, 3.0]
    assert len(waits) == 5 and all(c / 2 <= w <= c for w, c in zip(waits, caps))  # the upper half of each step
    assert len(set(waits)) == 5  # jitter: no two waits alike (ties have probability zero)
    assert err.value.fatal and len(err.value.calls) == 6 and "gave up after 6 attempts" in err.value.message


def test_timeout_is_retried(fake_llm):  # noqa: F811
    fake_llm.script("judge", "timeout")  # hangs past REPLY_TIMEOUT_S
    client = ChatClient(EndpointConfig(fake_llm.base_url, "judge", api_key=KEY, timeout=REPLY_TIMEOUT_S,
                                       backoff_initial=0.001))
    reply = client.chat([{"role": "user", "content": "Item:\n[Q-0]\nReference answer: 1"}], "t")
    assert [c.status for c in reply.calls] == ["timeout", "ok"]


def test_key_from_the_environment_and_never_in_records(fake_llm, monkeypatch):  # noqa: F811
    monkeypatch.setenv("MY_KEY", KEY)
    client = ChatClient(EndpointConfig(fake_llm.base_url, "judge", api_key_env="MY_KEY"))
    reply = client.chat([{"role": "user", "content": "Item:\n[Q-0]\nReference answer: 1"}], "t")
    assert reply.calls[0].status == "ok" and KEY not in repr(reply.calls) and KEY not in repr(client.endpoint)


@pytest.mark.parametrize("setup,expect", [
    (lambda f: EndpointConfig(None, "judge", api_key=KEY), "no endpoint configured"),
    (lambda f: EndpointConfig(f.base_url, "judge", api_key_env="UNSET_KEY_VAR"), "no API key"),
    (lambda f: EndpointConfig(f.base_url, "judge", api_key="wrong"), "rejected the API key"),
    (lambda f: EndpointConfig(f.base_url, "gpt-nope", api_key=KEY), "not found"),
    (lambda f: EndpointConfig(f"http://127.0.0.1:{free_port()}/v1", "judge", api_key=KEY, max_retries=1,
                              backoff_initial=0.001), "cannot reach"),
])
def test_fatal_faults_are_one_line_messages(fake_llm, setup, expect):  # noqa: F811
    with pytest.raises(LLMFailure) as err:
        ChatClient(setup(fake_llm)).chat([{"role": "user", "content": "hi"}], "t")
    assert err.value.fatal and expect in err.value.message and "\n" not in err.value.message
    assert "wrong" not in err.value.message  # a rejected key is not echoed either


def test_rewriter_errors_are_not_fatal(fake_llm):  # noqa: F811
    parent = fake_llm.add_item(0.0)
    request = RewriteRequest("t", parent, 5.0, 6.0, (), 4, "short")
    rewriter = LLMRewriter(ChatClient(EndpointConfig(fake_llm.base_url, "rewriter", api_key=KEY)))
    fake_llm.script("rewriter", "malformed", "empty_content", "truncated")
    for expect in ("no parseable child items", "empty reply"):
        with pytest.raises(LLMFailure) as err:
            rewriter.rewrite(request)
        assert not err.value.fatal and expect in err.value.message and err.value.calls
    assert 1 <= len(rewriter.rewrite(request).children) < 4  # truncated: the complete ones survive


def test_annotation_calls_run_concurrently_but_bounded_per_endpoint(fake_llm):  # noqa: F811
    from benchloupe.engine.benchfill_types import AnnotationRequest
    from benchloupe.prompts.llm import LLMAnnotator

    fake_llm.latency = 0.05
    fake_llm.abilities.update({"annot-a": 0.0, "annot-b": 0.0})
    item = fake_llm.add_item(0.0)
    clients = {m: ChatClient(EndpointConfig(fake_llm.base_url, m, api_key=KEY, concurrency=c))
               for m, c in (("annot-a", 3), ("annot-b", 1))}
    requests = [AnnotationRequest(f"{m}/{t}", item.item_id, m, t, ChildDraft(item.text, item.answer), "short")
                for m in clients for t in range(12)]
    replies = list(LLMAnnotator(clients).answer_many(requests))
    assert sorted(r.request.tag for r in replies) == sorted(r.tag for r in requests)
    assert fake_llm.max_inflight["annot-a"] == 3 and fake_llm.max_inflight["annot-b"] == 1
