"""Coverage says which diagnostic failed and calls no uncertain gap trusted (issue 32 point 8): at 80x24 the head
names every failed check within its 80 columns, ``v`` lists each failed check with its value and meaning, and the
widest resolvable gap whose C.6 interval reaches below the item spacing (status "uncertain") is not called
"widest trusted"."""

from __future__ import annotations

import pandas as pd
import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import loaded, wait_until


@pytest.mark.parametrize("check", ["model_information", "item_information", "model_inversion_rate",
                                   "item_inversion_rate", "difficulty_resolution", "max_gap_inside_ability_range",
                                   "a_check_added_later"])
def test_the_notes_name_every_failed_check(check):
    from benchloupe.tui.screens.coverage import CHECK_WORDS, notes_text

    CHECKS = [*CHECK_WORDS, "a_check_added_later"]
    m = {"diagnostic_checks": {c: c != check for c in CHECKS}, "model_information": 0.01, "item_inversion_rate": 0.4}
    notes = notes_text(m).plain
    name = CHECK_WORDS.get(check, (check.replace("_", " "),))[0]
    assert f"diagnostics fail: {name}" in notes, notes
    assert all(CHECK_WORDS[c][0] not in notes for c in CHECK_WORDS if c != check)


@pytest.mark.parametrize("status,trusted", [("uncertain", False), ("gap", True)])
def test_an_uncertain_gap_is_not_called_trusted(status, trusted):
    from benchloupe.tui.screens.coverage import notes_text

    gaps = pd.DataFrame({"width": [0.2, 0.1], "status": [status, "gap"]})
    notes = notes_text({"max_gap_trusted": 0.2, "max_gap_ci": [0.05, 0.15]}, gaps).plain
    assert ("widest trusted gap 0.200" in notes) == trusted, notes
    assert trusted or "widest resolvable gap 0.200 (uncertain)" in notes


@pytest.mark.anyio
async def test_at_80x24_the_head_names_the_failed_check_and_v_lists_it(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("7")
        await wait_until(pilot, loaded(app, "coverage"), what="coverage")
        head = app.screen.query_one("#coverage-head")
        first_line = str(head.render()).splitlines()[0][:80]
        assert "item_inversion" in first_line or "item inversion" in first_line, first_line
        await pilot.press("v")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "NotesScreen", what="notes")
        body = "\n".join(str(w.render()) for w in app.screen.query("SafeStatic"))
        assert "diagnostics fail: item inversion" in body, body
