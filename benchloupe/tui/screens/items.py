"""Items: a benchmark's items with their latest parameters, searchable and filterable at 14,000 rows, and the
item panel (full text and answer shown literally, outcomes by ability, the fitted curve, parameters in every
run, retire/restore with a note).

Filters are numpy masks over the loaded frame; ``/`` search, debounced by ``SEARCH_DEBOUNCE`` seconds, keeps the
rows holding the typed text as a fragment (at once, so part of a key matches as you type) or all of its words in
any order through the FTS5 index (``store.search.search_items`` in a worker); the table draws only the visible
lines (widgets/table.py).
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import numpy as np
import pandas as pd
from rich.cells import cell_len
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.timer import Timer
from textual.widgets import Input

from benchloupe.tui.screens.base import BenchScreen, store_write
from benchloupe.tui.widgets.dialogs import PromptDialog
from benchloupe.tui.widgets.plots import icc_plot
from benchloupe.tui.widgets.safe import SafeStatic, Text
from benchloupe.tui.widgets.table import (
    Column,
    FrameTable,
    fmt_int,
    fmt_num,
    keep_tail,
    middle_cut,
    status_width,
)
from benchloupe.words import count

SEARCH_DEBOUNCE = 0.05
ORIGIN_SHORT = {"original": "orig", "benchfill": "fill", "derived": "deriv"}
COLUMNS = [
    Column("key", "key", 14, identity=True),
    Column("group", "group", 7),
    Column("kind", "kind", 6),
    Column("origin", "orig", 5, lambda v: ORIGIN_SHORT.get(v, str(v))),
    Column("pass_rate", "pass", 5, fmt_num(2), right=True),
    Column("difficulty_text", "diff", 9, right=True, sort_key="difficulty_sort",
           export=("difficulty", "difficulty_note")),
    Column("sharpness", "sharp", 5, fmt_num(2), right=True),
    Column("fisher", "info", 5, fmt_num(2), right=True),
    Column("dif_range", "DIF", 5, fmt_num(2), right=True),
    Column("anomalies", "anom", 4, fmt_int, right=True),
    Column("status", "status", 7),
    Column("text", "text", 70),
]
WIDE = 120
FILTERS = ("group", "origin", "status", "flagged")


def columns_for(width: int) -> list[Column]:
    """The 80-column layout, or wider key and group columns (and full origin names) on a wide terminal."""
    if width < WIDE:
        return COLUMNS
    wider = {"key": 24, "group": 14, "origin": 9}
    return [replace(c, label="origin" if c.key == "origin" else c.label, width=wider[c.key],
                    fmt=str if c.key == "origin" else c.fmt) if c.key in wider else c for c in COLUMNS]


def difficulty_text(difficulty: pd.Series, pass_rate: pd.Series) -> tuple[list[str], np.ndarray]:
    """The difficulty as shown, and the number it sorts by. An item every model got wrong (or right) carries
    no information about its difficulty: it reads "all wrong" ("all right") and sorts as the hardest (easiest)
    instead of showing the fit's number for it, which landed mid-list."""
    fmt = fmt_num(2, signed=True)
    texts, keys = [], np.asarray(difficulty, float).copy()
    for k, (d, p) in enumerate(zip(difficulty, pass_rate)):
        if pd.notna(p) and p <= 0:
            texts.append("all wrong")
            keys[k] = np.inf
        elif pd.notna(p) and p >= 1:
            texts.append("all right")
            keys[k] = -np.inf
        else:
            texts.append(fmt(d))
    return texts, keys


class ItemsScreen(BenchScreen):
    MODE = "items"
    BINDINGS = [
        Binding("enter", "select_row", "Item panel", id="items.open"),
        Binding("slash", "search", "Search", id="items.search"),
        Binding("escape", "clear_search", "Clear", show=False, id="items.clear"),
        Binding("g", "cycle('group')", "Group", show=False, id="items.group"),
        Binding("o", "cycle('origin')", "Origin", show=False, id="items.origin"),
        Binding("t", "cycle('status')", "Status", show=False, id="items.status"),
        Binding("f", "cycle('flagged')", "Flagged", id="items.flagged"),
        Binding("a", "item_flags", "Item's flags", id="items.flags"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.frame = pd.DataFrame()
        self.filters: dict[str, str] = dict.fromkeys(FILTERS, "all")
        self.query_text = ""
        self._haystack = np.array([], dtype=object)
        self._timer: Timer | None = None
        self.filter_count = 0
        self._fts_ids = np.zeros(0, np.int64)  # items the FTS5 index matched for query_text
        self.search_error = ""

    def compose_body(self) -> ComposeResult:
        yield SafeStatic("", id="items-status", classes="status-line", markup=False)
        yield Input(placeholder="search key, group and text (escape clears)", id="items-search")
        yield FrameTable(id="items-table", searchable=False)

    # ------------------------------------------------------------------ data
    def fetch(self, conn: sqlite3.Connection, benchmark: str) -> dict:
        from benchloupe.store import views

        df = views.item_table(conn, benchmark, with_text=True)
        df["text"] = df["text"].fillna("")
        df["difficulty_text"], df["difficulty_sort"] = difficulty_text(df["difficulty"], df["pass_rate"])
        df["difficulty_note"] = [t if t in ("all right", "all wrong") else "" for t in df["difficulty_text"]]
        hay = (df["key"].astype(str) + "\n" + df["group"].astype(str) + "\n" + df["text"]).str.lower().to_numpy()
        columns = columns_for(self.app.size.width)
        return {"frame": df, "columns": columns, "haystack": hay}  # the table formats the rows it draws

    def loading_started(self) -> None:
        self.query_one("#items-status", SafeStatic).update(Text(f"loading {self.app.benchmark}…", style="dim"))

    def show(self, data: dict) -> None:
        self.frame = data["frame"]
        self._haystack = data["haystack"]
        table = self.query_one(FrameTable)
        retired = (self.frame["status"] == "retired").to_numpy()
        table.set_data(self.frame, data["columns"], dim=retired, keep_key="id")
        self.apply_filters(keep_cursor=True)
        if not self.query_one("#items-search", Input).has_focus:
            table.focus()

    def show_no_benchmark(self) -> None:
        self.query_one("#items-status", SafeStatic).update(Text(self.app.no_benchmark_hint()))

    def benchmark_changed(self) -> None:
        """A new benchmark (or a jump whose item the search or filters hide): no search, every filter "all"."""
        super().benchmark_changed()
        self._drop_search()
        self.filters = dict.fromkeys(FILTERS, "all")
        if len(self.frame):
            self.apply_filters(keep_cursor=True)

    def _drop_search(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        box = self.query_one("#items-search", Input)
        with box.prevent(Input.Changed):
            box.value = ""
        box.display = False
        self.query_text = ""
        self._fts_ids = np.zeros(0, np.int64)
        self.search_error = ""

    def forget(self) -> None:
        self.frame = self.frame.iloc[0:0]
        self._haystack = np.array([], dtype=object)

    # ------------------------------------------------------------------ filters
    def mask(self) -> np.ndarray:
        df = self.frame
        keep = np.ones(len(df), bool)
        for col in ("group", "origin", "status"):
            if self.filters[col] != "all":
                keep &= (df[col] == self.filters[col]).to_numpy()
        if self.filters["flagged"] == "flagged":
            keep &= (df["anomalies"] > 0).to_numpy()
        elif self.filters["flagged"] == "unflagged":
            keep &= (df["anomalies"] == 0).to_numpy()
        q = self.query_text.strip().lower()
        if q and len(df):  # a fragment (as you type, part of a key) or every word anywhere (FTS5)
            hit = pd.Series(self._haystack).str.contains(q, regex=False).to_numpy()
            keep &= hit | np.isin(df["id"].to_numpy(), self._fts_ids)
        return keep

    def apply_filters(self, keep_cursor: bool = False) -> None:
        table = self.query_one(FrameTable)
        current = table.current_value("id") if keep_cursor else None
        table.set_view(np.flatnonzero(self.mask()))
        if current is not None:
            table.move_to_value("id", current)
        self.filter_count += 1
        self._status()

    def _status(self) -> None:
        if not self.app.benchmark:  # nothing to count: say how to get a benchmark
            self.show_no_benchmark()
            return
        if self._loading and self.shown_token is None:  # the first load: nothing to count yet (not "0 of 0")
            self.loading_started()
            return
        table = self.query_one(FrameTable)
        text = Text(no_wrap=True, overflow="ellipsis")
        key = table.current_value("key")
        if key is not None:  # the highlighted item's whole key (the column may cut it in the middle)
            text.append(str(key), style="bold cyan")
            text.append(" · ", style="dim")
        text.append(f"{len(table.view)}", style="bold")
        text.append(f" of {count(len(self.frame), 'item')}")
        if self.query_text:
            text.append("  /", style="dim")
            text.append(self.query_text, style="bold")
        if self.search_error:
            text.append("  " + self.search_error, style="bold red")
        for name in FILTERS:
            if self.filters[name] != "all":
                text.append(f"  {name}=", style="dim")
                text.append(self.filters[name], style="bold")
        text.append("  g o t f: filters" if self.size.width < WIDE else "   g group o origin t status f flags",
                    style="dim")
        tail = Text(f"  sort: {table.sort_label} · ? all keys", style="dim")  # never the part cut (issue 32 #7)
        status = self.query_one("#items-status", SafeStatic)
        status.update(keep_tail(text, tail, status_width(status)))

    def _choices(self, name: str) -> list[str]:
        if name == "flagged":
            return ["all", "flagged", "unflagged"]
        values = sorted({str(v) for v in self.frame[name].dropna()}) if len(self.frame) else []
        return ["all", *values]

    def action_cycle(self, name: str) -> None:
        choices = self._choices(name)
        i = choices.index(self.filters[name]) if self.filters[name] in choices else 0
        self.filters[name] = choices[(i + 1) % len(choices)]
        self.apply_filters()

    def action_search(self) -> None:
        box = self.query_one("#items-search", Input)
        box.display = True
        box.focus()

    def action_clear_search(self) -> None:
        self._drop_search()
        self.apply_filters(keep_cursor=True)
        self.query_one(FrameTable).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "items-search":
            return
        if self._timer is not None:
            self._timer.stop()
        value = event.value
        self._timer = self.set_timer(SEARCH_DEBOUNCE, lambda: self._search(value))

    def _search(self, value: str) -> None:
        """Filter at once by the text as a fragment, then by its words through the FTS5 index (a worker with
        its own connection; a result for an older query is dropped)."""
        self.query_text = value
        self._fts_ids = np.zeros(0, np.int64)
        self.search_error = ""
        self.apply_filters()
        if value.strip() and self.app.benchmark:
            self.run_worker(lambda: self._fts(value, self.app.benchmark), thread=True, group="search",
                            exclusive=True, exit_on_error=False)

    def _fts(self, value: str, benchmark: str) -> None:
        from benchloupe.store.db import StoreError, connect
        from benchloupe.store.search import MAX_LIMIT, search_items

        conn = connect(self.app.db_path)
        try:
            hits = search_items(conn, value, benchmark=benchmark, limit=MAX_LIMIT, marks=("", ""))
            ids, error = np.array([h["item_id"] for h in hits], np.int64), ""
        except StoreError as exc:
            from benchloupe.tui.wording import error_text

            ids, error = np.zeros(0, np.int64), error_text(exc)
        finally:
            conn.close()
        self.app.call_from_thread(self._fts_done, value, ids, error)

    def _fts_done(self, value: str, ids: np.ndarray, error: str) -> None:
        if value != self.query_text:
            return
        self._fts_ids, self.search_error = ids, error
        self.apply_filters(keep_cursor=True)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "items-search":
            if self._timer is not None:
                self._timer.stop()
            self._search(event.value)
            self.query_one(FrameTable).focus()

    def on_frame_table_highlighted(self, event: FrameTable.Highlighted) -> None:
        self._status()

    def on_frame_table_selected(self, event: FrameTable.Selected) -> None:
        item_id = int(self.frame["id"].iloc[event.row])
        show_item(self.app, item_id)

    # ------------------------------------------------------------------ jumps
    def action_item_flags(self) -> None:
        """a: the highlighted item's anomaly flags on 5 Anomalies (the model's are enter on 3 Models)."""
        table = self.query_one(FrameTable)
        if table.row is None:
            return
        row = self.frame.iloc[table.row]
        self.app.show_flags("anomalies", "item_id", int(row["id"]), f"item {row['key']}")


def show_item(app, item_id: int, mark_model: int | None = None) -> None:
    """Open the item panel of item *item_id*; *mark_model* (a model id, e.g. the model of the flag it was
    opened from) is marked on the item's curve and named under it."""
    app.push_screen(ItemPanel(item_id, mark_model=mark_model))


class ItemPanel(BenchScreen):
    """One item: everything about it, and retire/restore with a note."""

    MODE = "items"
    HELP_TITLE = "the item panel"
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="item.back"),
        Binding("t", "toggle_status", "Retire/restore", id="item.status"),
        Binding("a", "item_flags", "Item's flags", id="item.flags"),
        Binding("j", "scroll(1)", "Down", show=False),
        Binding("k", "scroll(-1)", "Up", show=False),
    ]

    def __init__(self, item_id: int, *, mark_model: int | None = None) -> None:
        super().__init__()
        self.item_id = item_id
        self.mark_model = mark_model  # a model id: the flagged model, marked on the curve
        self.detail: dict | None = None

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="item-scroll"):
            yield SafeStatic(Text("loading…", style="dim"), id="item-head", markup=False)
            yield SafeStatic("", id="item-text", classes="literal", markup=False)
            yield SafeStatic("", id="item-plot", markup=False)
            yield SafeStatic("", id="item-outcomes", markup=False)
            yield SafeStatic("", id="item-params", markup=False)

    def fetch(self, conn: sqlite3.Connection, benchmark: str) -> dict:
        from benchloupe.store import views

        d = views.item_detail(conn, self.item_id)
        last = conn.execute("SELECT actor, at FROM audit_log WHERE entity = 'item' AND entity_id = ? ORDER BY id DESC"
                            " LIMIT 1", (self.item_id,)).fetchone()  # who retired or restored it (issue 25)
        d["status_by"] = (last[0], last[1]) if last else None
        parent = conn.execute("SELECT key FROM items WHERE id = ?", (d["parent_id"],)).fetchone() \
            if d.get("parent_id") else None
        d["parent_key"] = parent[0] if parent else None  # named by its key, not "item #468" (issue 32 point 9)
        return d

    def show(self, d: dict) -> None:
        self.detail = d
        head = Text(str(d["key"]), style="bold")
        head.append(f"   {d['benchmark']} · group {d['grp'] or '-'} · {d['kind']} · {d['origin']} · ")
        head.append(d["status"], style="bold red" if d["status"] == "retired" else "bold green")
        if d.get("status_by"):
            from benchloupe.store.actor import by_at

            head.append(" " + by_at(*d["status_by"]), style="dim")
        if d.get("parent_key"):
            head.append(" · parent ")
            head.append(str(d["parent_key"]), style="bold")
        elif d.get("parent_id"):
            head.append(f" · parent item #{d['parent_id']} (gone)")
        self.query_one("#item-head", SafeStatic).update(head)
        body = Text()
        body.append("Text\n", style="bold underline")
        body.append(str(d["text"]) or "(no text)")
        body.append("\n\nAnswer\n", style="bold underline")
        body.append(str(d["answer"]) or "(no answer)")
        self.query_one("#item-text", SafeStatic).update(body)
        params = d["params"]
        calib = params[params["kind"].isin(("joint", "static", "arena"))]
        b = a = None
        if len(calib) and pd.notna(calib["difficulty"].iloc[0]):
            b = float(calib["difficulty"].iloc[0])
            a = float(calib["sharpness"].iloc[0]) if pd.notna(calib["sharpness"].iloc[0]) else 1.0  # 1PL
        out = d["outcomes"]
        plot = Text("Curve against the models' abilities\n", style="bold underline")
        width = max(self.size.width - 4, 40)
        if not len(out):
            plot.append("no static results for this item, so no curve to draw", style="dim")
        else:
            mark, label = self._mark(out)
            plot.append_text(icc_plot(out["theta"].astype(float).to_numpy(), out["outcome"].to_numpy(),
                                      difficulty=b, sharpness=a,
                                      chance=d.get("chance"), width=width, height=8, mark=mark, mark_label=label))
        self.query_one("#item-plot", SafeStatic).update(plot)
        self.query_one("#item-outcomes", SafeStatic).update(self._outcomes(out))
        self.query_one("#item-params", SafeStatic).update(self._params(params))

    def _mark(self, out: pd.DataFrame) -> tuple[int | None, str]:
        """The position in *out* of the model to mark and how to name it ("" when none is marked)."""
        if self.mark_model is None or "model_id" not in out:
            return None, ""
        hit = np.flatnonzero(out["model_id"].to_numpy() == self.mark_model)
        if not hit.size:
            return None, ""
        return int(hit[0]), f"{out['model'].iloc[int(hit[0])]} (the flagged model)"

    def action_item_flags(self) -> None:
        """a: this item's anomaly flags on 5 Anomalies."""
        if self.detail is not None:
            self.app.pop_screen()
            self.app.show_flags("anomalies", "item_id", self.item_id, f"item {self.detail['key']}")

    def _outcomes(self, out: pd.DataFrame) -> Text:
        text = Text("\nOutcomes by ability (● right ○ wrong · missing)\n", style="bold underline")
        if not len(out):
            text.append("no static results for this item", style="dim")
            return text
        marked, _label = self._mark(out)
        cells = []
        for r in out.itertuples():
            theta = f" {r.theta:+.2f}" if r.theta is not None and np.isfinite(r.theta) else ""
            cells.append((int(r.outcome), str(r.model), theta))
        width = min(max(cell_len(m) + len(t) for _, m, t in cells) + 4, 48)
        per_line = max((self.size.width - 2) // width, 1)
        for k, (outcome, model, theta) in enumerate(cells):
            mark, style = {1: ("●", "green"), 0: ("○", "red")}.get(outcome, ("·", "dim"))
            if k == marked:  # the flagged model, as on the curve
                mark, style = "◆", "bold yellow"
            text.append(mark + " ", style=style)
            room = width - 4 - len(theta)
            name = middle_cut(model, room)  # distinct names stay distinct
            text.append(name, style="bold yellow" if k == marked else "")
            text.append(theta, style="dim")
            pad = width - 2 - cell_len(name) - len(theta)
            text.append("\n" if (k + 1) % per_line == 0 else " " * pad)
        return text

    @staticmethod
    def _params(params: pd.DataFrame) -> Text:
        text = Text("\n\nParameters in every run\n", style="bold underline")
        if not len(params):
            text.append("no runs have estimated this item yet", style="dim")
            return text
        text.append(f"{'run':>5} {'kind':<10} {'diff':>7} {'sharp':>6} {'info':>6} {'DIF':>6}\n", style="dim")
        f = fmt_num(2, signed=True)
        g = fmt_num(2)
        for r in params.itertuples():
            text.append(f"{'#' + str(r.run):>5} {r.kind:<10} {f(r.difficulty):>7} {g(r.sharpness):>6} "
                        f"{g(r.fisher):>6} {g(r.dif_range):>6}\n")
        return text

    def action_scroll(self, step: int) -> None:
        scroll = self.query_one("#item-scroll", VerticalScroll)
        scroll.scroll_to(y=scroll.scroll_y + step * 3, animate=False)

    def action_toggle_status(self) -> None:
        if self.detail is None:
            return
        new = "active" if self.detail["status"] == "retired" else "retired"
        verb = "Restore" if new == "active" else "Retire"
        item_id, key, seen = self.item_id, str(self.detail["key"]), str(self.detail["status"])

        def done(note: str | None) -> None:
            if note is None:
                return
            from benchloupe.store import curation

            store_write(self, lambda conn: curation.set_item_status(conn, item_id, new, note, expect_status=seen),
                        f"{key}: {new}")

        self.app.push_screen(PromptDialog(f"{verb} {key}", placeholder="why (kept in the audit log)",
                                          help="A note for the audit log; enter to confirm."), done)
