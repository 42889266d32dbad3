"""The headless CLI: commands, JSON output, exit codes, the default database location, the demo workspace."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from benchloupe.cli.main import main
from benchloupe.store import read
from benchloupe.store.db import connect


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "benchloupe", *args], capture_output=True, text=True, env=env)


def test_help_lists_every_command():
    r = run_cli("--help")
    assert r.returncode == 0
    for cmd in ("open", "demo", "list", "show", "import", "export", "db"):
        assert cmd in r.stdout


def test_demo_workspace_has_the_promised_shape_and_truth(demo_db):
    conn = connect(demo_db)
    summ = read.benchmark_summaries(conn).set_index("name")
    assert set(summ.index) == {"demo-chem", "demo-math", "demo-arena"}
    ms = read.models(conn, "demo-math")
    assert 38 <= len(ms) <= 45
    assert ms["family"].dropna().nunique() >= 5
    assert (ms.groupby("family")["owner"].nunique() >= 3).all()
    chem_models = read.models(conn, "demo-chem")  # 90 more, so the near-tie audit's families hold >= 20 each
    assert set(ms["name"]) < set(chem_models["name"]) and (chem_models.groupby("family").size() >= 25).all()
    chem = read.load_static(conn, "demo-chem", with_text=True)
    assert chem.items["group"].nunique() >= 3 and chem.items["text"].str.len().min() > 20
    arena = read.load_arena(conn, "demo-arena")
    assert arena.rewards.shape == (len(ms), 120)
    cells = read.truth(conn, "demo-math", "cell")
    assert 5 <= len(cells) <= 20
    math = read.load_static(conn, "demo-math")
    for key in cells["key"]:  # every injected cell is an observed success
        model, item = key.split("\t")
        i = math.models.index[math.models["name"] == model][0]
        j = math.items.index[math.items["key"] == item][0]
        assert math.correct[i, j] == 1
    assert len(read.truth(conn, "demo-chem", "model")) >= 40
    gap = read.truth(conn, "demo-chem", "benchmark").set_index("name")["value"]
    b = read.truth(conn, "demo-chem", "item").query("name == 'b'")["value"].to_numpy()
    assert not ((b > gap["lo"]) & (b < gap["hi"])).any()  # the visible difficulty gap


def test_demo_is_deterministic(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    assert main(["demo", "--db", str(a), "--bare"]) == 0
    assert main(["demo", "--db", str(b), "--bare"]) == 0
    ca, cb = connect(a), connect(b)
    np.testing.assert_array_equal(read.load_static(ca, "demo-math").correct, read.load_static(cb, "demo-math").correct)


def test_list_show_json_and_db_check(demo_db, capsys):
    assert main(["list", "--db", str(demo_db), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["name"] for r in rows} == {"demo-chem", "demo-math", "demo-arena"}
    assert main(["show", "demo-math", "--db", str(demo_db), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["items"] == 240 and info["models"] == 40
    assert main(["db", "check", "--db", str(demo_db), "--json"]) == 0
    check = json.loads(capsys.readouterr().out)
    assert check["ok"] and check["integrity"] == "ok"


def test_unknown_benchmark_is_one_line_and_exit_1(demo_db):
    r = run_cli("show", "nope", "--db", str(demo_db))
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "no benchmark named 'nope'" in r.stderr and "demo-chem" in r.stderr


def test_usage_error_is_exit_2():
    assert run_cli("show").returncode == 2


def test_db_check_on_missing_file(tmp_path):
    r = run_cli("db", "check", "--db", str(tmp_path / "missing.db"))
    assert r.returncode == 1 and "no such database" in r.stderr
    assert not (tmp_path / "missing.db").exists()


def test_default_database_follows_env(tmp_path):
    env = {"BENCHLOUPE_DB": str(tmp_path / "env.db"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = run_cli("demo", "--bare", env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "env.db").exists()
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg"), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    r = run_cli("list", env=env)
    assert r.returncode == 1 and "no such database" in r.stderr
    r = run_cli(env=env)  # no command: open (create) the default database; headless summary here
    assert r.returncode == 0 and "no benchmarks yet" in r.stdout
    assert (tmp_path / "xdg" / "benchloupe" / "benchloupe.db").exists()


def test_headless_open_prints_summary(demo_db):
    r = run_cli("open", str(demo_db))
    assert r.returncode == 0 and "demo-chem" in r.stdout and "benchloupe workspace" in r.stdout


def test_export_results_and_items(demo_db, tmp_path, capsys):
    out = tmp_path / "r.csv"
    assert main(["export", "results", "demo-math", "--db", str(demo_db), "--out", str(out)]) == 0
    import pandas as pd

    df = pd.read_csv(out)
    assert df.shape == (40, 241)
    assert main(["export", "items", "demo-math", "--db", str(demo_db), "--format", "json"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert len(items) == 240 and items[0]["text"].startswith("P1.")


def test_demo_with_showcase_analyses_fills_every_screen(tmp_path, capsys):
    db = tmp_path / "d.db"
    assert main(["demo", "--db", str(db), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert len(info["runs"]) == 7
    conn = connect(db)
    kinds = {r[0] for r in conn.execute("SELECT kind FROM runs WHERE status = 'done'")}
    assert kinds == {"static", "joint", "anomalies", "coverage", "neartie"}
    flags = dict(conn.execute("SELECT kind, count(*) FROM flags GROUP BY kind").fetchall())
    assert flags["anomaly"] > 0 and flags["gap"] == 10 and flags["reversal"] > 0
