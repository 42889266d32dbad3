"""One module per screen; ``SCREENS`` maps the app's modes to (screen reference, key, title).

A screen's module is imported when the screen is first shown (or by the app's warm-up in the background), not
when the app is: the list screens import pandas and the BenchFill screen the simulated endpoint, which cost the
first paint of ``benchloupe open`` half a second on a leaderboard-sized workspace (issue 26). A
:class:`ScreenRef` is what Textual's ``App.MODES`` takes (a callable that returns the screen) and gives the
class itself (``.cls``) to what needs it (the command palette's bindings).
"""

from __future__ import annotations

import importlib


class ScreenRef:
    """The screen class ``module.name``, imported at its first use; calling it makes a screen."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name
        self._cls: type | None = None

    @property
    def cls(self) -> type:
        if self._cls is None:
            self._cls = getattr(importlib.import_module(self.module), self.name)
        return self._cls

    @property
    def loaded(self) -> type | None:
        """The class when its module was imported already (None otherwise: no screen of it exists)."""
        return self._cls

    def __call__(self):
        return self.cls()

    def __repr__(self) -> str:
        return f"ScreenRef({self.module}.{self.name})"


def _ref(module: str, name: str) -> ScreenRef:
    return ScreenRef(f"benchloupe.tui.screens.{module}", name)


SCREENS = {
    "benchmarks": (_ref("benchmarks", "BenchmarksScreen"), "1", "Benchmarks"),
    "items": (_ref("items", "ItemsScreen"), "2", "Items"),
    "models": (_ref("models", "ModelsScreen"), "3", "Models"),
    "runs": (_ref("runs", "RunsScreen"), "4", "Runs"),
    "anomalies": (_ref("anomalies", "AnomaliesScreen"), "5", "Anomalies"),
    "reversals": (_ref("reversals", "ReversalsScreen"), "6", "Reversals"),
    "coverage": (_ref("coverage", "CoverageScreen"), "7", "Coverage"),
    "benchfill": (_ref("benchfill", "BenchFillScreen"), "8", "BenchFill"),
    "itemflags": (_ref("itemflags", "ItemFlagsScreen"), "9", "Item flags"),
}


def import_all() -> None:
    """Import every screen's module (the app's warm-up, in a thread, after the first screen is up)."""
    for ref, _key, _title in SCREENS.values():
        ref.cls  # noqa: B018 - the import is the point
