"""What a new user meets first (issue 21 items 5, 6 and 11): the demo built with ``d`` in the app is the demo
``benchloupe demo`` builds (its analyses run); an empty database's screens say how to get data; a binary file
picked for import is named for what it is, in one short line, in the dialog and on the command line; a
dialog's own errors show inside it, not under a toast."""

from __future__ import annotations

import pytest

from benchloupe.store import curation, runs
from benchloupe.store.db import connect
from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)


def _workspace(db) -> dict:
    """Per benchmark: the kinds of its finished runs, and its flags by kind."""
    conn = connect(db)
    try:
        hist = runs.list_runs(conn)
        flags = curation.flags(conn)
        names = {r[0]: r[1] for r in conn.execute("SELECT id, name FROM benchmarks")}
    finally:
        conn.close()
    out = {}
    for bench, group in hist[hist["status"] == "done"].groupby("benchmark"):
        out[bench] = {"runs": sorted(group["kind"])}
    for (bid, kind), n in flags.groupby(["benchmark_id", "kind"]).size().items():
        out.setdefault(names[bid], {}).setdefault("flags", {})[kind] = int(n)
    return out


async def test_d_in_the_app_builds_the_demo_the_command_builds(tmp_path, capsys):
    from benchloupe.cli.main import main

    assert main(["demo", "--db", str(tmp_path / "cli.db")]) == 0
    capsys.readouterr()
    db = tmp_path / "app.db"
    connect(db).close()
    app = BenchloupeApp(db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        await pilot.press("d")
        await wait_until(pilot, lambda: app.job.title == "demo workspace" and not app.job.running, timeout=300,
                         what="the demo build")
        assert not app.job.failed, app.job.outcome
        assert _workspace(db) == _workspace(tmp_path / "cli.db")
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks again")
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        assert len(app.screen.flags), "the demo's anomaly run is missing"
        await pilot.press("4")
        await wait_until(pilot, loaded(app, "runs"), what="runs")
        assert len(app.screen.query_one("#history").frame)


def _binaries(tmp_path, showcase_db) -> dict:
    """Files a curator may pick by mistake: a SQLite database (a benchloupe workspace), a zip archive, raw bytes
    named .csv, a file of control bytes that is valid UTF-8."""
    import shutil
    import zipfile

    out = {"database": tmp_path / "workspace.db", "zip": tmp_path / "results.zip", "raw": tmp_path / "raw.csv",
           "controls": tmp_path / "controls.txt"}
    shutil.copy(showcase_db, out["database"])
    with zipfile.ZipFile(out["zip"], "w") as z:
        z.writestr("results.csv", "model,item,correct\n" + "m,i,1\n" * 200)
    out["raw"].write_bytes(bytes(range(256)) * 8)
    out["controls"].write_bytes(bytes(range(32)) * 20 + b"\n" + bytes(range(32)) * 10)
    return out


def _says_what_it_is(line: str, path, first: bytes) -> None:
    assert "\n" not in line.strip() and len(line.replace(str(path), "")) < 240, (len(line), line)
    assert "binary" in line and str(path.stat().st_size // 1) in line.replace(",", "") or "KB" in line or \
        "MB" in line, line
    assert " ".join(f"{b:02x}" for b in first[:4]) in line, line  # the first bytes, as hex
    assert "\\x00" not in line and "\x00" not in line and "�" not in line, line  # no dump of the bytes
    assert "formats" in line, line  # what is accepted


@pytest.mark.parametrize("kind", ["database", "zip", "raw", "controls"])
@pytest.mark.parametrize("fmt", ["auto", "long"])
def test_a_binary_file_on_the_command_line_gets_one_short_line(showcase_db, tmp_path, capsys, kind, fmt):
    from benchloupe.cli.main import main

    path = _binaries(tmp_path, showcase_db)[kind]
    db = tmp_path / "target.db"
    connect(db).close()
    before = db.read_bytes()
    assert main(["import", fmt, str(path), "--db", str(db)]) == 1
    err = capsys.readouterr().err
    _says_what_it_is(err, path, path.read_bytes()[:8])
    assert db.read_bytes() == before


async def test_a_binary_file_in_the_import_dialog_is_named_inside_the_dialog(showcase_db, tmp_path):
    path = _binaries(tmp_path, showcase_db)["database"]
    app = BenchloupeApp(showcase_db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        await pilot.press("o")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="import form")
        app.screen.query_one("#field-paths").value = str(path)
        await pilot.press("ctrl+s")
        await pilot.pause(0.2)
        assert type(app.screen).__name__ == "FormDialog", "the form closed and started a doomed import"
        line = str(app.screen.query_one("#dialog-error").render())
        _says_what_it_is(line, path, path.read_bytes()[:8])
        assert "SQLite" in line
