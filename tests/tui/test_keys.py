"""Every key a screen advertises is one a terminal can send and reaches the action it names (issue 11, "keys
that do nothing"), and the keys whose behaviour was missing do what their description says."""

from __future__ import annotations

import string

import pytest
from textual.keys import _character_to_key

from benchloupe.tui.app import BenchloupeApp
from benchloupe.tui.screens import SCREENS
from tests.tui.conftest import idle, loaded, wait_until

pytestmark = pytest.mark.anyio
SIZE = (80, 24)

# What a terminal sends: each printable character under Textual's name for it, the named keys (alone or with
# ctrl/shift), ctrl+letters.
NAMED = {"enter", "escape", "tab", "up", "down", "left", "right", "pageup", "pagedown", "home", "end", "delete",
         "backspace", "insert"} | {f"f{n}" for n in range(1, 13)}
TERMINAL_KEYS = ({_character_to_key(chr(c)) for c in range(33, 127)} | {"space"} | NAMED
                 | {f"{mod}+{k}" for mod in ("ctrl", "shift", "ctrl+shift") for k in NAMED}
                 | {f"{mod}+{c}" for mod in ("ctrl", "super") for c in string.ascii_lowercase})


class RecordingApp(BenchloupeApp):
    """The real app; while ``recording``, a key's action is noted instead of run (so the walk can press every
    key without starting jobs or opening dialogs)."""

    recording = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.recorded: list[str] = []

    async def run_action(self, action, default_namespace=None, namespaces=None) -> bool:
        if self.recording:
            if (isinstance(action, str) and default_namespace is not None
                    and self._check_action_state(action, default_namespace) is False):
                return False  # disabled here (check_action): the key goes on to the next node, as in a real run
            self.recorded.append(action if isinstance(action, str) else str(action))
            return True
        return await super().run_action(action, default_namespace, namespaces)


def _target(active, app):
    action = active.binding.action
    if action.startswith("app."):
        return app, action[4:]
    if action.startswith("screen."):
        return app.screen, action[7:]
    return active.node, action


async def _walk(pilot, app, where: str) -> int:
    screen = app.screen
    checked = 0
    for key, active in list(screen.active_bindings.items()):
        b = active.binding
        if not b.description or not active.enabled or b.system:
            continue
        assert key in TERMINAL_KEYS, f"{where}: {key!r} ({b.description}) is not a key a terminal sends"
        node, action = _target(active, app)
        name = action.split("(")[0]
        assert hasattr(node, f"action_{name}"), f"{where}: {key} ({b.description}) has no action {name}"
        app.recorded.clear()
        app.recording = True
        try:
            await pilot.press(key)
        finally:
            app.recording = False
        assert app.recorded, f"{where}: pressing {key} ({b.description}) ran nothing"
        assert app.recorded[0] == b.action, f"{where}: {key} ran {app.recorded[0]}, not {b.action}"
        checked += 1
    return checked


async def test_every_advertised_key_reaches_its_action(flagged_db):
    app = RecordingApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        for mode, (_cls, key, _title) in SCREENS.items():
            await pilot.press(key)
            await wait_until(pilot, loaded(app, mode), what=mode)
            assert await _walk(pilot, app, mode) >= 3
        await pilot.press("2")
        await wait_until(pilot, loaded(app, "items"), what="items")
        await pilot.press("enter")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ItemPanel" and idle(app)(), what="panel")
        assert await _walk(pilot, app, "item panel") >= 2
        await pilot.press("escape", "B")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "BenchmarkPicker" and idle(app)(), what="picker")
        assert await _walk(pilot, app, "benchmark picker") >= 4  # enter, escape, and the table's s, /


async def test_help_lists_the_footer_keys_and_everywhere_keys(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, loaded(app, "benchmarks"), what="benchmarks")
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen", what="help")
        text = str(app.screen.query_one("Static").render())
        assert "ctrl+q" not in text
        everywhere = text.split("Everywhere", 1)[1]
        for key, what in (("q", "quit"), ("x", "cancel"), ("?", "help")):
            assert any(line.strip().startswith(key + " ") and what in line for line in everywhere.splitlines()), \
                f"{key} missing from Everywhere:\n{everywhere}"


async def test_enter_on_models_shows_that_models_flags(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await wait_until(pilot, loaded(app, "models"), what="models")
        table = app.screen.query_one("#models-table")
        flagged = set(_anomaly_models(flagged_db))
        while int(table.frame["id"].iloc[table.row]) not in flagged:
            await pilot.press("down")
        model_id = int(table.frame["id"].iloc[table.row])
        await pilot.press("enter")
        await wait_until(pilot, loaded(app, "anomalies"), what="anomalies")
        screen = app.screen
        await wait_until(pilot, lambda: len(screen.view) > 0, what="the model's flags")
        assert set(screen.flags["model_id"].iloc[screen.view]) == {model_id}
        assert len(screen.view) == _anomaly_models(flagged_db).count(model_id)
        assert "only model" in str(screen.query_one("#queue-status").render())
        await pilot.press("escape")
        assert len(screen.view) == len(screen.flags)


async def test_enter_on_a_reversal_opens_its_driving_item(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("6")
        await wait_until(pilot, loaded(app, "reversals"), what="reversals")
        row = app.screen.flags.iloc[app.screen.view[app.screen.pos]]
        key = row["payload"]["top_items"][0]["item"]
        await pilot.press("enter")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ItemPanel" and idle(app)(), what="panel")
        assert app.screen.detail["key"] == key


def _anomaly_models(db) -> list[int]:
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    conn = connect(db)
    try:
        return [int(m) for m in curation.flags(conn, kind="anomaly")["model_id"]]
    finally:
        conn.close()


async def test_every_footer_key_fits_at_80_columns(flagged_db):
    """Each key the footer shows is drawn whole inside 80 columns, clear of the palette hint (the queue footer
    used to cut "e Note"); keys that do not fit are left to help (tested above)."""
    from textual.widgets._footer import FooterKey

    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        for mode, (_cls, key, _title) in SCREENS.items():
            await pilot.press(key)
            await wait_until(pilot, loaded(app, mode), what=mode)
            await pilot.pause(0.1)
            keys = list(app.screen.query(FooterKey))
            palette = [k for k in keys if k.has_class("-command-palette")]
            right = palette[0].region.x if palette else SIZE[0]
            shown = [k for k in keys if k not in palette]
            assert shown, mode
            for k in shown:
                assert k.region.width > 0 and k.region.right <= right, \
                    f"{mode}: {k.key_display or k.key} {k.description} is cut at 80 columns ({k.region})"


async def test_batch_and_jump_keys_are_in_help_on_every_queue(flagged_db):
    app = BenchloupeApp(flagged_db, benchmark="demo-math")
    async with app.run_test(size=SIZE) as pilot:
        for key, mode, wanted in (("5", "anomalies", ("space", "M", "I", "i", "m", "z", "enter")),
                                  ("6", "reversals", ("space", "i", "m", "z", "enter")),
                                  ("7", "coverage", ("space", "z", "n")),
                                  ("8", "benchfill", ("space", "z", "e", "l", "X"))):
            await pilot.press(key)
            await wait_until(pilot, loaded(app, mode), what=mode)
            await pilot.press("question_mark")
            await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen", what="help")
            text = str(app.screen.query_one("Static").render())
            own = text.split("Everywhere", 1)[0]
            for k in wanted:
                assert any(line.strip().split("  ")[0].split(", ").count(k) for line in own.splitlines()), \
                    f"{mode}: {k} missing from help:\n{own}"
            await pilot.press("escape")
