"""Step-through triage queues (anomalies, near-tie reversals): one flag at a time, next/previous with single
keys, decisions (confirm, dismiss, unsure, reopen, note) saved at once through store.curation and the
queue moves on, the decision named in the status line; ``z`` undoes this session's latest decision (the state
and note it replaced come back, audited as ``flag:undo``), ``n`` goes to the next open flag; a filter by state
and a "12 of 87 triaged" line.

Batch triage: space marks flags (``●`` on the card, "3 marked" in the status line); c/d/u/o then decide every
marked flag at once, and on Anomalies ``M``/``I`` decide every open flag of the current flag's model/item after a
confirmation that gives the count. A batch is written in one transaction (store.curation.set_flag_states) and
one ``z`` undoes all of it. Jumps: enter opens the item panel (its curve marks the flag's model), ``i`` selects
the item on 2 Items, ``m`` the model on 3 Models (:func:`select_on_screen`).

A decision changes the flag shown immediately and is written by a worker with its own connection; writes
are serialised and always store the latest decision for a flag, so quick successive keys cannot land out
of order.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import ClassVar

import numpy as np
import pandas as pd
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll

from benchloupe.tui.screens.base import BenchScreen, store_write
from benchloupe.tui.widgets.dialogs import ChoiceDialog, PromptDialog
from benchloupe.tui.widgets.safe import SafeStatic, Text

STATE_FILTERS = ("all", "open", "confirmed", "dismissed", "unsure")
STATE_STYLE = {"open": "bold", "confirmed": "bold green", "dismissed": "dim", "unsure": "bold yellow"}
TEXT_PREVIEW = 600


class FlagQueueScreen(BenchScreen):
    """Base for the anomaly and reversal queues: subclasses set KIND/NOUN and implement ``render_flag``."""

    KIND: ClassVar[str] = ""
    FILTERS: ClassVar[tuple[str, ...]] = STATE_FILTERS
    NOUN: ClassVar[str] = ""
    PLURAL: ClassVar[str] = ""
    BINDINGS = [
        Binding("j,down,right", "step(1)", "Next", show=False, id="queue.next"),
        Binding("k,up,left", "step(-1)", "Prev", show=False, id="queue.prev"),
        Binding("c", "decide('confirmed')", "Confirm", id="queue.confirm"),
        Binding("d", "decide('dismissed')", "Dismiss", id="queue.dismiss"),
        Binding("u", "decide('unsure')", "Unsure", id="queue.unsure"),
        Binding("o", "decide('open')", "Reopen", show=False, id="queue.reopen"),
        Binding("n", "next_open", "Next untriaged", id="queue.next_open"),
        Binding("z", "undo", "Undo", id="queue.undo"),
        Binding("space", "mark", "Mark for batch (c d u o decide all marked)", show=False, id="queue.mark"),
        Binding("e", "note", "Note", show=False, id="queue.note"),
        Binding("f", "filter", "Filter", show=False, id="queue.filter"),
        Binding("h", "toggle_superseded", "Earlier runs", show=False, id="queue.superseded"),
        Binding("enter", "open_item", "Item panel", show=False, id="queue.item"),
        Binding("i", "select_item", "Item on 2 Items", show=False, id="queue.select_item"),
        Binding("m", "select_model", "Model on 3 Models", show=False, id="queue.select_model"),
        Binding("escape", "clear_focus", "All models/items", show=False, id="queue.all"),
        Binding("pagedown", "scroll_detail(1)", "Scroll", show=False),
        Binding("pageup", "scroll_detail(-1)", "Scroll", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.flags = pd.DataFrame()
        self.view = np.zeros(0, np.int64)
        self.pos = 0
        self.state_filter = self.FILTERS[0]
        self.show_superseded = False
        self.context: dict = {}
        self._pending: dict[int, tuple[str, str | None]] = {}
        self._pending_lock = threading.Lock()
        self.focus: tuple[str, int, str] | None = None  # (column, value, label): one model's or item's flags
        self.focus_benchmark: str | None = None  # the benchmark that model or item belongs to
        # this session's decisions, latest last; one entry per key press (a batch is one entry), each
        # (flag id, state, note, carried_from) it replaced
        self.undo_stack: list[list[tuple[int, str, str, object]]] = []
        self.marked: set[int] = set()  # flag ids marked with space for a batch decision
        self.last_decision = ""

    def compose_body(self) -> ComposeResult:
        yield SafeStatic("", id="queue-status", classes="status-line", markup=False)
        with VerticalScroll(id="queue-scroll"):
            yield SafeStatic("", id="queue-detail", markup=False)

    def on_screen_resume(self) -> None:
        jump = self.app.flag_focus
        if jump is not None and jump[0] == self.MODE:
            self.app.flag_focus = None
            self.focus = jump[1:]
            self.focus_benchmark = self.app.benchmark
            if len(self.flags):
                self._refilter()
        super().on_screen_resume()

    def action_clear_focus(self) -> None:
        if self.focus is not None:
            self.focus = None
            self._refilter(keep=self.current_id())

    # ------------------------------------------------------------------ data
    def fetch(self, conn: sqlite3.Connection, benchmark: str) -> dict:
        from benchloupe.store import curation, read

        bid = read.benchmark_id(conn, benchmark)
        flags = curation.queue_flags(conn, bid, self.KIND, include_superseded=self.show_superseded)
        return {"flags": flags, "context": self.fetch_context(conn, benchmark, flags)}

    def forget(self) -> None:
        """A failed read leaves no flag to decide on (base.BenchScreen.loading_failed)."""
        self.flags, self.view, self.pos, self.marked = pd.DataFrame(), np.zeros(0, np.int64), 0, set()

    def fetch_context(self, conn: sqlite3.Connection, benchmark: str, flags: pd.DataFrame) -> dict:
        return {}

    def show(self, data: dict) -> None:
        current = self.current_id()
        if self.focus is not None and self.focus_benchmark != self._token[0]:
            self.focus = None  # a model or item of the benchmark the curator switched away from
        self.flags = data["flags"].reset_index(drop=True)
        self.context = data["context"]
        self.marked &= set(int(i) for i in self.flags["id"]) if len(self.flags) else set()
        with self._pending_lock:
            for fid, (state, note, _undo) in self._pending.items():
                hit = self.flags.index[self.flags["id"] == fid]
                if len(hit):
                    self.flags.loc[hit, "state"] = state
                    if note is not None:
                        self.flags.loc[hit, "note"] = note
        self._refilter(keep=current)

    def current_id(self) -> int | None:
        if not len(self.view):
            return None
        return int(self.flags["id"].iloc[self.view[self.pos]])

    def _refilter(self, keep: int | None = None) -> None:
        self.view = np.flatnonzero(self.filter_mask()) if len(self.flags) else np.zeros(0, np.int64)
        self.pos = 0
        if keep is not None and len(self.view):
            hit = np.flatnonzero(self.flags["id"].to_numpy()[self.view] == keep)
            if hit.size:
                self.pos = int(hit[0])
        self.render_current()

    def filter_mask(self) -> np.ndarray:
        """The flags the queue steps through: the state filter and the model/item focus."""
        keep = np.ones(len(self.flags), bool)
        if self.state_filter in STATE_FILTERS[1:]:
            keep &= (self.flags["state"] == self.state_filter).to_numpy()
        if self.focus is not None:
            column, value, _label = self.focus
            keep &= (self.flags[column] == value).to_numpy()
        return keep

    # ------------------------------------------------------------------ rendering
    def render_current(self) -> None:
        total = len(self.flags)
        triaged = int((self.flags["state"] != "open").sum()) if total else 0
        status = Text(no_wrap=True, overflow="ellipsis")
        if len(self.view):
            status.append(f"{self.NOUN} {self.pos + 1} of {len(self.view)}", style="bold")
        else:
            status.append(f"no {self.PLURAL}", style="bold")
        if self.state_filter != "all":
            status.append(f" ({self.state_filter})", style="bold yellow")
            if len(self.view) and self.state_filter in STATE_FILTERS[1:]:
                now = self.flags["state"].iloc[self.view[self.pos]]
                if now != self.state_filter:  # just decided: it stays here until the next move
                    status.append(f" · this one now {now}", style="bold")
        if self.show_superseded:
            status.append(" · with earlier runs", style="bold yellow")
        if self.focus is not None:
            status.append(f" · only {self.focus[2]} (esc: all)", style="bold yellow")
        status.append(f" · {triaged} of {total} triaged", style="bold")
        if self.marked:
            status.append(f" · {len(self.marked)} marked: c d u o decide them", style="bold magenta")
        if self.last_decision:
            status.append(f" · {self.last_decision} (z undo)", style="bold green")
        status.append("  j k step · space mark · e note · ? all keys", style="dim")  # the status wraps to 2 lines
        self.query_one("#queue-status", SafeStatic).update(status)
        detail = self.query_one("#queue-detail", SafeStatic)
        if not len(self.view):
            detail.update(self.empty_text(total))
            return
        row = self.flags.iloc[self.view[self.pos]]
        text = Text()
        if int(row["id"]) in self.marked:
            text.append("● marked ", style="bold magenta")
        text.append(f"#{row['id']} ", style="dim")
        text.append(str(row["state"]), style=STATE_STYLE.get(row["state"], ""))
        text.append(f" · run #{row['run_id']} · score {fmt_value(row['score'], 3)}", style="dim")
        if row.get("superseded"):
            text.append(" · superseded by a later run", style="bold yellow")
        if pd.notna(row.get("carried_from")):
            text.append(f" · decision carried over from flag #{int(row['carried_from'])}", style="dim")
        if row["note"]:
            text.append("\nnote: ", style="bold")
            text.append(str(row["note"]))
        text.append("\n")
        text.append_text(self.render_flag(row))
        detail.update(text)
        self.query_one("#queue-scroll", VerticalScroll).scroll_home(animate=False)

    def empty_text(self, total: int) -> Text:
        if total:
            return Text(f"no {self.PLURAL} in state {self.state_filter!r}; f changes the filter", style="dim")
        return Text(f"no {self.PLURAL} for this benchmark yet: start the analysis that finds them in "
                    "4: Runs", style="dim")

    def render_flag(self, row: pd.Series) -> Text:
        return Text(str(row["payload"]))

    # ------------------------------------------------------------------ actions
    def action_step(self, step: int) -> None:
        if len(self.view):
            self.pos = max(0, min(self.pos + step, len(self.view) - 1))
            self.render_current()

    def action_filter(self) -> None:
        i = self.FILTERS.index(self.state_filter)
        self.state_filter = self.FILTERS[(i + 1) % len(self.FILTERS)]
        self._refilter(keep=self.current_id())

    def action_toggle_superseded(self) -> None:
        """h: also step through the flags of earlier runs of the analysis (hidden by default)."""
        self.show_superseded = not self.show_superseded
        self.reload()

    def action_decide(self, state: str) -> None:
        """c/d/u/o: decide the current flag and move on; with flags marked (space), decide all the marked ones
        at once (one transaction, one undo)."""
        if self.marked:
            ids = sorted(self.marked)
            self.marked = set()
            self._decide_many(ids, state, count(len(ids), "marked " + self.NOUN.lower(), "marked " + self.PLURAL))
            return
        fid = self.current_id()
        if fid is None:
            return
        self._decide_many([fid], state, f"#{fid}")
        if self.pos < len(self.view) - 1 and state != "open":
            self.pos += 1
        self.render_current()

    def _decide_many(self, ids: list[int], state: str, what: str) -> None:
        """Show *state* on every flag of *ids* at once, remember what each replaced as one undo entry, and write
        them in one transaction."""
        rows = [int(np.flatnonzero(self.flags["id"].to_numpy() == fid)[0]) for fid in ids]
        self.undo_stack.append([self._before(i) for i in rows])
        for i in rows:
            self.flags.loc[i, "state"] = state
            if "stored_state" in self.flags:
                self.flags.loc[i, "stored_state"] = state
            if "carried_from" in self.flags:
                self.flags.loc[i, "carried_from"] = pd.NA  # decided here now
        self._save([(fid, state, None) for fid in ids])
        self.last_decision = f"{what} {state}"
        self.render_current()

    def _before(self, i: int) -> tuple[int, str, str, object]:
        row = self.flags.iloc[i]
        carried = row.get("carried_from")
        return (int(row["id"]), str(row["state"]), str(row["note"]),
                carried if carried is not None and pd.notna(carried) else None)

    def _remember(self, i: int) -> None:
        self.undo_stack.append([self._before(i)])

    def action_undo(self) -> None:
        """z: undo this session's latest decision, note or batch: each flag gets back its state and note
        (written in one transaction as ``flag:undo`` audit rows) and the queue shows it."""
        if not self.undo_stack:
            self.notify("nothing to undo", severity="warning")
            return
        entry = self.undo_stack.pop()
        changes = []
        for fid, state, note, carried in entry:
            hit = np.flatnonzero(self.flags["id"].to_numpy() == fid) if len(self.flags) else []
            if len(hit):
                i = int(hit[0])
                self.flags.loc[i, ["state", "note"]] = [state, note]
                if "carried_from" in self.flags:
                    self.flags.loc[i, "carried_from"] = carried if carried is not None else pd.NA
                if "stored_state" in self.flags:
                    self.flags.loc[i, "stored_state"] = "open" if carried is not None else state
                where = np.flatnonzero(self.view == i)
                if where.size:
                    self.pos = int(where[0])
            # a carried-over decision lives on the earlier flag: this one goes back to open with no note
            changes.append((fid, "open" if carried is not None else state, "" if carried is not None else note))
        self._save(changes, undo=True)
        fid, state = entry[0][0], entry[0][1]
        self.last_decision = f"#{fid} back to {state}" if len(entry) == 1 else f"{len(entry)} {self.PLURAL} back"
        self.render_current()

    def action_mark(self) -> None:
        """space: mark the current flag for a batch decision (again: unmark) and move on."""
        fid = self.current_id()
        if fid is None:
            return
        self.marked ^= {fid}
        if fid in self.marked and self.pos < len(self.view) - 1:
            self.pos += 1
        self.render_current()

    def decide_all_of(self, column: str, label: str) -> None:
        """Decide every open flag whose *column* (model_id, item_id) is the current flag's, after a
        confirmation that names the count (one transaction, one undo)."""
        if not len(self.view):
            return
        row = self.flags.iloc[self.view[self.pos]]
        value = row[column]
        if pd.isna(value):
            self.notify(f"this {self.NOUN.lower()} has no {label}", severity="warning")
            return
        hit = (self.flags[column] == value) & (self.flags["state"] == "open")
        ids = [int(i) for i in self.flags.loc[hit, "id"]]
        if not ids:
            self.notify(f"no open {self.PLURAL} left on this {label}")
            return
        name = row["model"] if column == "model_id" else row["item_key"]
        question = f"Decide the {count(len(ids), 'open ' + self.NOUN.lower(), 'open ' + self.PLURAL)} of {label} {name}?"

        def chosen(state: str | None) -> None:
            if state:
                self._decide_many(ids, state, f"{count(len(ids), self.NOUN.lower(), self.PLURAL)} of {label} {name}")

        self.app.push_screen(ChoiceDialog(question, DECISIONS, detail="One z undoes all of them."), chosen)

    def action_next_open(self) -> None:
        """n: the next flag still open in this view (wrapping round), whatever the filter."""
        if not len(self.view):
            return
        states = self.flags["state"].to_numpy()[self.view]
        order = np.r_[np.arange(self.pos + 1, len(self.view)), np.arange(0, self.pos + 1)]
        hit = order[states[order] == "open"]
        if not hit.size:
            self.notify(f"every {self.NOUN.lower()} here is triaged")
            return
        self.pos = int(hit[0])
        self.render_current()

    def action_note(self) -> None:
        fid = self.current_id()
        if fid is None:
            return
        i = self.view[self.pos]

        def done(note: str | None) -> None:
            if note is None:
                return
            self._remember(i)
            self.last_decision = f"#{fid} note saved"
            self.flags.loc[i, "note"] = note
            self._save([(fid, str(self.flags["state"].iloc[i]), note)])
            self.render_current()

        self.app.push_screen(PromptDialog(f"Note on {self.NOUN.lower()} #{fid}", value=str(self.flags["note"].iloc[i]),
                                          help="Saved with the flag and in the audit log."), done)

    def _save(self, changes: list[tuple[int, str, str | None]], *, undo: bool = False) -> None:
        """Write ``(flag id, state, note or None)`` changes in one transaction, in a worker; a flag decided
        again before its write ran is written with its latest decision."""
        from benchloupe.store import curation

        ids = [fid for fid, _s, _n in changes]
        with self._pending_lock:
            for flag_id, state, note in changes:
                old = self._pending.get(flag_id)
                if note is None and old is not None:
                    note = old[1]
                self._pending[flag_id] = (state, note, undo)

        def write(conn: sqlite3.Connection) -> None:
            with self._pending_lock:
                latest = [(fid, self._pending.pop(fid)) for fid in ids if fid in self._pending]
            if latest:
                curation.set_flag_states(conn, [(fid, st, note) for fid, (st, note, _u) in latest],
                                         undo=latest[0][1][2])

        store_write(self, write, reload=False)

    @property
    def saving(self) -> bool:
        """True while a decision is waiting to be written."""
        with self._pending_lock:
            return bool(self._pending)

    def action_open_item(self) -> None:
        """Enter: the flag's item panel, its curve marking the flag's model."""
        if not len(self.view):
            return
        row = self.flags.iloc[self.view[self.pos]]
        if pd.notna(row["item_id"]):
            open_item_panel(self.app, int(row["item_id"]), row["model_id"])
        else:
            self.notify(f"this {self.NOUN.lower()} is about no single item", severity="warning")

    def action_select_item(self) -> None:
        """i: the flag's item selected on 2 Items."""
        if len(self.view):
            item_id = self.flags["item_id"].iloc[self.view[self.pos]]
            if pd.isna(item_id):
                self.notify(f"this {self.NOUN.lower()} is about no single item", severity="warning")
                return
            select_on_screen(self.app, "items", int(item_id))

    def action_select_model(self) -> None:
        """m: the flag's model (model A of a pair) selected on 3 Models."""
        if len(self.view):
            model_id = self.flags["model_id"].iloc[self.view[self.pos]]
            if pd.isna(model_id):
                self.notify(f"this {self.NOUN.lower()} has no model", severity="warning")
                return
            select_on_screen(self.app, "models", int(model_id))

    def action_scroll_detail(self, direction: int) -> None:
        scroll = self.query_one("#queue-scroll", VerticalScroll)
        scroll.scroll_to(y=scroll.scroll_y + direction * max(scroll.size.height - 2, 1), animate=False)


DECISIONS = (("c", "confirmed", "confirm"), ("d", "dismissed", "dismiss"), ("u", "unsure", "unsure"))


def open_item_panel(app, item_id: int, model_id=None) -> None:
    """Push the item panel of *item_id*; its curve marks *model_id* (the flagged model) when given."""
    from benchloupe.tui.screens.items import show_item

    show_item(app, item_id, mark_model=None if model_id is None or pd.isna(model_id) else int(model_id))


SELECT_TIMEOUT = 30.0


def select_on_screen(app, mode: str, row_id: int) -> None:
    """Switch to the *mode* screen (items, models) and move its table's cursor to the row whose ``id`` is
    *row_id* once the screen has shown its data; says so when a search or filter there hides the row."""
    from benchloupe.tui.widgets.table import FrameTable

    app.switch_mode(mode)
    state = {"waited": 0.0}

    def attempt() -> None:
        state["waited"] += 0.05
        screen = app.screen
        here = getattr(screen, "MODE", None) == mode and type(screen).__name__ != "ItemPanel"
        if not here and state["waited"] > 1.0:
            timer.stop()  # the curator went elsewhere
            return
        if not here or (screen.shown_token != screen.current_token() and state["waited"] < SELECT_TIMEOUT):
            return
        timer.stop()
        if not screen.query_one(FrameTable).move_to_value("id", row_id):
            app.notify("that row is hidden on this screen by its search or filters (escape clears them)",
                       severity="warning")

    timer = app.set_interval(0.05, attempt)


def fmt_value(v, digits: int = 2, signed: bool = False) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, int | np.integer) and not signed:  # counts, indices, 0/1 responses: "134", not "134.000"
        return str(int(v))
    if isinstance(v, int | float | np.number):
        return format(float(v), f"{'+' if signed else ''}.{digits}f")
    return str(v)


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 flag``, ``3 flags`` (:func:`benchloupe.words.count`)."""
    from benchloupe.words import count as words_count

    return words_count(n, noun, plural)


def item_text(text: str, limit: int = TEXT_PREVIEW) -> Text:
    """Item text shown literally, cut at *limit* characters with a pointer to the full view."""
    s = str(text or "")
    out = Text(s[:limit])
    if len(s) > limit:
        out.append(f" … ({len(s) - limit} more characters; enter opens the item)", style="dim italic")
    return out


def payload_rest(payload: dict, shown: set[str]) -> Text:
    """Payload entries not rendered by the screen, one per line, literally."""
    text = Text()
    for k, v in payload.items():
        if k in shown:
            continue
        text.append(f"{k}: ", style="dim")
        text.append(fmt_value(v, 3) if not isinstance(v, list | dict) else str(v)[:300])
        text.append("\n")
    return text
