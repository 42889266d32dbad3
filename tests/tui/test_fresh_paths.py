"""What a new user meets first (issue 21 items 5, 6 and 11): the demo built with ``d`` in the app is the demo
``benchloupe demo`` builds (its analyses run); an empty database's screens say how to get data; a binary file
picked for import is named for what it is, in one short line, in the dialog and on the command line; a
dialog's own errors show inside it, not under a toast."""

from __future__ import annotations

import contextlib

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


# ------------------------------------------------------------------------------------------- 80x24 polish
def _lines(app) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def test_an_empty_database_says_how_to_get_data_on_every_screen(tmp_path):
    """Screens 2-8 said "press 1 and choose one" where there was nothing to choose."""
    db = tmp_path / "empty.db"
    connect(db).close()
    app = BenchloupeApp(db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        for key in "2345678":
            app.clear_notifications()
            await pilot.press(key)
            await pilot.pause(0.2)
            said = " ".join(n.message for n in app._notifications) + "\n".join(_lines(app))
            assert "choose one" not in said, (key, said)
            assert "d builds the demo" in said and "o imports" in said, (key, said)


async def test_coverage_without_a_run_says_r_runs_it_and_r_does(demo_db):
    """"it needs a calibration: 4 Runs" was wrong: coverage fits its own 1PL."""
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        head = str(app.screen.query_one("#coverage-head").render())
        assert "needs a calibration" not in head and "r runs" in head, head
        await pilot.press("r")
        await wait_until(pilot, lambda: app.job.title.startswith("coverage") and not app.job.running, timeout=120,
                         what="coverage run")
        assert not app.job.failed, app.job.outcome


async def test_coverage_notes_cut_at_80_columns_open_in_full(showcase_db):
    app = BenchloupeApp(showcase_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        shown = "\n".join(_lines(app))
        assert "the widest trusted gap is" not in shown  # the tail warning's point is cut at 80 columns
        assert "v: all notes" in shown, shown
        await pilot.press("v")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "NotesScreen", what="the notes in full")
        await pilot.pause()
        full = " ".join(line.strip() for line in _lines(app))
        assert "the widest trusted gap is" in full and "lattice: 240 items" in full, full
        await pilot.press("escape")
        assert type(app.screen).__name__ == "CoverageScreen"


async def test_help_is_titled_by_the_screen_and_lists_its_own_keys_first(showcase_db):
    app = BenchloupeApp(showcase_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        await pilot.press("enter")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ItemPanel" and app.screen.detail is not None,
                         what="item panel")
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen", what="help")
        text = str(app.screen.query_one("Static").render())
        assert text.startswith("Keys on the item panel"), text[:60]
        assert "ItemPanel" not in text
        await pilot.press("escape", "escape")
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen", what="help on Items")
        rows = [line.strip() for line in str(app.screen.query_one("Static").render()).splitlines()[1:]]
        own = [k for k, r in enumerate(rows) if "Item panel" in r or "Flagged" in r]
        generic = [k for k, r in enumerate(rows) if r.endswith("Sort") or "Reverse sort" in r or "Page down" in r]
        assert own and (not generic or max(own) < min(generic)), rows


def test_counts_read_in_the_singular_for_one():
    from benchloupe.words import count

    assert [count(1, "file"), count(2, "file"), count(1, "anomaly", "anomalies"), count(0, "anomaly", "anomalies")] \
        == ["1 file", "2 files", "1 anomaly", "0 anomalies"]


def test_an_import_of_one_file_with_a_skipped_one_says_1_file(tmp_path):
    from benchloupe.jobs.imports import import_paths, summary_lines

    d = tmp_path / "in"
    d.mkdir()
    (d / "res.csv").write_text("model,item,correct\nm1,i1,1\nm2,i1,1\n")
    (d / "notes.csv").write_text("what,ever\n1,2\n")
    summary = import_paths(tmp_path / "w.db", [str(d)], None)
    line = summary_lines(summary)[0]
    assert "imported 1 file " in line and "1 files" not in line, line
    text = "\n".join(summary_lines(summary))
    assert "1 items" not in text and "1 new items" not in text and "1 models" not in text, text


def test_a_fit_warning_about_one_item_is_singular(demo_db):
    import numpy as np

    from benchloupe.engine.joint import JointConfig
    from benchloupe.engine.joint.optimise import _item_warnings

    class S:  # the two arrays _item_warnings reads, one item solved by all, none failed by all
        mask = np.ones((3, 2), bool)
        correct = np.array([[1, 0], [1, 1], [1, 0]])
        trials = None

    (w,) = _item_warnings(S(), JointConfig(mode="static"))
    assert w.startswith("1 static item solved by every model and 0 failed"), w


async def test_deciding_all_of_a_model_with_one_open_flag_is_singular(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        await pilot.press("M")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ChoiceDialog", what="the question")
        assert "Decide the 1 open anomaly of model" in app.screen.question, app.screen.question


async def test_at_80x24_status_lines_footers_and_placeholders_are_not_cut_silently(showcase_db, tmp_path):
    app = BenchloupeApp(showcase_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        status = app.screen.query_one("#items-status")
        assert status.size.height == 1, str(status.render())  # the Items status line does not wrap
        await pilot.press("1")
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        await pilot.press("o")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="import form")
        form = app.screen
        form.query_one("#field-paths").value = str(tmp_path / "x.csv")
        form.query_one("#field-format").value = "long"
        from textual.widgets import Input

        def cut_hints() -> list:
            """The shown boxes whose placeholder does not fit or is cut without an ellipsis."""
            return [(box.id, box.placeholder, box.content_region.width) for box in form.query(Input)
                    if box.display and box.parent.display and box.placeholder
                    and not (len(box.placeholder) <= box.content_region.width
                             and (box.placeholder.endswith("…")
                                  or box.placeholder in {f.help or " | ".join(f.choices) for f in form.fields}))]

        # The fields "long" shows bring the form's scrollbar, which narrows every box by 2 cells: each box's
        # Resize re-cuts its hint. Wait for the layout to settle (a fixed 0.3 s pause read the boxes before their
        # Resize under CI's load: a 48-cell hint in a box just narrowed to 46); a hint left uncut still fails.
        with contextlib.suppress(AssertionError):
            await wait_until(pilot, lambda: not cut_hints(), timeout=10, what="every hint to fit its box")
        assert not cut_hints(), cut_hints()
        form.query_one("#field-models_file").focus()
        await pilot.pause()
        shown = " ".join(line.strip() for line in _lines(app))
        assert "CSV with name, family, owner (and arch) per model" in shown, shown  # the focused field's help


async def test_a_dialogs_own_error_is_not_hidden_by_a_toast(showcase_db, tmp_path):
    app = BenchloupeApp(showcase_db)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        app.notify("imported something: a long summary of what was imported, line after line\n" * 4,
                   title="Imported", timeout=15)
        await pilot.press("o")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="import form")
        assert not app._notifications, "a toast stays over the dialog"  # the headless render draws no toast
        await pilot.press(*"/nope/missing.csv", "enter")
        await pilot.pause(0.3)
        lines = _lines(app)
        title = next(k for k, line in enumerate(lines) if "Import results files" in line)
        assert "no such file or folder" in lines[title + 1], lines[title:title + 3]  # right under the title


async def test_the_job_line_and_footer_keep_the_counts_and_the_cancel_key_at_80_columns(showcase_db):
    from benchloupe.engine.benchfill import BenchFillConfig
    from benchloupe.jobs.fill import FillOptions
    from benchloupe.tui.jobs_ui import fill_job

    app = BenchloupeApp(showcase_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        seen = []

        def job_and_footer() -> bool:
            lines = _lines(app)
            seen.append((lines[-2], lines[-1]))
            return "LLM calls" in lines[-2]

        assert app.start_job("BenchFill gap 1 of demo-math", fill_job(app.db_path, "demo-math", FillOptions(),
                                                                       BenchFillConfig()))
        await wait_until(pilot, lambda: job_and_footer() or not app.job.running, timeout=120, what="the job line")
        job, footer = seen[-1]
        assert "LLM calls" in job, seen[-5:]
        assert "x Cancel" in footer and "x Cancel jo " not in footer + " ", footer
        await wait_until(pilot, lambda: not app.job.running, timeout=180, what="the session")
