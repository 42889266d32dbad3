"""Issue 37 #9 and #15 (endpoint names): no credentials in a base URL are stored, shown or journaled; a base URL
with a line break is refused; a model name beyond the BMP is saved to the user endpoints file and reads back.
Every class of URL (tests/hostile.py ``credential_urls``, ``broken_line_urls``), in the database and in the
per-user file, through the CLI; ``$OPENAI_BASE_URL`` with credentials is redacted in every journaled call of a
real client against the local server (tests/fake_llm.py)."""

from __future__ import annotations

import pytest

from benchloupe.jobs import fill
from benchloupe.prompts import endpoints_file
from benchloupe.prompts.client import ChatClient, EndpointConfig
from tests.fake_llm import KEY, fake_llm  # noqa: F401
from tests.hostile import SECRET, broken_line_urls, check_outcome, credential_urls, dump, run_cli


@pytest.mark.parametrize("scope", ["database", "user"])
def test_credentials_and_line_breaks_in_base_urls_are_refused(tmp_path, scope):
    db = tmp_path / "e.db"
    assert run_cli(["--db", db, "endpoints", "set", "judge", "--model", "j", "--base-url", "http://h/v1"])[0] == 0
    user_file = endpoints_file.path()
    for url in credential_urls() + broken_line_urls():
        for role in (["rewriter"], ["judge"], ["annotator", "--name", "m1"]):
            before, before_file = dump(db), user_file.read_bytes() if user_file.exists() else None
            rc, out, err = run_cli(["--db", db, "endpoints", "set", *role, "--model", "m", "--base-url", url,
                                    *(["--user"] if scope == "user" else [])])
            check_outcome((scope, role[0], url), rc, out, err, before, dump(db))
            assert rc == 1 and SECRET not in err, (url, err)
            assert "credentials" in err or "line break" in err, err
            assert (user_file.read_bytes() if user_file.exists() else None) == before_file
    rc, out, err = run_cli(["--db", db, "endpoints", "show"])
    assert rc == 0 and SECRET not in out


def test_a_stored_url_with_credentials_is_shown_redacted(tmp_path):
    """A database written before the refusal: `endpoints show` never prints the password."""
    db = tmp_path / "old.db"
    assert run_cli(["--db", db, "endpoints", "set", "judge", "--model", "j", "--base-url", "http://h/v1"])[0] == 0
    from benchloupe.store.curation import put_setting
    from benchloupe.store.db import connect

    conn = connect(db)
    eps = fill.get_endpoints(conn)
    eps["judge"]["base_url"] = f"https://u:{SECRET}@h/v1"
    put_setting(conn, fill.ENDPOINTS_KEY, eps)
    conn.close()
    for argv in (["endpoints", "show"], ["--json", "endpoints", "show"]):
        rc, out, err = run_cli(["--db", db, *argv])
        assert rc == 0 and SECRET not in out and "***@h" in out, out


def test_openai_base_url_with_credentials_is_never_journaled(fake_llm, monkeypatch):  # noqa: F811
    fake_llm.add_item(0.0)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url.replace("http://", f"http://u:{SECRET}@"))
    client = ChatClient(EndpointConfig(None, "judge", api_key=KEY, timeout=5, max_retries=0))
    try:
        reply = client.chat([{"role": "user", "content": "[Q-0]\nReference answer: 1"}], "judge")
        calls = reply.calls
        assert reply.text
    except Exception as exc:  # noqa: BLE001 - the server may refuse basic auth: the failure is what is checked
        assert SECRET not in str(exc)
        calls = exc.calls
    assert calls and all(SECRET not in repr(c) for c in calls)


def test_names_beyond_the_bmp_are_saved_to_the_user_file(tmp_path):
    db = tmp_path / "u.db"
    for name in ("m\U0001f600", "\U00020000-model", "model\u2028x", "del\x7fname"):
        rc, out, err = run_cli(["--db", db, "endpoints", "set", "annotator", "--name", name, "--model", name,
                                "--base-url", "http://h/v1", "--user"])
        assert rc == 0, (ascii(name), err)
        assert any(a["name"] == name and a["model"] == name for a in endpoints_file.load()["annotators"])
