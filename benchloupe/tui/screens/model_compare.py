"""Is A really better than B (issue 34, part 4), from the Models screen: ``m`` marks a model, ``m`` on a second one
opens this screen with the numbers of ``benchloupe compare`` (:func:`benchloupe.jobs.estimate.compare_models`, the
same function): the exact McNemar test and the paired difference on the items both answered, the clustered
bootstrap where the items carry groups, and, when either model answered only part of the calibrated items, both
estimated full accuracies and their difference, said to go through the estimate. Below, the items where they
differ, most informative at their abilities first. Escape goes back; a new run (another calibration, more
results) reads again."""

from __future__ import annotations

import sqlite3

import pandas as pd
from textual.app import ComposeResult
from textual.binding import Binding

from benchloupe.tui.screens.base import BenchScreen
from benchloupe.tui.widgets.safe import SafeStatic, Text
from benchloupe.tui.widgets.table import Column, FrameTable, fmt_int, fmt_num, format_lines

ITEM_COLUMNS = [Column("key", "item where they differ", 40, identity=True),
                Column("a", "A", 3, fmt_int, right=True), Column("b", "B", 3, fmt_int, right=True),
                Column("information", "information", 11, fmt_num(3), right=True)]


def _points(v: float) -> str:
    return f"{100 * v:+.1f}"


def verdict(p: float, level: float = 0.95) -> str:
    """The exact McNemar p against the level's significance, in words."""
    alpha = round(100 * (1 - level))
    return f"significant at {alpha} %" if p < 1 - level else f"not significant at {alpha} % on these items"


def compare_text(d: dict) -> Text:
    """The comparison's numbers as ``benchloupe compare`` prints them, in lines that wrap at 80 columns."""
    text = Text(f"A = {d['a']}\nB = {d['b']}\n", style="bold")
    text.append(f"{d['common_items']} items both answered: A {100 * d['accuracy_a']:.1f} %, "
                f"B {100 * d['accuracy_b']:.1f} % · A - B {_points(d['difference'])} points "
                f"[{_points(d['difference_lo'])}, {_points(d['difference_hi'])}] (95 %)\n")
    text.append(f"A right, B wrong: {d['a_only']} · A wrong, B right: {d['b_only']} · exact McNemar p = "
                f"{d['mcnemar_p']:.4g}: ")
    text.append(verdict(d["mcnemar_p"]) + "\n", style="bold")
    gb = d.get("group_bootstrap")
    if gb:
        text.append(f"paired bootstrap clustered by item group ({gb['groups']} groups, {gb['replicates']} "
                    f"replicates): A - B [{_points(gb['difference_lo'])}, {_points(gb['difference_hi'])}] points, "
                    f"p = {gb['p_two_sided']:.4f}\n")
    te = d.get("through_estimate")
    if te:
        text.append("through the estimate: ", style="bold yellow")
        text.append(f"{te['note']}\n", style="yellow")
        text.append(f"estimated full accuracy: A {100 * te['estimate_a']:.1f} % ({te['seen_a']} of {te['n_items']} "
                    f"items), B {100 * te['estimate_b']:.1f} % ({te['seen_b']} of {te['n_items']}); A - B "
                    f"{_points(te['difference'])} points [{_points(te['difference_lo'])}, "
                    f"{_points(te['difference_hi'])}]\n")
    if d.get("calibration_run") is not None:
        text.append(f"information from calibration run #{d['calibration_run']}", style="dim")
    else:
        text.append("no calibration yet: the differing items are in file order (4 opens Runs for a static fit)",
                    style="dim")
    return text


class ModelCompareScreen(BenchScreen):
    """Two models of the open benchmark compared on their items (``benchloupe compare``)."""

    MODE = "models"
    HELP_TITLE = "the model comparison"
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="modelcompare.back")]

    def __init__(self, a: str, b: str) -> None:
        super().__init__()
        self.a, self.b = a, b
        self.result: dict | None = None  # what is shown (tests read it)

    def compose_body(self) -> ComposeResult:
        yield SafeStatic(Text(f"comparing {self.a} with {self.b}…", style="dim"), id="modelcompare-head",
                         markup=False)
        yield FrameTable(id="modelcompare-items")

    def fetch(self, conn: sqlite3.Connection, benchmark: str) -> dict:
        from benchloupe.jobs import JobError
        from benchloupe.jobs.estimate import compare_models

        try:
            out = compare_models(self.app.db_path, benchmark, self.a, self.b)
        except JobError as exc:  # no item in common, a model gone: one line, not a failed screen
            return {"error": str(exc.args[0] if exc.args else exc)}
        items = pd.DataFrame(out["differing_items"], columns=["key", "a", "b", "information"])
        return {"result": out, "items": items, "lines": format_lines(items, ITEM_COLUMNS)}

    def show(self, data: dict) -> None:
        head = self.query_one("#modelcompare-head", SafeStatic)
        table = self.query_one(FrameTable)
        if "error" in data:
            self.result = None
            table.clear()
            head.update(Text(f"A = {self.a}\nB = {self.b}\n{data['error']}", style="yellow"))
            return
        self.result = data["result"]
        head.update(compare_text(self.result))
        table.set_data(data["items"], ITEM_COLUMNS, data["lines"], keep_key="key")
        table.focus()

    def forget(self) -> None:
        self.result = None
