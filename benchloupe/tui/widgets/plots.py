"""Terminal plots drawn as Rich Text, cell by cell (no markup): an item's characteristic curve against the
models' abilities, and a difficulty ECDF against the uniform target with the largest gaps shaded.

The curve is the fitted response function ``g + (1 - g) * sigmoid(a * (theta - b))`` (the 2PL with guessing
level g that the calibrations share: engine/joint and engine/irt); evaluating it at the plot's columns
is drawing, not estimation.
"""

from __future__ import annotations

import math

import numpy as np
from rich.style import Style

from benchloupe.tui.widgets.safe import Text

AXIS = Style(dim=True)
CURVE = Style(color="cyan", bold=True)
RIGHT = Style(color="green")
WRONG = Style(color="red")
TARGET = Style(color="yellow", dim=True)
GAP = Style(bgcolor="grey23")
GAP_LABEL = Style(color="magenta", bold=True)


class _Grid:
    def __init__(self, width: int, height: int) -> None:
        self.w, self.h = width, height
        self.chars = [[" "] * width for _ in range(height)]
        self.styles: list[list[Style | None]] = [[None] * width for _ in range(height)]

    def put(self, x: int, y: int, ch: str, style: Style | None = None) -> None:
        if 0 <= x < self.w and 0 <= y < self.h:
            self.chars[y][x] = ch
            if style is not None:
                self.styles[y][x] = style

    def shade(self, x: int, style: Style) -> None:
        for y in range(self.h):
            old = self.styles[y][x]
            self.styles[y][x] = style if old is None else style + old

    def to_text(self, left: list[str], text: Text) -> None:
        for y in range(self.h):
            text.append(left[y], AXIS)
            run, run_style = "", None
            for x in range(self.w):
                ch, st = self.chars[y][x], self.styles[y][x]
                if st != run_style and run:
                    text.append(run, run_style)
                    run = ""
                run_style = st
                run += ch
            if run:
                text.append(run, run_style)
            text.append("\n")


def _labels(height: int, top: str, mid: str, bottom: str) -> list[str]:
    width = max(len(top), len(mid), len(bottom))
    out = [" " * width + " │"] * height
    out[0] = top.rjust(width) + " ┤"
    out[height // 2] = mid.rjust(width) + " ┤"
    out[-1] = bottom.rjust(width) + " ┤"
    return out


MARK = Style(color="yellow", bold=True, reverse=True)


def icc_plot(theta: np.ndarray, outcome: np.ndarray, *, difficulty: float | None, sharpness: float | None,
             chance: float | None = None, width: int = 60, height: int = 10, mark: int | None = None,
             mark_label: str = "") -> Text:
    """Correct (green ●) answers on the top row and wrong (red ○) on the bottom row at each model's ability;
    the fitted curve (cyan) when the item has parameters; x axis = ability. *mark* (a position in *theta*)
    is the model a flag is about: its answer is drawn as a yellow ◆ over the others, with a dashed line down
    its column, and *mark_label* names it under the axis."""
    theta = np.asarray(theta, float)
    outcome = np.asarray(outcome, float)
    fitted = np.isfinite(theta)
    keep = fitted & (outcome >= 0)  # a model with an ability that answered (-1: no answer)
    if mark is not None and not (0 <= mark < len(theta)):
        mark = None
    text = Text(no_wrap=True, overflow="crop")
    has_curve = difficulty is not None and sharpness is not None and math.isfinite(difficulty) \
        and math.isfinite(sharpness)
    if not fitted.any():
        text.append("no fitted abilities yet: run a calibration (4: Runs) to see this item's curve", AXIS)
        return text
    unanswered = not keep.any()  # e.g. an accepted BenchFill item: abilities, but no model has answered it
    if unanswered and not has_curve:  # issue 32 point 9: this said "no fitted abilities yet" above 40 of them
        text.append(f"none of the {int(fitted.sum())} models with an ability has answered this item yet, "
                    "and it has no fitted difficulty: nothing to draw", AXIS)
        return text
    th, y = theta[keep], outcome[keep]
    span = theta[fitted] if unanswered else th
    lo, hi = float(span.min()), float(span.max())
    if difficulty is not None and math.isfinite(difficulty):
        lo, hi = min(lo, difficulty), max(hi, difficulty)
    pad = 0.05 * (hi - lo) + 0.25
    lo, hi = lo - pad, hi + pad
    left = _labels(height, "1", ".5", "0")
    plot_w = max(width - len(left[0]), 10)
    grid = _Grid(plot_w, height)
    col = np.clip(((th - lo) / (hi - lo) * (plot_w - 1)).round().astype(int), 0, plot_w - 1)
    if has_curve:
        g = 0.0 if chance is None or not math.isfinite(chance) else float(chance)
        xs = lo + (hi - lo) * np.arange(plot_w) / (plot_w - 1)
        p = g + (1 - g) / (1 + np.exp(-sharpness * (xs - difficulty)))
        rows = np.clip(((1 - p) * (height - 1)).round().astype(int), 0, height - 1)
        for x, r in enumerate(rows):
            grid.put(x, int(r), "•", CURVE)
        bx = int(round((difficulty - lo) / (hi - lo) * (plot_w - 1)))
        for r in range(height):
            if grid.chars[r][bx] == " ":
                grid.put(bx, r, "┊", AXIS)
    for c, v in zip(col, y):
        grid.put(int(c), 0 if v else height - 1, "●" if v else "○", RIGHT if v else WRONG)
    mark_col = None
    if mark is not None and keep[mark]:
        mark_col = int(np.clip(round((theta[mark] - lo) / (hi - lo) * (plot_w - 1)), 0, plot_w - 1))
        for r in range(1, height - 1):
            if grid.chars[r][mark_col] in (" ", "┊"):
                grid.put(mark_col, r, "╎", Style(color="yellow"))
        grid.put(mark_col, 0 if outcome[mark] else height - 1, "◆", MARK)
    grid.to_text(left, text)
    axis = " " * (len(left[0]) - 1) + "└" + "─" * plot_w + "\n"
    text.append(axis, AXIS)
    lo_s, hi_s = f"θ {lo:+.1f}", f"{hi:+.1f}"
    text.append(" " * len(left[0]) + lo_s + " " * max(plot_w - len(lo_s) - len(hi_s), 1) + hi_s, AXIS)
    if difficulty is not None and math.isfinite(difficulty):
        text.append(f"\n{' ' * len(left[0])}┊ b = {difficulty:+.2f}", AXIS)
        if sharpness is not None and math.isfinite(sharpness):
            text.append(f"   a = {sharpness:.2f}", AXIS)
    if unanswered:
        text.append(f"\n{' ' * len(left[0])}no model has answered this item yet: the curve is its fitted difficulty "
                    f"over the {int(fitted.sum())} models' abilities", AXIS)
    if mark is not None and mark_label:
        text.append("\n" + " " * len(left[0]))
        text.append("◆", MARK)
        where = (f" at θ {theta[mark]:+.2f}, answered {'right' if outcome[mark] else 'wrong'}" if mark_col is not None
                 else " has not answered this item" if fitted[mark]
                 else " has no ability estimate in this run, so it is not on the curve")
        text.append(f" {mark_label}{where}", Style(color="yellow"))
    return text


BAND = Style(color="green", bold=True)


def ecdf_plot(z: np.ndarray, gaps: list[tuple[float, float]], *, width: int = 60, height: int = 12,
              selected: int | None = None, band: tuple[float, float] | None = None) -> Text:
    """ECDF of normalised difficulties *z* (in [0, 1]) as cyan dots, the uniform target as a dim diagonal,
    the listed *gaps* shaded with their rank (1 = largest) under the axis; *selected* is highlighted; *band*
    (the models' ability range on the normalised difficulty axis) is drawn as a green ▔ row under the labels."""
    z = np.sort(np.asarray(z, float)[np.isfinite(z)])
    text = Text(no_wrap=True, overflow="crop")
    if not z.size:
        text.append("no difficulties to plot", AXIS)
        return text
    left = _labels(height, "1", ".5", "0")
    plot_w = max(width - len(left[0]), 10)
    grid = _Grid(plot_w, height)
    xs = (np.arange(plot_w) + 0.5) / plot_w
    labels = [" "] * plot_w
    for k, (glo, ghi) in enumerate(gaps):
        cols = np.flatnonzero((xs >= glo) & (xs <= ghi))
        if not cols.size:
            cols = np.array([min(int(glo * plot_w), plot_w - 1)])
        style = Style(bgcolor="dark_magenta") if selected == k else GAP
        for c in cols:
            grid.shade(int(c), style)
        mid = int(cols[len(cols) // 2])
        labels[mid] = str(k + 1)[-1]
    uni = np.clip(((1 - xs) * (height - 1)).round().astype(int), 0, height - 1)
    for x, r in enumerate(uni):
        grid.put(x, int(r), "·", TARGET)
    f = np.searchsorted(z, xs, side="right") / z.size
    rows = np.clip(((1 - f) * (height - 1)).round().astype(int), 0, height - 1)
    for x, r in enumerate(rows):
        grid.put(x, int(r), "●", CURVE)
    grid.to_text(left, text)
    text.append(" " * (len(left[0]) - 1) + "└" + "─" * plot_w + "\n", AXIS)
    text.append(" " * len(left[0]))
    text.append("".join(labels), GAP_LABEL)
    if band is not None and all(math.isfinite(v) for v in band):
        inside = (xs >= band[0]) & (xs <= band[1])
        text.append("\n" + " " * len(left[0]))
        text.append("".join("▔" if v else " " for v in inside), BAND)
    text.append("\n" + " " * len(left[0]) + "0" + " " * (plot_w - 2) + "1", AXIS)
    return text
