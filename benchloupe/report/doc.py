"""The document model of a report: sections made of paragraphs, tables and figures.

A figure carries its SVG, a caption (what it shows and how to read it), alt text, and its numbers as a
:class:`Table` written at full precision (``repr`` of each float) as a CSV beside it. Text from data stays raw
here; each renderer escapes it (:mod:`.html`, :mod:`.markdown`).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field


@dataclass
class Table:
    """Rows under named columns; ``note`` says what the rows are (and, when cut, how many there are in all)."""

    columns: list[str]
    rows: list[tuple]
    note: str = ""
    source: str = ""  # the command that writes these numbers from the database (a figure's CSV too big to embed)

    def csv_text(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.columns)
        for row in self.rows:
            w.writerow([full_precision(v) for v in row])
        return buf.getvalue()


@dataclass
class Figure:
    """One figure: ``key`` names its files (``KEY.svg``, ``KEY.csv``), ``data`` holds every number drawn."""

    key: str
    title: str
    caption: str
    alt: str
    svg: str
    data: Table


@dataclass
class Para:
    text: str


@dataclass
class Section:
    """A section of the report; ``runs`` describes the runs it read (empty with ``missing`` saying which command
    makes the run it needs)."""

    key: str
    title: str
    runs: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    blocks: list = field(default_factory=list)

    def para(self, text: str) -> None:
        self.blocks.append(Para(text))

    def table(self, columns: list[str], rows: list[tuple], note: str = "") -> None:
        self.blocks.append(Table(columns, rows, note))

    def figure(self, fig: Figure | None) -> None:
        if fig is not None:
            self.blocks.append(fig)


def full_precision(v) -> str:
    """A CSV cell: a float as Python's shortest round-tripping repr, NaN and None as empty."""
    if v is None:
        return ""
    if isinstance(v, float):  # numpy's float64 too: its repr would read np.float64(...)
        return "" if math.isnan(v) else repr(float(v))
    if hasattr(v, "item"):  # numpy scalar
        return full_precision(v.item())
    return str(v)


def fmt(v, digits: int = 3) -> str:
    """A number for a table cell shown to a reader (the CSV keeps full precision)."""
    if v is None:
        return "–"
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 10 ** -digits):
            return f"{v:.{digits}g}"
        return f"{v:.{digits}f}"
    return str(v)
