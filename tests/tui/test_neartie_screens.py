"""Issue 22 in the TUI: the near-tie form puts the method's switches first, and the owner split's stability
reaches the Reversals screen's header and the run details (a real run on the demo workspace, keys only)."""

from __future__ import annotations

import pytest

from benchloupe import jobs
from benchloupe.engine.neartie import AuditConfig
from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.screens.run_forms import analysis_fields, default_config
from tests.tui.conftest import loaded, wait_until

pytestmark = pytest.mark.anyio
SWITCHES = ["protocol", "anchor_ties", "family_from", "representative", "drop_small_families", "split_seeds"]


def test_neartie_form_puts_the_methods_switches_first():
    """It had about 30 fields with protocol last."""
    analysis = jobs.ANALYSES["neartie"]
    form = analysis_fields(analysis, default_config(analysis), "demo-chem")
    fields = [f.name for f in form]
    assert fields[0] == "benchmark"
    config = [n[4:] for n in fields if n.startswith("cfg-")]
    assert config[:len(SWITCHES)] == SWITCHES and config[-1] != "protocol"
    choices = {f.name: f.choices for f in form}
    assert choices["cfg-protocol"] == ("primary", "full") and choices["cfg-anchor_ties"] == ("exact", "float")
    split = next(f for f in form if f.name == "cfg-split_seeds")
    assert split.value == "" and "20 with protocol full" in split.help and split.parse("") is None


async def test_reversals_header_and_run_details_show_the_split_stability(demo_db):
    rid = jobs.ANALYSES["neartie"].run(demo_db, "demo-chem", AuditConfig(controls=49, dimensions=(1, 2, 4),
                                                                        split_seeds=2))
    app = BenchloupeApp(demo_db, benchmark="demo-chem")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("6")
        await wait_until(pilot, loaded(app, "reversals"), what="reversals")
        first = str(app.screen.query_one("#queue-detail").render()).splitlines()[1]
        assert first.startswith("Owner split: ") and " of 2 splits agree" in first and "knife edges" in first
        await pilot.press("4")
        await wait_until(pilot, loaded(app, "runs"), what="runs")
        detail = str(app.screen.query_one("#run-detail").render())
        assert f"run #{rid}" in detail and "split stability: " in detail and " of 2 splits agree" in detail
