"""The built-in simulated endpoint (issue 11 item 10): a real OpenAI-compatible server on 127.0.0.1 that the
real ``openai`` client talks to, and the demo's BenchFill loop on it from the CLI."""

from __future__ import annotations

import json
import socket

import numpy as np
import openai
import pytest

from benchloupe.cli.main import main
from benchloupe.engine.benchfill_types import FillItem
from benchloupe.prompts import simulated
from benchloupe.prompts.client import ChatClient, EndpointConfig
from benchloupe.prompts.llm import LLMAnnotator, LLMJudge, LLMRewriter


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def server():
    srv = simulated.SimulatedServer().start()
    try:
        yield srv
    finally:
        srv.stop()


def test_the_real_openai_client_lists_models_and_gets_a_rewrite(server):
    items = [FillItem(str(j), f"P{j}. Compute {j + 2} + {j + 3} × {j + 4}.", str((j + 2) + (j + 3) * (j + 4)),
                      j / 10) for j in range(10)]
    server.world.load(items, {"model-a": 0.0, "model-b": 1.5}, -3.0, 3.0)
    client = openai.OpenAI(base_url=server.base_url, api_key="anything", max_retries=0)
    assert {m.id for m in client.models.list()} == {simulated.REWRITER, simulated.JUDGE, "model-a", "model-b"}
    prompt = LLMRewriter(ChatClient(EndpointConfig(server.base_url, simulated.REWRITER, None))).template.render(
        target="5.0", parent_difficulty="1.0", references="(none)",
        parent=f"{items[1].text}\nAnswer: {items[1].answer}", n_children=3, format_rule="", choices_field="")
    reply = client.chat.completions.create(model=simulated.REWRITER, messages=prompt)
    kids = json.loads(reply.choices[0].message.content)["children"]
    assert len(kids) == 3 and all(k["question"].startswith("P1. Compute ") for k in kids)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nobody", messages=[{"role": "user", "content": "hi"}])


def test_annotators_follow_the_hidden_difficulty_and_the_judge_checks_answers(server):
    hard, easy = FillItem("h", "P1. Compute 9 + 9 × 9.", "90", 0.95), FillItem("e", "P2. Compute 1 + 1 × 1.", "2", 0.05)
    server.world.load([hard, easy], {"m": 0.0}, -3.0, 3.0)
    simulated_ep = EndpointConfig(simulated.SIMULATED_URL, "m", "OPENAI_API_KEY")  # the marker, no key needed
    with simulated.serving():
        pass  # acquire/release start and stop the process's shared server
    assert simulated.current() is None
    with simulated.serving() as shared:
        shared.world.load([hard, easy], {"m": 0.0}, -3.0, 3.0)
        ann = LLMAnnotator({"m": ChatClient(simulated_ep)})
        from benchloupe.engine.benchfill import grade_locally
        from benchloupe.engine.benchfill_types import AnnotationRequest, ChildDraft

        def rate(item):
            child = ChildDraft(item.text, item.answer)
            reqs = [AnnotationRequest(f"t{k}", item.item_id, "m", k, child, "short") for k in range(60)]
            return np.mean([grade_locally(child, r.response, "short") for r in ann.answer_many(reqs)])

        assert rate(easy) > 0.85 and rate(hard) < 0.15
        judge = LLMJudge(ChatClient(EndpointConfig(simulated.SIMULATED_URL, simulated.JUDGE, None)))
        assert judge.verify(ChildDraft(easy.text, "2"), easy, "j").valid
        assert not judge.verify(ChildDraft(easy.text, "3"), easy, "j").valid
        port = shared.port
    assert not port_open(port)


@pytest.mark.slow
def test_demo_then_fill_demo_math_proposes_on_the_simulated_endpoint(tmp_path, capsys):
    db = tmp_path / "demo.db"
    assert main(["demo", "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["endpoints", "show", "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "simulated-rewriter at simulated://demo (simulated" in shown and shown.count("annotator ") == 12
    assert main(["fill", "demo-math", "--gap", "1", "--db", str(db), "--json"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert "simulated" in err
    assert summary["state"] == "proposed" and summary["pending"] >= 1
    assert abs(summary["best_distance"]) < 0.05  # the calibration lands near the target
    assert simulated.current() is None  # the command's server is gone
    from benchloupe.store import fill as fillstore
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        calls = fillstore.llm_calls(conn, summary["session"])
        assert set(calls["base_url"]) == {simulated.SIMULATED_URL} and (calls["status"] == "ok").all()
        cands = fillstore.candidates(conn, summary["session"])
        assert len(cands) >= 1 and all(p.get("identified") for p in cands["payload"])
        assert fillstore.sessions(conn)["rewriter_url"].iloc[0] == simulated.SIMULATED_URL
    finally:
        conn.close()


def test_hostile_requests_get_one_json_error_and_no_traceback(server, capfd):
    import http.client

    def post(body: bytes, headers: dict) -> tuple[int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        conn.request("POST", "/v1/chat/completions", body=body, headers=headers)
        resp = conn.getresponse()
        out = resp.status, json.loads(resp.read())
        conn.close()
        return out

    for body, headers in ((b"\x00not json\x1b[2J", {}), (b"{}", {}), (b'{"model": 3, "messages": [{"content": 7}]}', {}),
                          (b"x", {"Content-Length": "-5"}), (b"x", {"Content-Length": "lots"})):
        code, payload = post(body, headers)
        assert code == 400 and "\n" not in payload["error"]["message"]
    code, payload = post(json.dumps({"model": simulated.REWRITER, "messages": [
        {"role": "user", "content": "Target difficulty: 5.0 / 10 but no parent"}]}).encode(), {})
    assert code == 200 and "simulated" in payload["choices"][0]["message"]["content"]
    assert "Traceback" not in capfd.readouterr().err
