"""The import dialog (issue 11, item 7): the options of ``benchloupe import`` that apply to the chosen format,
several paths (folders, globs) in one transaction, the per-benchmark/per-model summary, and errors in the
form's words. Driven with keys only, on a real SQLite file and the logs real inspect_ai / lm_eval runs wrote."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import loaded, wait_until

SIZE = (120, 40)
pytestmark = pytest.mark.anyio
REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
FLAG = re.compile(r"(?<![\w-])--[a-z]")


async def type_text(pilot, text: str) -> None:
    await pilot.press(*("space" if ch == " " else ch for ch in text))


async def set_field(pilot, name: str, text: str) -> None:
    """Tab to the field *name* and replace its text, with keys only."""
    for _ in range(80):
        focused = pilot.app.focused
        if focused is not None and focused.id == f"field-{name}":
            break
        await pilot.press("tab")
    else:
        raise AssertionError(f"field {name} cannot be reached with tab (hidden?)")
    await pilot.press("end", "ctrl+u")
    await type_text(pilot, text)
    await pilot.pause()


def shown(app) -> set[str]:
    return {f.name for f in app.screen.shown()}


def visible_rows(app) -> set[str]:
    return {row.id[4:] for row in app.screen.query(".form-row") if row.display}


def counts(db: Path) -> tuple[int, int, int]:
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return tuple(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                     for t in ("benchmarks", "models", "items"))
    finally:
        conn.close()


async def open_dialog(pilot, app) -> None:
    await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
    await pilot.press("o")
    await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="import form")


def done(app):
    return lambda: not app.job.running and app.job.outcome != ""


def toasts(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_dialog_shows_only_the_options_of_the_chosen_format(demo_db):
    app = BenchloupeApp(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await open_dialog(pilot, app)
        base = {"paths", "format", "benchmark", "replace"}
        assert visible_rows(app) == base  # auto with no path yet: nothing format-specific
        await set_field(pilot, "format", "long")
        assert {"model_col", "item_col", "correct_col", "models_file", "exclude_models"} <= visible_rows(app)
        assert not {"item_key", "model", "filter_name", "metric", "reward_model"} & visible_rows(app)
        await set_field(pilot, "format", "lm-eval")
        assert {"model", "metric", "filter_name", "threshold", "item_key", "group_col"} <= visible_rows(app)
        assert not {"model_col", "models_file", "exclude_models"} & visible_rows(app)
        await set_field(pilot, "format", "arena")
        assert {"reward_model", "reward_model_col", "prompt_col", "reward_col"} <= visible_rows(app)
        await set_field(pilot, "format", "auto")
        await set_field(pilot, "paths", str(REAL / "inspect" / "logs"))  # auto detects the folder's format
        assert {"scorer", "score_key", "partial", "item_key", "model"} <= visible_rows(app)
        assert "model_col" not in visible_rows(app)
        assert visible_rows(app) == shown(app)
        # an lm-eval output folder lists results_*.json (not importable) before the samples: detection looks on
        await set_field(pilot, "paths", str(REAL / "lmeval" / "alpha"))
        assert {"model", "filter_name", "metric"} <= visible_rows(app)
        await set_field(pilot, "format", "")  # empty reads as auto
        assert {"model", "filter_name"} <= visible_rows(app)


async def test_several_folders_import_in_one_transaction_with_the_summary(demo_db):
    before = counts(demo_db)
    app = BenchloupeApp(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await open_dialog(pilot, app)
        await set_field(pilot, "paths", f"{REAL / 'lmeval' / 'alpha'} {REAL / 'lmeval' / 'beta'}")
        await set_field(pilot, "benchmark", "arith-tui")
        await pilot.press("ctrl+s")
        await wait_until(pilot, done(app), what="import")
        assert not app.job.failed, app.job.outcome
        assert app.job.outcome.startswith("imported 2 files in one transaction")
        summary = next(t for t in toasts(app) if "one transaction" in t)
        assert "arith-tui (lm-eval): 2 files, 3 items (3 new), 2 models (2 new)" in summary
        assert "  alpha: 3" in summary and "  beta: 3" in summary
    after = counts(demo_db)
    assert after[0] == before[0] + 1 and after[1] >= before[1] and after[2] == before[2] + 3


async def test_glob_with_format_and_options(demo_db):
    app = BenchloupeApp(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await open_dialog(pilot, app)
        await set_field(pilot, "paths", str(REAL / "inspect" / "logs" / "*arith*.eval"))
        await set_field(pilot, "format", "inspect")
        await set_field(pilot, "benchmark", "arith-glob")
        await set_field(pilot, "partial", "correct")
        await pilot.press("ctrl+s")
        await wait_until(pilot, done(app), what="import")
        assert not app.job.failed, app.job.outcome
        summary = next(t for t in toasts(app) if "one transaction" in t)
        assert "arith-glob (inspect): 2 files" in summary


async def test_lm_eval_dummy_model_needs_the_model_field(demo_db):
    """lm_eval --model dummy names its model at random: the error names the form's model field, and with the
    field filled the same folder imports under that name."""
    folder = REAL / "lmeval" / "i82qcls7"
    before = counts(demo_db)
    app = BenchloupeApp(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await open_dialog(pilot, app)
        await set_field(pilot, "paths", str(folder))
        await set_field(pilot, "format", "lm-eval")
        await pilot.press("ctrl+s")
        await wait_until(pilot, done(app), what="failing import")
        assert app.job.failed
        error = next(t for t in toasts(app) if "dummy" in t)
        assert "model field" in error and not FLAG.search(error), error
        assert not FLAG.search(app.job.outcome)
        assert counts(demo_db) == before
        await pilot.press("o")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="import form")
        await set_field(pilot, "paths", str(folder))
        await set_field(pilot, "format", "lm-eval")
        await set_field(pilot, "model", "dummy-arith")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not app.job.running and not app.job.failed, what="import")
        summary = next(t for t in toasts(app) if "one transaction" in t)
        assert "dummy-arith: " in summary


async def test_bad_file_among_good_ones_writes_nothing_and_speaks_form_words(demo_db, tmp_path):
    good = tmp_path / "good.csv"
    good.write_text("model,item,correct\nm1,i1,1\nm1,i2,0\nm2,i1,0\nm2,i2,1\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("who,item,correct\nm3,i1,1\n")
    before = counts(demo_db)
    app = BenchloupeApp(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await open_dialog(pilot, app)
        await set_field(pilot, "paths", f"{good} {bad}")
        await set_field(pilot, "format", "long")
        await set_field(pilot, "benchmark", "tiny")
        await pilot.press("ctrl+s")
        await wait_until(pilot, done(app), what="failing import")
        assert app.job.failed and "bad.csv" in app.job.outcome
        error = next(t for t in toasts(app) if "bad.csv" in t)
        assert "model column field" in error and not FLAG.search(error), error
    assert counts(demo_db) == before


async def test_dialog_refuses_bad_values_before_starting(demo_db, tmp_path):
    before = counts(demo_db)
    app = BenchloupeApp(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await open_dialog(pilot, app)

        async def refused(fragment: str) -> None:
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert type(app.screen).__name__ == "FormDialog" and not app.job.running
            line = str(app.screen.query_one("#dialog-error").render())
            assert fragment in line and "\n" not in line.strip(), line

        await refused("files: give one or more")
        await set_field(pilot, "paths", str(tmp_path / "missing.csv"))
        await refused("no such file or folder")
        await set_field(pilot, "paths", str(REAL / "lmeval" / "alpha"))
        await set_field(pilot, "format", "nope")
        await refused("format: 'nope' is not one of")
        await set_field(pilot, "format", "lm-eval")
        await set_field(pilot, "threshold", "abc")
        await refused("threshold: ")
        await set_field(pilot, "threshold", "inf")
        await refused("threshold: must be a finite number (score at or above which a cell is correct), got inf")
        await set_field(pilot, "threshold", "")
        app.screen.query_one("#field-model").value = "evil\x1b[31m"  # pasted text can hold an escape
        await refused("model: contains the control character U+001B")
        await set_field(pilot, "model", "")
        await set_field(pilot, "paths", f"{REAL / 'lmeval' / 'alpha'} '{tmp_path}/unclosed")
        await refused("files: No closing quotation")
    assert counts(demo_db) == before


async def test_pasted_newline_separated_paths_keep_every_line(demo_db, tmp_path):
    """A list of paths copied from a shell (one per line, one with a space in its folder name) is pasted
    whole; a plain Input keeps only the first line."""
    from textual import events

    spaced = tmp_path / "my results"
    spaced.mkdir()
    csv = spaced / "extra.csv"
    csv.write_text("model,item,correct\nm1,i1,1\nm1,i2,0\nm2,i1,0\nm2,i2,1\n")
    app = BenchloupeApp(demo_db)
    async with app.run_test(size=SIZE) as pilot:
        await open_dialog(pilot, app)
        field = app.screen.query_one("#field-paths")
        assert app.focused is field
        field.post_message(events.Paste(f"{REAL / 'inspect' / 'logs'}\n{csv}\n"))
        await pilot.pause()
        assert field.value == f"{REAL / 'inspect' / 'logs'} '{csv}'"
        await set_field(pilot, "benchmark", "pasted")
        await pilot.press("ctrl+s")
        await wait_until(pilot, done(app), what="import")
        assert not app.job.failed, app.job.outcome
        summary = next(t for t in toasts(app) if "one transaction" in t)
        assert "pasted (" in summary and "4 files" in summary, summary
