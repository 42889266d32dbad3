"""A virtual table over a frame: only the visible lines are rendered, filtering/sorting swap an index.

Textual's DataTable measures and stores every cell; at 14,000 rows x 11 columns adding the rows took 3.8 s
(5.2 s with automatic widths) on the development machine, and a search that re-adds the filtered rows pays
that again on every keystroke. Here each row is formatted once into a fixed-width line, when it is first
drawn (:class:`LazyLines`; or all at once with :func:`format_lines`), and a filter or sort is a new numpy index
into those lines: the Line API then draws the ~40 lines on screen. Cell text is a plain ``Segment``, so data is
never read as markup.

The frame is a pandas DataFrame or a :class:`~benchloupe.columns.Columns` (the Benchmarks screen, the first
one painted, which must not wait for pandas' import: issue 26); searching, sorting and exporting a Columns
table load pandas then.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

import numpy as np
from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from textual.binding import Binding
from textual.containers import Horizontal
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBarRender
from textual.strip import Strip
from textual.widgets import Input

from benchloupe.columns import Columns
from benchloupe.tui.widgets.safe import SafeStatic, Text, cell_text

if TYPE_CHECKING:
    import pandas as pd


def fmt_num(digits: int = 2, signed: bool = False) -> Callable[[object], str]:
    """A formatter for floats: blank for missing, fixed digits."""
    spec = f"{'+' if signed else ''}.{digits}f"

    def f(v) -> str:
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return ""
        return format(float(v), spec)
    return f


def fmt_int(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    return str(int(v))


_LAYOUT = re.compile(r"[ \t\n]+")


def fmt_str(v) -> str:
    """Text on one line (newlines, tabs and runs of spaces collapsed; long text cut at 300 characters). Only
    those: ``str.split()`` also took CR, VT and FF for spaces, so "key\\r1" read "key 1" (issue 21 item 10);
    they stay and :func:`cell_text` shows them escaped."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    return _LAYOUT.sub(" ", str(v)[:300]).strip(" ")


@dataclass(frozen=True)
class Column:
    """One column: frame key, header label, width in cells, formatter, alignment.

    ``identity``: the column names the row (a model name, an item key): too long a value is cut in the middle
    with an ellipsis so that distinct names stay distinct, the column takes the width the others leave
    (:func:`fit_columns`), and it stays put when the table scrolls sideways. ``sort_key``: the frame column to
    sort by when it is not ``key`` (a display text over a number). ``export``: the frame columns an export
    (``w``) writes in its place when ``key`` holds display text (an interval drawn as "[a,b]", a difficulty
    shown as "all right"): the stored values at full precision, never the text drawn (issue 21 item 4); ``()``
    leaves the column out of exports."""

    key: str
    label: str
    width: int
    fmt: Callable[[object], str] = fmt_str
    right: bool = False
    identity: bool = False
    sort_key: str | None = None
    export: tuple[str, ...] | None = None


def keep_tail(head: Text, tail: Text, width: int) -> Text:
    """A status line whose *tail* (the sort, ``? all keys``) always shows (issue 32 point 7: at 80 columns the end
    of the line, where they were, was the part cut): *head* then *tail* on one line when both fit in *width*
    cells, else *tail* on a second line (a status line is at most two lines high) and *head* cut with an
    ellipsis on the first (the text keeps all of it; the terminal shows what fits)."""
    line = head.copy()
    line.no_wrap, line.overflow = True, "ellipsis"
    if head.cell_len + tail.cell_len <= width:
        line.append_text(tail)
    else:
        line.append("\n")
        lead = len(tail.plain) - len(tail.plain.lstrip(" ·"))  # "  sort: …" or " · ? all keys" begins the line
        line.append_text(tail[lead:])
    return line


def status_width(widget) -> int:
    """The cells a status line has (its content width, or the app's width less the padding before layout); the
    line is marked ``-tail``: each of its lines is cut, never wrapped (app.tcss), for :func:`keep_tail`."""
    widget.add_class("-tail")
    return widget.content_size.width or max(widget.app.size.width - 2, 20)


def middle_cut(text: str, width: int) -> str:
    """*text* in at most *width* cells, cut in the middle with an ellipsis (``benchfill-1-74`` stays unique)."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    keep = width - 1
    head, tail = (keep + 1) // 2, keep // 2
    if text.isascii():
        return text[:head] + "…" + (text[-tail:] if tail else "")
    left = set_cell_size(text, head).rstrip()
    right = text
    while cell_len(right) > tail:
        right = right[1:]
    return set_cell_size(left, head) + "…" + right


def fit_columns(columns: list[Column], width: int, *, most: int = 60) -> list[Column]:
    """The identity column widened to the cells the others leave on a *width*-cell screen (within
    ``[its width, most]``), the others unchanged."""
    others = sum(c.width + 1 for c in columns if not c.identity)
    room = width - others - 1  # the vertical scrollbar
    return [replace(c, width=max(c.width, min(room, most))) if c.identity else c for c in columns]


def end_cut(text: str, width: int) -> str:
    """*text* in at most *width* cells, cut at the end with an ellipsis (a cut owner or status says so)."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    if text.isascii():
        return text[:width - 1] + "…"
    return set_cell_size(text, width - 1) + "…"


def _cell(text: str, width: int, right: bool, identity: bool = False) -> str:
    """*text* in exactly *width* cells: an identity cut in the middle, any other too-long text at the end,
    both with an ellipsis (never silently)."""
    text = middle_cut(text, width) if identity else end_cut(text, width)
    if text.isascii():  # one cell per character: plain string operations
        return text.rjust(width) if right else text.ljust(width)
    n = cell_len(text)
    if right and n < width:
        return " " * (width - n) + text
    return set_cell_size(text, width)


def column_values(frame: pd.DataFrame | Columns, key: str) -> np.ndarray:
    """Column *key* of a DataFrame or a Columns as a numpy array."""
    col = frame[key]
    return col if isinstance(col, np.ndarray) else col.to_numpy()


def format_lines(frame: pd.DataFrame | Columns, columns: list[Column]) -> np.ndarray:
    """Every row of *frame* as one fixed-width line.  A value seen before in its column reuses its cell (groups,
    states, counts repeat across thousands of rows).  :class:`FrameTable` formats only the rows it draws when
    given no lines (:class:`LazyLines`); this is for small tables and for tests."""
    values = [frame[c.key].tolist() if c.key in frame.columns else [None] * len(frame) for c in columns]
    return np.array(_join_rows(columns, values, range(len(frame))), dtype=object)


def _join_rows(columns: list[Column], values: list[list], rows) -> list[str]:
    """The lines of *rows* (positions into the column lists *values*, one per column)."""
    parts = []
    for c, vals in zip(columns, values):
        seen: dict = {}
        cells = []
        for r in rows:
            v = vals[r]
            key = (type(v), v)
            try:
                cell = seen.get(key)
            except TypeError:  # an unhashable value (a list, a dict): formatted every time
                key, cell = None, None
            if cell is None:
                cell = _cell(cell_text(c.fmt(v)), c.width, c.right, c.identity)
                if key is not None:
                    seen[key] = cell
            cells.append(cell)
        parts.append(cells)
    return [" ".join(cells) for cells in zip(*parts)] if parts else [""] * len(rows)


class LazyLines:
    """The formatted lines of a frame, each made when first asked for (``lines[row]``): a table draws the ~40
    rows on screen, so loading 14,000 items formats 40 lines, not 14,000 (issue 26: 0.4 s of the Items screen's
    first visit at 5,000 x 14,000).  The same text as :func:`format_lines`; ``lines[row] = text`` replaces a
    line (a decision shown at once), :meth:`reset` forgets the column values after the frame changed."""

    def __init__(self, frame: pd.DataFrame | Columns, columns: list[Column]) -> None:
        self.frame, self.columns = frame, columns
        self._done: dict[int, str] = {}
        self._values: list[list] | None = None
        self._n = len(frame)

    def __len__(self) -> int:
        return self._n

    def reset(self) -> None:
        self._values = None

    def _column_values(self) -> list[list]:
        if self._values is None:
            f = self.frame
            self._values = [f[c.key].tolist() if c.key in f.columns else [None] * self._n for c in self.columns]
        return self._values

    def __getitem__(self, row) -> str:
        row = int(row)
        line = self._done.get(row)
        if line is None:
            if not -self._n <= row < self._n:
                raise IndexError(row)
            line = self._done[row] = _join_rows(self.columns, self._column_values(), [row % self._n])[0]
        return line

    def __setitem__(self, row, line: str) -> None:
        self._done[int(row)] = line


def header_line(columns: list[Column], sort_key: str | None = None, descending: bool = False) -> str:
    """The column labels; the sorted column's label ends in ↑ (ascending) or ↓ (descending), kept even when
    the label has to be cut to make room for it."""
    cells = []
    for c in columns:
        label = c.label
        if c.key == sort_key:
            label = end_cut(label, max(c.width - 1, 0)) + ("↓" if descending else "↑")
        cells.append(_cell(label, c.width, c.right))
    return " ".join(cells)


def column_bounds(columns: list[Column]) -> list[tuple[int, int]]:
    """(first cell, end cell) of each column in a formatted line (one space between columns)."""
    out, x = [], 0
    for c in columns:
        out.append((x, x + c.width))
        x += c.width + 1
    return out


class WholeCellScrollBar(ScrollBarRender):
    """A scrollbar whose thumb is whole cells of colour. Textual's default draws the thumb's fractional ends as
    block glyphs (▇ ▆ ▉); on a 1-cell bar beside thousands of rows the thumb is one such glyph, which read as a
    stray character at the right edge of the Items rows (issue 11) and as a letter in ``tmux capture-pane``."""

    VERTICAL_BARS: ClassVar[list[str]] = [" "] * 8
    HORIZONTAL_BARS: ClassVar[list[str]] = [" "] * 8


class TableSearch(Horizontal):
    """The one-line ``/`` search box a :class:`FrameTable` mounts above itself: typing filters the table as
    you type (every row holding the text, case-insensitive, in any shown column), enter keeps the filter and
    goes back to the table, escape clears it. The count on the right says how many rows match."""

    DEFAULT_CSS = """
    TableSearch { height: 1; margin: 0 1; }
    TableSearch > Input { width: 1fr; height: 1; border: none; padding: 0 1; background: $boost; }
    TableSearch > Input:focus { background: $primary 30%; border: none; }
    TableSearch > .table-search--count { width: auto; height: 1; padding: 0 1; color: $text-muted; }
    """
    BINDINGS = [Binding("escape", "close", "Clear search", id="table.search_close")]

    def __init__(self, table: FrameTable) -> None:
        super().__init__(classes="table-search")
        self.table = table

    def compose(self):
        yield Input(value=self.table.query, placeholder="search this table (enter keeps, escape clears)")
        yield SafeStatic("", classes="table-search--count", markup=False)

    def on_mount(self) -> None:
        self.show_count()

    def focus_input(self) -> None:
        self.query_one(Input).focus()

    def show_count(self) -> None:
        t = self.table
        self.query_one(SafeStatic).update(f"{len(t.view)} of {len(t._base)}" if t.query else "")

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.table.set_query(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not event.value:
            self.action_close()
        else:
            self.table.focus()

    def action_close(self) -> None:
        self.table.action_clear_search()


class FrameTable(ScrollView, can_focus=True):
    """Rows of a frame under a fixed header; j/k/arrows move, s/S sort, ``/`` searches; ``action_select``
    posts Selected (the screen binds enter with a description of what it does there, so no screen advertises
    an enter that does nothing).

    ``set_data(frame, columns, lines)`` loads; ``set_view(index)`` shows a subset (positions into frame, the
    screen's own filters); ``set_query(text)`` keeps the rows of that subset holding *text* in any shown
    column (full values, not the cut ones). Sorting and searching work on every table; a screen with a search
    of its own (Items' full-text search) builds its table with ``searchable=False`` and its ``/`` applies.
    """

    BINDINGS = [
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("pagedown,space", "page(1)", "Page down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("home", "edge(0)", "First", show=False),
        Binding("end", "edge(1)", "Last", show=False),
        Binding("left", "scroll_left", "Left", show=False),
        Binding("right", "scroll_right", "Right", show=False),
        Binding("ctrl+pagedown", "page_columns(1)", "Page right", show=False),
        Binding("ctrl+pageup", "page_columns(-1)", "Page left", show=False),
        Binding("s", "sort(1)", "Sort", show=False, id="table.sort"),
        Binding("S", "sort(-1)", "Reverse sort", show=False, id="table.reverse"),
        Binding("slash", "search", "Search", show=False, id="table.search"),
        Binding("escape", "clear_search", "Clear search", show=False, id="table.clear"),
    ]
    COMPONENT_CLASSES = {"frame-table--header", "frame-table--cursor", "frame-table--dim"}
    DEFAULT_CSS = """
    FrameTable { height: 1fr; scrollbar-size-vertical: 1; scrollbar-size-horizontal: 1; }
    FrameTable > .frame-table--header { text-style: bold; background: $panel; color: $text; }
    FrameTable > .frame-table--cursor { background: $block-cursor-blurred-background; }
    FrameTable:focus > .frame-table--cursor { background: $block-cursor-background; color: $block-cursor-foreground; }
    FrameTable > .frame-table--dim { color: $text-muted; }
    """

    cursor = reactive(0, always_update=True)

    class Highlighted(Message):
        """The cursor moved to frame row ``row`` (a position in ``table.frame``; None when empty)."""

        def __init__(self, table: FrameTable, row: int | None) -> None:
            super().__init__()
            self.table, self.row = table, row

    class Selected(Highlighted):
        """Enter was pressed on a row."""

    class Searched(Message):
        """The table's ``/`` search text changed (the screen may say so in its status line)."""

        def __init__(self, table: FrameTable) -> None:
            super().__init__()
            self.table = table

    def __init__(self, *, sortable: bool = True, searchable: bool = True, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.frame: pd.DataFrame | Columns = Columns()
        self._pandas: pd.DataFrame | None = None  # self.frame as a DataFrame, when it is a Columns
        self.columns: list[Column] = []
        self.sortable = sortable
        self.searchable = searchable
        self.export_keys: list[str] | None = None  # the frame columns an export writes (default: those shown)
        self._lines: np.ndarray | LazyLines = np.array([], dtype=object)
        self._dim = np.zeros(0, bool)
        self._base = np.zeros(0, np.int64)
        self.view = np.zeros(0, np.int64)
        self.sort_key: str | None = None
        self.descending = False
        self._header = ""
        self._bounds: list[tuple[int, int]] = []
        self.query = ""
        self._hay: np.ndarray | None = None
        self._match: np.ndarray | None = None

    # ---------------------------------------------------------------- data
    def set_data(self, frame: pd.DataFrame | Columns, columns: list[Column], lines: np.ndarray | None = None,
                 dim: np.ndarray | None = None, *, keep_key: str | None = None) -> None:
        """Load a frame; *lines* from :func:`format_lines` (when omitted, each row is formatted when first drawn:
        :class:`LazyLines`)."""
        current = self.current_value(keep_key) if keep_key else None
        self.frame = frame if isinstance(frame, Columns) else frame.reset_index(drop=True)
        self._pandas = None
        self.columns = columns
        self._lines = LazyLines(self.frame, columns) if lines is None else lines
        self._dim = np.zeros(len(self.frame), bool) if dim is None else np.asarray(dim, bool)
        self._base = np.arange(len(self.frame))
        self._hay = None
        self._match = self._matches(self.query)
        self._apply_sort()
        if current is not None and keep_key in self.frame.columns:
            hit = np.flatnonzero(column_values(self.frame, keep_key)[self.view] == current)
            self.cursor = int(hit[0]) if hit.size else 0
        else:
            self.cursor = min(self.cursor, max(len(self.view) - 1, 0))

    def clear(self) -> None:
        """No rows (the columns stay): a failed read leaves nothing on the table."""
        frame = self.frame.take(np.zeros(0, np.int64)) if isinstance(self.frame, Columns) else self.frame.iloc[0:0]
        self.set_data(frame, self.columns)

    def pandas_frame(self) -> pd.DataFrame:
        """``self.frame`` as a DataFrame (a Columns converted once, pandas imported then)."""
        if not isinstance(self.frame, Columns):
            return self.frame
        if self._pandas is None:
            self._pandas = self.frame.frame()
        return self._pandas

    def update_rows(self, rows: list[int]) -> None:
        """Reformat frame rows *rows* after their values changed in ``self.frame`` (a decision shown at once)."""
        if not len(rows):
            return
        if isinstance(self._lines, LazyLines):
            self._lines.reset()  # the frame's values changed: the rows not formatted yet read them again
        lines = format_lines(self.frame.iloc[list(rows)], self.columns)
        for r, line in zip(rows, lines):
            self._lines[r] = line
        self._hay = None
        self.refresh()

    def set_view(self, index: np.ndarray) -> None:
        """Show only frame rows *index* (in their sorted order); the cursor goes to the top."""
        self._base = np.asarray(index, np.int64)
        self._apply_sort()
        self.cursor = 0

    # ---------------------------------------------------------------- search
    def _matches(self, query: str) -> np.ndarray | None:
        """Which frame rows hold *query* (case-insensitive) in a shown column; None when there is no query."""
        q = query.strip().lower()
        if not q:
            return None
        import pandas as pd

        if self._hay is None or len(self._hay) != len(self.frame):
            frame = self.pandas_frame()
            parts = [frame[c.key].astype(str).where(frame[c.key].notna(), "")
                     for c in self.columns if c.key in frame.columns]
            hay = parts[0].str.cat(parts[1:], sep="\n") if parts else pd.Series([""] * len(frame))
            self._hay = hay.str.lower().to_numpy(dtype=object)
        return pd.Series(self._hay, dtype=object).str.contains(q, regex=False).to_numpy(bool)

    def set_query(self, query: str) -> None:
        """Keep the rows holding *query*; the cursor stays on its row when that row still matches."""
        keep = self.row
        self.query = query
        self._match = self._matches(query)
        self._apply_sort()
        hit = np.flatnonzero(self.view == keep) if keep is not None else []
        self.cursor = int(hit[0]) if len(hit) else 0
        for box in self._search_boxes():
            box.show_count()
        self.post_message(self.Searched(self))

    def _search_boxes(self) -> list[TableSearch]:
        parent = self.parent
        if parent is None:
            return []
        return [w for w in parent.children if isinstance(w, TableSearch) and w.table is self]

    def action_search(self) -> None:
        """/: open the search box above the table (or go back to it)."""
        boxes = self._search_boxes()
        if boxes:
            boxes[0].focus_input()
            return
        box = TableSearch(self)
        self.parent.mount(box, before=self)
        self.call_after_refresh(box.focus_input)

    def action_clear_search(self) -> None:
        """escape: drop the search text and its box."""
        for box in self._search_boxes():
            box.remove()
        if self.query:
            self.set_query("")
        self.focus()

    def export_frame(self) -> pd.DataFrame:
        """The rows as shown (the screen's filters, the search, the sort) with full, unformatted values of
        ``export_keys`` (default: the shown columns, each as the stored values it draws: ``Column.export``),
        for writing to a file."""
        keys = self.export_keys or [k for c in self.columns for k in ((c.key,) if c.export is None else c.export)]
        frame = self.pandas_frame()
        keys = [k for k in dict.fromkeys(keys) if k in frame.columns]
        out = frame.iloc[self.view][keys].reset_index(drop=True)
        whole = {c.key for c in self.columns if c.fmt is fmt_int and c.export is None}
        for key in whole & set(out.columns):  # a count or rank held as a float (NaN beside it): written 3, not 3.0
            col = out[key]
            if col.dtype.kind == "f" and bool(((col % 1 == 0) | col.isna()).all()):
                out[key] = col.astype("Int64")
        return out

    def _apply_sort(self) -> None:
        base = self._base
        if self._match is not None and len(self._match) == len(self.frame):
            base = base[self._match[base]]
        by = next((c.sort_key or c.key for c in self.columns if c.key == self.sort_key), self.sort_key)
        if by is not None and by in self.frame.columns and len(base):
            import pandas as pd

            col = self.pandas_frame()[by].iloc[base]
            order = np.argsort(pd.Series(col.to_numpy()).rank(method="first", na_option="bottom",
                                                                 ascending=not self.descending).to_numpy(),
                               kind="stable")
            base = base[order]
        self.view = base
        self._header = header_line(self.columns, self.sort_key, self.descending)
        self._bounds = column_bounds(self.columns)
        width = max((cell_len(self._header), *(cell_len(self._lines[0]) for _ in range(min(len(self._lines), 1)))),
                    default=0)
        self.virtual_size = Size(width, len(self.view) + 1)
        self.refresh()
    @property
    def row(self) -> int | None:
        """Frame position of the cursor row, or None when the view is empty."""
        if not len(self.view):
            return None
        return int(self.view[min(self.cursor, len(self.view) - 1)])

    def current_value(self, key: str):
        r = self.row
        if r is None or key not in self.frame.columns:
            return None
        return self.frame[key][r] if isinstance(self.frame, Columns) else self.frame[key].iloc[r]

    def move_to_value(self, key: str, value) -> bool:
        """Put the cursor on the row whose *key* is *value* and scroll it into view (now, and again once the
        table is laid out: a screen just switched to has no height yet); False when the view does not hold it."""
        hit = np.flatnonzero(column_values(self.frame, key)[self.view] == value) if len(self.view) else []
        if len(hit):
            self.cursor = int(hit[0])
            self.call_after_refresh(self.scroll_to_cursor)
            return True
        return False

    def scroll_to_cursor(self) -> None:
        """Scroll so that the cursor row is on screen (below the header)."""
        rows = max(self.size.height - 1 - (1 if self.show_horizontal_scrollbar else 0), 1)
        top = int(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + rows:
            self.scroll_to(y=self.cursor - rows + 1, animate=False, immediate=True)

    # ---------------------------------------------------------------- cursor
    def watch_cursor(self, value: int) -> None:
        n = len(self.view)
        if n and not 0 <= value < n:
            self.cursor = max(0, min(value, n - 1))
            return
        self.scroll_to_cursor()
        self.refresh()
        self.post_message(self.Highlighted(self, self.row))

    def action_move(self, step: int) -> None:
        self.cursor = max(0, min(self.cursor + step, len(self.view) - 1))

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(self.size.height - 2, 1))

    def action_edge(self, end: int) -> None:
        self.cursor = max(len(self.view) - 1, 0) if end else 0

    def action_select(self) -> None:
        if self.row is not None:
            self.post_message(self.Selected(self, self.row))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "sort":
            return self.sortable
        if action == "search":
            return self.searchable
        if action == "clear_search":  # otherwise escape is the screen's (back, clear a focus)
            return bool(self.query) or bool(self._search_boxes())
        return True

    def action_sort(self, direction: int) -> None:
        """s: sort by the next column (ascending); S: flip the direction of the current sort; the cursor goes to
        the first row of the new order."""
        if not self.sortable or not self.columns:
            return
        keys = [c.key for c in self.columns]
        if direction < 0:
            self.descending = not self.descending
            if self.sort_key is None:
                self.sort_key = keys[0]
        else:
            i = keys.index(self.sort_key) + 1 if self.sort_key in keys else 0
            self.sort_key = keys[i % len(keys)]
            self.descending = False
        self._apply_sort()
        self.cursor = 0  # the top of the sorted list, on screen (the old row kept it off screen: issue 32 point 7)
        self.scroll_to(y=0, animate=False, immediate=True)

    @property
    def sort_label(self) -> str:
        if self.sort_key is None:
            return "file order"
        label = next((c.label for c in self.columns if c.key == self.sort_key), self.sort_key)
        return f"{label} {'desc' if self.descending else 'asc'}"

    # ---------------------------------------------------------------- render
    @property
    def frozen(self) -> int:
        """Cells at the left that do not scroll sideways: the identity column when it comes first."""
        return self.columns[0].width + 1 if self.columns and self.columns[0].identity else 0

    @property
    def visible_width(self) -> int:
        """The cells a row really has on screen: the widget's width less the vertical scrollbar. Rows were
        drawn ``size.width`` wide, so their last cell went under the scrollbar (issue 11's stray character at
        the right edge of Items rows was the bar's thumb glyph over a row one cell too wide)."""
        return self.scrollable_content_region.width

    def render_line(self, y: int) -> Strip:
        width = self.visible_width
        x = int(self.scroll_offset.x)
        frozen = self.frozen
        if y == 0:
            text, style = self._header, self.get_component_rich_style("frame-table--header")
        else:
            pos = int(self.scroll_offset.y) + y - 1
            if pos >= len(self.view):
                return Strip.blank(width, self.rich_style)
            row = int(self.view[pos])
            text = self._lines[row]
            if pos == self.cursor:
                style = self.get_component_rich_style("frame-table--cursor")
            elif self._dim[row]:
                style = self.rich_style + self.get_component_rich_style("frame-table--dim")
            else:
                style = self.rich_style
        line = Strip([Segment(text, style)])
        if y == 0 and x:
            line = self._sticky_label(line, frozen + x if frozen else x, style)
        if x and frozen:
            start = frozen + x
            strip = Strip.join([line.crop(0, frozen), line.crop(start, start + width - frozen)])
            end = start + width - frozen
        else:
            start, end = x, x + width
            strip = line.crop(start, end) if x else line
        strip = strip.extend_cell_length(width, style).crop(0, width)
        return self._mark_cut(strip, line, start, end, width, style)

    def _sticky_label(self, header: Strip, start: int, style) -> Strip:
        """The header with the label of a column whose first cells are scrolled off repeated where the column
        comes into view (after a sideways page the text column showed its rows under no header, issue 32)."""
        for (a, b), c in zip(self._bounds, self.columns):
            if a < start < b:
                label = _cell(c.label, b - start, False)
                return Strip.join([header.crop(0, start), Strip([Segment(label, style)]),
                                   header.crop(b, header.cell_length)])
        return header

    def action_page_columns(self, direction: int) -> None:
        """ctrl+pagedown / ctrl+pageup: a page sideways that starts at a whole column (Textual's own page moved
        by the screen's width and left the rows starting mid-word, issue 32)."""
        frozen, room = self.frozen, max(self.visible_width - self.frozen, 1)
        starts = [a - frozen for a, _ in self._bounds if a >= frozen]
        x = int(self.scroll_offset.x)
        if direction > 0:  # the first column not wholly in view comes to the left edge
            cut = [a - frozen for a, b in self._bounds if a >= frozen and b - frozen > x + room and a - frozen > x]
            target = cut[0] if cut else x + room
        else:
            behind = [s for s in starts if x - room <= s < x]
            target = behind[0] if behind else 0
        self.scroll_to(x=max(0, min(target, int(self.max_scroll_x))), animate=False)

    def _mark_cut(self, strip: Strip, line: Strip, start: int, end: int, width: int, style) -> Strip:
        """End the row in "…" when the screen's right edge cuts a column's text (a status read "acti" for
        "active"); a column that ends at the edge, or blank on either side of it, is left as it is."""
        col = next(((a, b) for a, b in self._bounds if a < end < b), None)
        if col is None or width < 2:
            return strip
        shown, hidden = line.crop(max(col[0], start), end).text, line.crop(end, col[1]).text
        if not (shown.strip() and hidden.strip()):
            return strip
        return Strip.join([strip.crop(0, width - 1), Strip([Segment("…", style)])])
