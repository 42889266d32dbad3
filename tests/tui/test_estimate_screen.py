"""The Models screen shows an estimate run's partly evaluated models (issue 34) as "est. 61.2 % [58.9, 63.5] · 30 of
249 items", in a column of its own that sorts by the estimate and exports its numbers, never mixed with the
observed accuracy (which the detail line names beside it)."""

from __future__ import annotations

import numpy as np
import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.hostile import run_cli
from tests.integration.test_estimate_cli import N_FULL, N_ITEMS, K, _fit, _workspace
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio


@pytest.fixture
def estimated(tmp_path):
    db, _, _ = _workspace(tmp_path)
    _fit(db)
    assert run_cli(["estimate", "mc", "--db", db])[0] == 0
    return db


async def test_models_screen_shows_estimates_apart(estimated):
    app = BenchloupeApp(estimated, benchmark="mc")
    async with app.run_test(size=(200, 30)) as pilot:
        await pilot.press("3")
        await wait_until(pilot, loaded(app, "models"), what="models")
        table = app.screen.query_one("#models-table")
        col = next(c for c in table.columns if c.key == "est")
        assert col.sort_key == "estimate" and "observed" in col.export and "estimate" in col.export
        frame = table.frame
        partial = frame["name"].isin([f"lab/m{i}" for i in range(N_FULL, N_FULL + 30)])
        assert frame.loc[~partial, "est"].eq("").all() and frame.loc[~partial, "estimate"].isna().all()
        texts = frame.loc[partial, "est"]
        assert texts.str.match(rf"est\. \d+\.\d % \[\d+\.\d, \d+\.\d\] · {K} of {N_ITEMS} items").all()
        assert not np.allclose(frame.loc[partial, "estimate"], frame.loc[partial, "observed"])
        assert table.move_to_value("name", f"lab/m{N_FULL}")
        app.screen._detail()
        detail = str(app.screen.query_one("#models-detail").render())
        assert "est. " in detail and "observed" in detail and f"on the {K} items it answered" in detail
