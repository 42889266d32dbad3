"""The analysis forms of the Runs screen (issue 11, items 7 and 9): only the fields of the chosen method are
shown, a bad value gets one line naming the field and starts nothing, and every failure a form's run can end in
is told in the form's words (no CLI flag, no CLI command). Keys only, on the demo workspace's SQLite file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import loaded, wait_until
from tests.tui.test_import_dialog import set_field, toasts, visible_rows

SIZE = (120, 40)
pytestmark = pytest.mark.anyio
CLI_WORDS = re.compile(r"(?<![\w-])--[a-z]|`benchloupe ")


def run_count(db: Path) -> int:
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    finally:
        conn.close()


async def open_form(pilot, app, analysis: str) -> None:
    """From anywhere: 4 (Runs), walk the analyses table to *analysis*, n opens its form."""
    if getattr(app.screen, "MODE", None) != "runs":
        await pilot.press("4")
    await wait_until(pilot, loaded(app, "runs"), what="runs")
    table = app.screen.query_one("#analyses")
    table.focus()
    await pilot.press("home")
    for _ in range(len(table.frame) + 1):
        if table.current_value("name") == analysis:
            break
        await pilot.press("down")
    assert table.current_value("name") == analysis
    await pilot.press("n")
    await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what=f"{analysis} form")


async def test_fit_form_shows_only_the_chosen_methods_fields(demo_db):
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await open_form(pilot, app, "joint")
        rows = visible_rows(app)
        assert {"arena", "reward_model", "cfg-lambda_pref", "cfg-tie_pct", "cfg-lambda_static", "cfg-max_iter"} <= rows
        assert not {"cfg-epochs", "cfg-lr"} & rows  # Adam's settings: the default optimiser is Newton
        await set_field(pilot, "cfg-mode", "static")
        rows = visible_rows(app)
        assert "cfg-lambda_static" in rows
        assert not {"arena", "reward_model", "cfg-lambda_pref", "cfg-lambda_bb", "cfg-tie_pct", "cfg-bb_pct",
                    "cfg-gamma0"} & rows
        await set_field(pilot, "cfg-optimizer", "adam")
        rows = visible_rows(app)
        assert {"cfg-epochs", "cfg-lr"} <= rows and not {"cfg-max_iter", "cfg-gtol", "cfg-ftol"} & rows
        await set_field(pilot, "cfg-mode", "arena")
        assert "cfg-lambda_static" not in visible_rows(app) and "arena" in visible_rows(app)
        await pilot.press("escape")
        await open_form(pilot, app, "static")  # the static fit opens in static mode: no arena fields at all
        assert not {"arena", "cfg-lambda_pref", "cfg-tie_pct"} & visible_rows(app)
        await pilot.press("escape")
        await open_form(pilot, app, "coverage")
        assert {"cfg-n_draws", "cfg-prior"} <= visible_rows(app)
        assert not {"cfg-folds", "cfg-permutations"} & visible_rows(app)
        await set_field(pilot, "cfg-uncertainty", "none")
        await set_field(pilot, "cfg-method", "mml")
        await set_field(pilot, "cfg-robustness", "loo")
        rows = visible_rows(app)
        assert not {"cfg-n_draws", "cfg-prior"} & rows and "cfg-folds" in rows
        await pilot.press("escape")
        await open_form(pilot, app, "compress")
        assert "cfg-export_name" not in visible_rows(app)
        await set_field(pilot, "cfg-export_fraction", "0.25")
        assert "cfg-export_name" in visible_rows(app)


@pytest.mark.parametrize("analysis", ["anomalies", "compress", "bootstrap", "contamination"])
def test_forms_start_from_a_mode_the_config_has(analysis):
    """The form prefilled mode=<analysis name> for every config with a mode ("anomalies", "compress"), and
    every such run failed with "mode must be one of ('joint', 'static', 'arena')"."""
    from benchloupe.jobs import ANALYSES
    from benchloupe.tui.screens.run_forms import default_config

    assert default_config(ANALYSES[analysis]).mode == "auto"
    assert default_config(ANALYSES["static"]).mode == "static"


async def test_anomalies_with_the_forms_defaults_runs(demo_db):
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await open_form(pilot, app, "anomalies")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not app.job.running and app.job.outcome != "", what="anomalies")
        assert not app.job.failed, app.job.outcome


BAD_VALUES = [  # (analysis, field, typed value, what the one line says)
    ("joint", "cfg-epochs", "abc", None),  # hidden with Newton: set below with adam
    ("static", "cfg-max_iter", "abc", "max_iter: 'abc' is not a whole number"),
    ("static", "cfg-max_iter", "99999999999999999999999", "max_iter: must be a whole number from 1 to 1,000,000"),
    ("static", "cfg-max_iter", "0", "max_iter: must be a whole number from 1 to 1,000,000 (iterations), got 0"),
    ("static", "cfg-gtol", "1e999", "gtol: must be a number above 0 and below 1, got 1e999"),
    ("static", "cfg-gtol", "nan", "gtol: must be a number above 0 and below 1, got nan"),
    ("static", "cfg-lambda_static", "-1", "lambda_static: must be a number from 0 to 1,000,000, got -1"),
    ("static", "cfg-variant", "papers", "variant: 'papers' is not one of paper, reference"),
    ("joint", "cfg-tie_pct", "150", "tie_pct: must be a number from 0 to 100 (percentile), got 150"),
    ("joint", "cfg-lambda_reg", "x", "lambda_reg: 'x' is not a number"),
    ("coverage", "cfg-delta", "2", "delta: must be a number above 0 and below 1, got 2"),
    ("coverage", "cfg-k", "0", "k: must be a whole number from 1 to 1,000,000 (gaps), got 0"),
    ("coverage", "cfg-group", "\x1b[31mred", "group: contains the control character U+001B"),
    ("coverage", "cfg-target", "uniform\u202e", "target: contains the control character U+202E"),
    ("coverage", "benchmark", "no-such-bench", "benchmark: no benchmark named 'no-such-bench'"),
    ("compress", "arena", "nope", "arena benchmark: no benchmark named 'nope'"),
    ("anomalies", "cfg-protocol", "maybe", "protocol: 'maybe' is not true/false"),
    ("bootstrap", "cfg-B", "1", "B: must be a whole number from 2 to 100,000 (replicates), got 1"),
    ("neartie", "cfg-family_from", "vibes", "family_from: 'vibes' is not one of"),
    ("neartie", "cfg-split_seeds", "-1", "split_seeds: must be a whole number from 0 to 1,000"),
    ("items", "cfg-alpha", "1", "alpha: must be a number above 0 and below 1, got 1"),
    ("items", "cfg-n_perm", "-5", "n_perm: must be a whole number from 0 to 1,000,000"),
]


async def test_bad_values_get_one_line_naming_the_field_and_start_nothing(demo_db):
    before = run_count(demo_db)
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        for analysis, field, value, expected in BAD_VALUES:
            if expected is None:
                continue
            await open_form(pilot, app, analysis)
            if "\x1b" in value or "\u202e" in value:  # pasted text: a terminal cannot type these
                app.screen.query_one(f"#field-{field}").value = value
            else:
                await set_field(pilot, field, value)
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert type(app.screen).__name__ == "FormDialog", (analysis, field)
            assert not app.job.running and app.job.title == "", (analysis, field)
            line = str(app.screen.query_one("#dialog-error").render()).strip()
            assert expected in line and "\n" not in line, (analysis, field, line)
            assert not CLI_WORDS.search(line), line
            await pilot.press("escape")
    assert run_count(demo_db) == before


FAILURES = [  # (analysis, benchmark, fields to set): each ends in a failed run
    ("joint", "demo-math", {}),
    ("joint", "demo-arena", {}),
    ("static", "demo-arena", {}),
    ("arena", "demo-math", {}),
    ("bt", "demo-math", {}),
    ("avg-reward", "demo-math", {}),
    ("evaluate", "demo-math", {"cfg-ablation": "true"}),
    ("compress", "demo-math", {"cfg-mode": "arena"}),
    ("anomalies", "demo-math", {"cfg-mode": "arena"}),
    ("bootstrap", "demo-math", {"cfg-mode": "arena"}),
    ("screen", "demo-math", {}),
    ("screen", "demo-math", {"cfg-model": "nope"}),
    ("contamination", "demo-arena", {}),  # demo-math carries dates and cutoffs now (issue 32 #13)
    ("neartie", "demo-math", {"cfg-min_family_models": "500"}),
    ("neartie", "demo-arena", {}),
    ("coverage", "demo-arena", {}),
    ("calibrate", "demo-math", {}),
    ("estimate", "demo-arena", {}),  # no static calibration to estimate from
    ("items", "demo-arena", {}),  # no static results to audit
]


async def test_every_forms_failures_speak_the_forms_words(demo_db):
    from benchloupe.jobs import ANALYSES

    assert {a for a, _, _ in FAILURES} == set(ANALYSES), "every analysis has a failure path here"
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        for analysis, bench, fields in FAILURES:
            seen, old_job = set(toasts(app)), app.job
            await open_form(pilot, app, analysis)
            await set_field(pilot, "benchmark", bench)
            for name, value in fields.items():
                await set_field(pilot, name, value)
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda old=old_job: app.job is not old and not app.job.running and
                             app.job.outcome != "", what=f"{analysis} on {bench}")
            assert app.job.failed, (analysis, bench, app.job.outcome)
            new = [t for t in toasts(app) if t not in seen]
            assert new, (analysis, bench)
            for text in [*new, app.job.outcome]:
                assert not CLI_WORDS.search(text), (analysis, bench, text)
            await wait_until(pilot, loaded(app, "runs"), what="runs again")


PAPER_WORDS = re.compile(r"paper \d{3}|§|Appendix [A-Z]|(?<![\w-])--[a-z]")


async def test_runs_list_and_details_use_words(demo_db):
    """Coverage records its difficulty source as "1PL MAP fit of this benchmark (paper 003 C.3)"; the Runs
    screen shows the analyses, the history and every run's full detail without such citations."""
    from benchloupe.jobs import ANALYSES
    from benchloupe.tui.screens.run_forms import default_config

    for name in ("coverage", "anomalies"):
        ANALYSES[name].run(demo_db, "demo-math", default_config(ANALYSES[name]))
    app = BenchloupeApp(demo_db, benchmark="demo-math")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("4")
        await wait_until(pilot, loaded(app, "runs"), what="runs")
        titles = " ".join(app.screen.query_one("#analyses").frame["title"])
        assert not PAPER_WORDS.search(titles), titles
        hist = app.screen.query_one("#history")
        hist.focus()
        await pilot.press("home")
        details = []
        for _ in range(len(hist.frame)):
            await pilot.press("enter")
            details.append(str(app.screen.query_one("#run-detail").render()))
            await pilot.press("down")
        assert len(details) == 2 and "difficulty_source=1PL MAP fit of this benchmark" in " ".join(details)
        for text in details:
            assert not PAPER_WORDS.search(text), text


async def test_benchfill_form_shows_the_seed_with_the_baseline_and_refuses_bad_values(flagged_db):
    """The seed only draws the best-of-N baseline's parents: hidden until the baseline is on; bad counts and
    formats get one line naming the field, and no session starts."""
    from benchloupe.store.db import connect

    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        await pilot.press("b")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FormDialog", what="fill form")
        assert "cfg-seed" not in visible_rows(app) and "cfg-n_parents" in visible_rows(app)
        await set_field(pilot, "baseline", "true")
        assert "cfg-seed" in visible_rows(app)
        for field, value, expected in (("gap", "0", "gap (1 = largest): must be a whole number from 1 to 1,000,000"),
                                       ("gap", "two", "gap (1 = largest): 'two' is not a whole number"),
                                       ("answer_format", "essay", "answer format: 'essay' is not one of auto"),
                                       ("cfg-n_parents", "-3", "n_parents: must be a whole number from 1 to 1,000, got -3"),
                                       ("cfg-tolerance", "nan", "tolerance: must be a number above 0 and below 1, got nan")):
            await set_field(pilot, field, value)
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert type(app.screen).__name__ == "FormDialog" and not app.job.running
            line = str(app.screen.query_one("#dialog-error").render()).strip()
            assert expected in line, line
            await set_field(pilot, field, {"gap": "1", "answer_format": "auto"}.get(field, "4" if "parents" in field
                                                                                   else "0.01"))
    conn = connect(flagged_db)
    try:
        assert conn.execute("SELECT COUNT(*) FROM fill_sessions").fetchone()[0] == 0
    finally:
        conn.close()


def test_form_labels_are_whole_or_cut_with_an_ellipsis():
    """A fixed 20-cell label column cut "min_family_models_per_half" to "min_family_models_pe" (seen in tmux)."""
    from benchloupe.tui.widgets.dialogs import LABEL_MAX, Field, cut_label, label_width

    fields = [Field("a", "min_family_models_per_half", "2", int), Field("b", "gap", "0.01", float)]
    assert label_width(fields) == len("min_family_models_per_half") + 1
    long = "x" * 20 + "_tail_of_a_long_label"
    assert label_width([Field("c", long, "", str)]) == LABEL_MAX
    cut = cut_label(long, LABEL_MAX - 1)
    assert len(cut) == LABEL_MAX - 1 and "…" in cut and cut.startswith("xxx") and cut.endswith("label")
