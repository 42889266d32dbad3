"""Issue 5 "Bad input and faults": each fault is one clear line in the session's journal, no crash, the
state so far is kept, and a failed session proposes nothing."""

from __future__ import annotations

import socket

import pytest

from benchloupe.engine.benchfill import BenchFillConfig, run_session
from benchloupe.engine.benchfill_types import MemoryJournal
from benchloupe.prompts.client import ChatClient, EndpointConfig
from benchloupe.prompts.llm import LLMAnnotator, LLMJudge, LLMRewriter
from tests.fake_llm import KEY, REPLY_TIMEOUT_S, fake_llm, gappy_world, largest_gaps, problem_for_gap  # noqa: F401

ONE_ROUND = BenchFillConfig(max_rounds=1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(fake, *, rewriter_url="ok", key=KEY, annot_model=None):
    items, specs = gappy_world(fake, n_models=3, trials=2)
    url = fake.base_url if rewriter_url == "ok" else rewriter_url

    def ep(model, base=fake.base_url):
        return EndpointConfig(base, model, api_key=key, timeout=REPLY_TIMEOUT_S, max_retries=2, backoff_initial=0.001)

    rewriter = LLMRewriter(ChatClient(ep("rewriter", url)))
    judge = LLMJudge(ChatClient(ep("judge")))
    annotator = LLMAnnotator({s.model: ChatClient(ep(annot_model if s.model == "annot-0" and annot_model
                                                      else s.model)) for s in specs})
    journal = MemoryJournal()
    problem = problem_for_gap(fake, items, specs, largest_gaps(items, 1)[0])
    return run_session(problem, rewriter, judge, annotator, journal, ONE_ROUND), journal.load_state()


@pytest.mark.parametrize("kwargs,script,expect", [
    (dict(rewriter_url=None), None, "no endpoint configured"),
    (dict(key="sk-wrong-key"), None, "rejected the API key"),
    (dict(rewriter_url="unreachable"), None, "cannot reach"),
    (dict(annot_model="no-such-model"), None, "not found"),
    ({}, ("annot-1", "429"), "HTTP 429"),
    ({}, ("judge", "nonjson"), "not valid JSON"),
])
def test_fatal_faults_stop_the_session_with_one_line(fake_llm, kwargs, script, expect):  # noqa: F811
    if kwargs.get("rewriter_url") == "unreachable":
        kwargs = dict(rewriter_url=f"http://127.0.0.1:{free_port()}/v1")
    if script:
        fake_llm.always[script[0]] = script[1]
    result, state = run(fake_llm, **kwargs)
    assert result.status == "failed" and expect in result.message and "\n" not in result.message
    errors = [e for e in state.events if e.level == "error"]
    assert len(errors) == 1 and errors[0].message == result.message
    assert "sk-wrong-key" not in repr(state)
    if script and script[0] == "annot-1":  # failure during annotation: rewrites, verdicts, other answers kept
        assert state.rewrites and state.verdicts and not any(r.done for r in state.rounds)


@pytest.mark.parametrize("fault,reason", [
    ("empty", "empty rewrite"),
    ("identical", "identical to its parent"),
])
def test_bad_children_are_invalid_with_a_reason_and_the_session_goes_on(fake_llm, fault, reason):  # noqa: F811
    fake_llm.script("rewriter", fault)
    result, state = run(fake_llm)
    bad = [v for v in state.verdicts if reason in v.reason]
    assert len(bad) == 4 and not any(v.valid for v in bad)
    assert result.status in ("proposed", "no_valid_child") and result.n_children == 16
    assert all(c.child_id not in {v.child_id for v in bad} for c in result.candidates)


def test_unparseable_rewrite_is_a_warning_and_the_round_continues(fake_llm):  # noqa: F811
    fake_llm.script("rewriter", "malformed")
    result, state = run(fake_llm)
    warnings = [e for e in state.events if e.level == "warning"]
    assert len(warnings) == 1 and "no parseable child items" in warnings[0].message
    assert [w.error is not None for w in state.rewrites] == [True, False, False, False]
    assert result.n_children == 12 and result.status == "proposed"
