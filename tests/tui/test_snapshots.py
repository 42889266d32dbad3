"""Snapshot tests: every screen at 80x24 on the demo workspace with flags (fixed timestamps, no fits, so
the pictures are deterministic). Regenerate with ``pytest tests/tui/test_snapshots.py --snapshot-update``
and look at the SVGs under tests/tui/__snapshots__/ before committing them."""

from __future__ import annotations

import pytest

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import loaded, wait_until

SIZE = (80, 24)


def _run_before(keys: tuple[str, ...], mode: str, then: tuple[str, ...] = (), screen: str | None = None):
    async def run(pilot) -> None:
        app = pilot.app
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        if keys:
            await pilot.press(*keys)
        await wait_until(pilot, loaded(app, mode), what=mode)
        if then:
            await pilot.press(*then)
        if screen:
            await wait_until(pilot, lambda: type(app.screen).__name__ == screen
                             and getattr(app.screen, "shown_token", 1) is not None, what=screen)
        await wait_until(pilot, lambda: not any(w.is_running for w in app.workers), what="idle")
    return run


CASES = {
    "benchmarks": ((), "benchmarks", (), None),
    "items": (("2",), "items", (), None),
    "item_panel": (("2",), "items", ("enter",), "ItemPanel"),
    "models": (("3",), "models", (), None),
    "runs": (("4",), "runs", (), None),
    "anomalies": (("5",), "anomalies", ("j",), None),
    "reversals": (("6",), "reversals", (), None),
    "coverage": (("7",), "coverage", (), None),
    "benchfill": (("8",), "benchfill", (), None),
    "help": (("5",), "anomalies", ("question_mark",), "HelpScreen"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_screen_snapshot(name, flagged_db, snap_compare):
    keys, mode, then, screen = CASES[name]
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    assert snap_compare(app, terminal_size=SIZE, run_before=_run_before(keys, mode, then, screen))


def test_literal_item_snapshot(flagged_db, snap_compare):
    """Markup-looking, emoji and 4,000-character text: drawn literally, the layout holds."""
    app = BenchloupeApp(flagged_db, benchmark="literal")
    assert snap_compare(app, terminal_size=SIZE, run_before=_run_before(("2",), "items", ("enter",), "ItemPanel"))
