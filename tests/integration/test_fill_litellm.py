"""BenchFill through a real LiteLLM proxy on 127.0.0.1 (issue 12, "The endpoint client"): an OpenAI-compatible
server that is not ours, configured only through the ecosystem's conventions ($OPENAI_BASE_URL,
$OPENAI_API_KEY) and the per-user endpoints file. The proxy routes the rewriter, judge and annotators to our
local world (tests/fake_llm.py) and serves ``mock_response`` models without any network.

LiteLLM's proxy pulls in packages (rich, uvicorn, websockets, ...) at versions that would change the project's
environment, so it is not a test extra: give the path of a ``litellm`` executable from its own virtual
environment in ``$BENCHLOUPE_TEST_LITELLM``; ``make test`` builds one in ``.venv-litellm`` (``litellm[proxy]==1.80.0``)
and sets it. Without it these tests are skipped.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.fake_llm import KEY, fake_llm  # noqa: F401
from tests.fill_world import store_world

LITELLM = os.environ.get("BENCHLOUPE_TEST_LITELLM", "")
MASTER = "sk-litellm-master-test"
pytestmark = pytest.mark.skipif(not (LITELLM and os.access(LITELLM, os.X_OK)),
                                reason="set $BENCHLOUPE_TEST_LITELLM to a litellm executable (see the docstring)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _yaml(fake, n_annotators: int) -> str:
    def upstream(name):
        return (f"  - model_name: {name}\n    litellm_params:\n      model: openai/{name}\n"
                f"      api_base: {fake.base_url}\n      api_key: {KEY}\n")
    models = [upstream(m) for m in ["rewriter", "judge", *[f"annot-{j}" for j in range(n_annotators)]]]
    models += [f"  - model_name: always-wrong-{j}\n    litellm_params:\n      model: openai/always-wrong-{j}\n"
               "      mock_response: \"Adding them up.\\nAnswer: 0\"\n" for j in range(n_annotators)]
    return "model_list:\n" + "".join(models) + f"general_settings:\n  master_key: {MASTER}\n"


@pytest.fixture
def proxy(fake_llm, tmp_path):  # noqa: F811
    cfg = tmp_path / "litellm.yaml"
    cfg.write_text(_yaml(fake_llm, 4))
    port = _free_port()
    log = open(tmp_path / "litellm.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([LITELLM, "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "LITELLM_LOG": "ERROR"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/health/liveliness", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"the LiteLLM proxy did not start: {(tmp_path / 'litellm.log').read_text()[-2000:]}")
        yield f"{url}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _messages(stderr: str) -> list[str]:
    """stderr without the progress lines ("[fill  1.5s] ..."), which a long session prints as it goes."""
    return [ln for ln in stderr.strip().splitlines() if not ln.startswith("[fill ")]


def _cli(db, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchloupe", *args, "--db", str(db)], capture_output=True,
                          text=True, timeout=600, env={**os.environ})


def _configure(db, annotator_model, *, json_mode: bool = False):
    for role in ("rewriter", "judge"):
        extra = ["--json-mode"] if json_mode else []
        assert _cli(db, "endpoints", "set", role, "--model", role, "--user", *extra).returncode == 0
    for j in range(4):
        r = _cli(db, "endpoints", "set", "annotator", "--name", f"annot-{j}", "--model", annotator_model(j),
                 "--trials", "2", "--user")
        assert r.returncode == 0, r.stderr


def test_a_session_through_the_proxy_from_env_defaults(fake_llm, proxy, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("OPENAI_BASE_URL", proxy)
    monkeypatch.setenv("OPENAI_API_KEY", MASTER)
    db = tmp_path / "ll.db"
    bench = store_world(fake_llm, db)
    _configure(db, lambda j: f"annot-{j}", json_mode=True)
    r = _cli(db, "fill", bench, "--json")
    summary = json.loads(r.stdout)
    assert summary["llm_calls"] > 50 and summary["annotations"] > 0, r.stderr
    assert (r.returncode, summary["state"]) in ((0, "proposed"), (1, "no_valid_child")), r.stderr
    assert summary["state"] != "proposed" or summary["pending"] >= 1
    assert {m for m, _ in fake_llm.response_formats} == {"rewriter", "judge"}  # JSON mode passed through
    import sqlite3

    conn = sqlite3.connect(db)
    urls = {u for (u,) in conn.execute("SELECT DISTINCT base_url FROM llm_calls")}
    conn.close()
    assert urls == {proxy}


def test_mock_annotators_without_signal_end_no_valid_child(fake_llm, proxy, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("OPENAI_BASE_URL", proxy)
    monkeypatch.setenv("OPENAI_API_KEY", MASTER)
    db = tmp_path / "mock.db"
    bench = store_world(fake_llm, db)
    _configure(db, lambda j: f"always-wrong-{j}")
    r = _cli(db, "fill", bench)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    err = _messages(r.stderr)
    assert len(err) == 1 and "no valid child" in err[0] and "every answer was wrong" in err[0], r.stderr
