"""One module per screen; ``SCREENS`` maps the app's modes to (screen class, key, title)."""

from __future__ import annotations

from benchloupe.tui.screens.anomalies import AnomaliesScreen
from benchloupe.tui.screens.benchfill import BenchFillScreen
from benchloupe.tui.screens.benchmarks import BenchmarksScreen
from benchloupe.tui.screens.coverage import CoverageScreen
from benchloupe.tui.screens.items import ItemsScreen
from benchloupe.tui.screens.models import ModelsScreen
from benchloupe.tui.screens.reversals import ReversalsScreen
from benchloupe.tui.screens.runs import RunsScreen

SCREENS = {
    "benchmarks": (BenchmarksScreen, "1", "Benchmarks"),
    "items": (ItemsScreen, "2", "Items"),
    "models": (ModelsScreen, "3", "Models"),
    "runs": (RunsScreen, "4", "Runs"),
    "anomalies": (AnomaliesScreen, "5", "Anomalies"),
    "reversals": (ReversalsScreen, "6", "Reversals"),
    "coverage": (CoverageScreen, "7", "Coverage"),
    "benchfill": (BenchFillScreen, "8", "BenchFill"),
}
