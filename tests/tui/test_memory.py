"""The app's memory stays flat while a curator moves between screens (issue 11: "memory stays flat").

Textual's Footer data-binds each FooterKey to its ``compact`` reactive; the binding is a watcher on the footer
that is pruned only when ``compact`` changes, which it never does here, so every recompose (each screen switch
refreshes the bindings) kept the previous keys alive: ~11 dead widgets, ~0.6 MB, per switch, without bound."""

from __future__ import annotations

import gc

import pytest
from textual.widgets._footer import FooterKey

from benchloupe.tui.app import BenchloupeApp
from tests.tui.conftest import idle, wait_until

pytestmark = pytest.mark.anyio


def _footer_keys() -> tuple[int, int]:
    gc.collect()
    keys = [o for o in gc.get_objects() if isinstance(o, FooterKey)]
    return len(keys), sum(1 for k in keys if k.is_attached)


async def test_screen_switches_leave_no_dead_footer_keys_alive(demo_db):
    app = BenchloupeApp(demo_db)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, idle(app), what="start")
        for _ in range(20):
            for key in "23":
                await pilot.press(key)
                await wait_until(pilot, idle(app), what=f"screen {key}")
        alive, attached = _footer_keys()
    assert alive <= 3 * max(attached, 1) + 40, (alive, attached)
