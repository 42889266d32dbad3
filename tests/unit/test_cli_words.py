"""The command line's words are true (issue 32, point 12): no "1 items", a role can be removed, `import formats`
speaks to a curator, an empty artifact list says so, `db check` counts results, long messages are cut at a word,
`fill` rounds its numbers and says which endpoints are simulated."""

from __future__ import annotations

import json
import re

import pytest

from benchloupe.cli.main import main
from benchloupe.words import clip, count
from tests.hostile import run_cli

PLURAL_ONE = re.compile(r"\b1 (benchmarks|items|models|results|runs|flags|files|rows|cells|proposals|annotators|"
                        r"sessions|candidates|pairs|decisions|gaps|trials|respondents|families|groups)\b")


@pytest.fixture
def one_db(tmp_path):
    """One benchmark, one model, one item, one result: every count in it is 1."""
    (tmp_path / "r.csv").write_text("model,item,correct\norg/m1,q1,1\n")
    db = tmp_path / "one.db"
    rc, out, err = run_cli(["import", "long", str(tmp_path / "r.csv"), "--db", str(db), "--benchmark", "b"])
    assert rc == 0, err
    return db, out + err


def test_counts_of_one_are_singular_in_every_command(one_db):
    """The class, not one message: every command a curator runs on a one-of-everything database."""
    db, said = one_db
    for argv in (["list"], ["show", "b"], ["db", "check"], ["flags"], ["open", str(db)], ["coverage", "b"],
                 ["fit", "static", "b"], ["compress", "b"], ["export", "items", "b"], ["search", "q1"]):
        rc, out, err = run_cli([*argv, "--db", str(db)])
        said += out + err
        assert "Traceback" not in err, (argv, err)
    assert not PLURAL_ONE.findall(said), [ln for ln in said.splitlines() if PLURAL_ONE.search(ln)]


def test_count_and_clip():
    assert count(1, "item") == "1 item" and count(2, "item") == "2 items" and count(1, "family", "families") == \
        "1 family"
    msg = "connection refused (is the server running on that port?)"
    for limit in range(12, len(msg)):  # from the first word's length on
        cut = clip(msg, limit)
        assert len(cut) <= limit and cut.endswith("…")
        assert all(w in msg.split() for w in cut[:-1].split()), cut  # whole words only: never "runnin"
    assert clip(msg, 200) == msg


def test_no_message_in_the_endpoint_client_is_sliced_mid_word():
    """The class of "is the server runnin": messages go through words.clip, not a [:N] slice."""
    from pathlib import Path

    import benchloupe.prompts.client as client
    import benchloupe.prompts.endpoint as endpoint

    for module in (client, endpoint):
        assert not re.findall(r"\[:\d+\](!r)?\}", Path(module.__file__).read_text()), module.__name__


def test_import_formats_speaks_to_a_curator(capsys):
    from benchloupe.store.importers.detect import FORMATS

    assert main(["import", "formats"]) == 0
    out = capsys.readouterr().out
    assert "``" not in out and "ParsedImport" not in out and "Parse " not in out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln and not ln.startswith("aliases:")}
    assert set(lines) == set(FORMATS)
    assert all(len(ln.split(None, 1)) == 2 for ln in lines.values())


def test_endpoints_remove_a_role(tmp_path, capsys):
    db = str(tmp_path / "e.db")
    assert main(["endpoints", "set", "judge", "--model", "gpt-x", "--base-url", "http://localhost:9/v1",
                 "--db", db]) == 0
    capsys.readouterr()
    assert main(["endpoints", "remove", "judge", "--db", db, "--json"]) == 0  # before: "needs --name"
    assert json.loads(capsys.readouterr().out)["judge"] is None
    rc, out, err = run_cli(["endpoints", "remove", "judge", "--db", db])
    assert rc == 1 and "no judge set in this database" in err and "\n" not in err.strip()
    rc, out, err = run_cli(["endpoints", "remove", "--db", db])
    assert rc == 1 and "a role (rewriter or judge) or --name" in err


def test_export_run_artifact_of_a_run_without_artifacts_says_what(demo_db):
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    assert run_cli(["screen", "demo-math", "--model", "x", "--db", str(demo_db)])[0] == 1  # no clean fit yet
    assert run_cli(["fit", "static", "demo-math", "--no-heldout", "--db", str(demo_db)])[0] == 0
    conn = connect(demo_db)
    rid = [r for r in runs.list_runs(conn)["id"] if not runs.artifact_names(conn, int(r))]
    conn.close()
    if not rid:
        pytest.skip("every run stored an artifact")
    rc, out, err = run_cli(["export", "run-artifact", "--run", str(rid[0]), "--db", str(demo_db)])
    assert rc == 1 and "stored no artifacts" in err and f"export run-models --run {rid[0]}" in err
    assert not err.strip().endswith(":")  # before: "run 8 has: "


def test_db_check_counts_results_not_packed_rows(demo_db, capsys):
    assert main(["db", "check", "--db", str(demo_db), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert main(["list", "--db", str(demo_db), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    listed = listed if isinstance(listed, list) else listed.get("benchmarks", listed)
    assert rows["static_results"] == sum(int(b["results"]) for b in listed if b["kind"] != "arena")
    assert rows["static_results"] > 1000  # before: 170 (one packed row per model and benchmark)


def test_fill_rounds_and_names_its_simulated_roles():
    from benchloupe.cli.fill import _rounded, _simulated_line
    from benchloupe.prompts.simulated import SIMULATED_URL

    assert _rounded({"gap": [0.30000000000000004, 1 / 3], "best_distance": 0.123456789, "n": 3}) == \
        {"gap": [0.3, 0.3333], "best_distance": 0.1235, "n": 3}
    sim = {"model": "sim", "base_url": SIMULATED_URL}
    eps = {"rewriter": sim, "judge": {"model": "gpt-x", "base_url": "https://api.example.com/v1"},
           "annotators": [{**sim, "name": "a"}, {**sim, "name": "b"}]}
    line = _simulated_line(eps)
    assert "rewriter and 2 annotators on the simulated endpoint" in line and "judge on its own endpoint" in line
    assert not line.startswith("BenchFill endpoints: simulated")
    everything = _simulated_line({"rewriter": sim, "judge": sim, "annotators": []})
    assert everything.startswith("BenchFill endpoints: simulated")
