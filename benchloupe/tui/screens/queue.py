"""Step-through triage queues (anomalies, near-tie reversals): one flag at a time, next/previous with single
keys, decisions (confirm, dismiss, unsure, reopen, note) saved at once through store.curation and the
queue moves on, the decision named in the status line; ``z`` undoes this session's latest decision (the state
and note it replaced come back, audited as ``flag:undo``), ``n`` goes to the next open flag; a filter by state
and a "12 of 87 triaged" line.

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
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll

from benchloupe.tui.screens.base import BenchScreen, store_write
from benchloupe.tui.widgets.dialogs import PromptDialog
from benchloupe.tui.widgets.safe import SafeStatic

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
        Binding("j,down,right", "step(1)", "Next", id="queue.next"),
        Binding("k,up,left", "step(-1)", "Prev", id="queue.prev"),
        Binding("c", "decide('confirmed')", "Confirm", id="queue.confirm"),
        Binding("d", "decide('dismissed')", "Dismiss", id="queue.dismiss"),
        Binding("u", "decide('unsure')", "Unsure", id="queue.unsure"),
        Binding("o", "decide('open')", "Reopen", show=False, id="queue.reopen"),
        Binding("n", "next_open", "Next untriaged", id="queue.next_open"),
        Binding("z", "undo", "Undo", id="queue.undo"),
        Binding("e", "note", "Note", id="queue.note"),
        Binding("f", "filter", "Filter", show=False, id="queue.filter"),
        Binding("h", "toggle_superseded", "Earlier runs", show=False, id="queue.superseded"),
        Binding("enter", "open_item", "Item panel", show=False, id="queue.item"),
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
        # this session's decisions, latest last: (flag id, state, note, carried_from) each replaced
        self.undo_stack: list[tuple[int, str, str, object]] = []
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

    def fetch_context(self, conn: sqlite3.Connection, benchmark: str, flags: pd.DataFrame) -> dict:
        return {}

    def show(self, data: dict) -> None:
        current = self.current_id()
        self.flags = data["flags"].reset_index(drop=True)
        self.context = data["context"]
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
        if self.last_decision:
            status.append(f" · {self.last_decision} (z undo)", style="bold green")
        status.append("  n next open · f filter · enter item", style="dim")
        self.query_one("#queue-status", SafeStatic).update(status)
        detail = self.query_one("#queue-detail", SafeStatic)
        if not len(self.view):
            detail.update(self.empty_text(total))
            return
        row = self.flags.iloc[self.view[self.pos]]
        text = Text()
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
        fid = self.current_id()
        if fid is None:
            return
        i = self.view[self.pos]
        self._remember(i)
        self.flags.loc[i, "state"] = state
        if "stored_state" in self.flags:
            self.flags.loc[i, "stored_state"] = state
        if "carried_from" in self.flags:
            self.flags.loc[i, "carried_from"] = pd.NA  # decided here now
        self._save(fid, state, None)
        self.last_decision = f"#{fid} {state}"
        if self.pos < len(self.view) - 1 and state != "open":
            self.pos += 1
        self.render_current()

    def _remember(self, i: int) -> None:
        row = self.flags.iloc[i]
        carried = row.get("carried_from")
        self.undo_stack.append((int(row["id"]), str(row["state"]), str(row["note"]),
                                carried if carried is not None and pd.notna(carried) else None))

    def action_undo(self) -> None:
        """z: undo this session's latest decision or note: the flag gets back its state and note (written as a
        ``flag:undo`` audit row) and the queue shows it."""
        if not self.undo_stack:
            self.notify("nothing to undo", severity="warning")
            return
        fid, state, note, carried = self.undo_stack.pop()
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
        self._save(fid, "open" if carried is not None else state, "" if carried is not None else note, undo=True)
        self.last_decision = f"#{fid} back to {state}"
        self.render_current()

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
            self._save(fid, str(self.flags["state"].iloc[i]), note)
            self.render_current()

        self.app.push_screen(PromptDialog(f"Note on {self.NOUN.lower()} #{fid}", value=str(self.flags["note"].iloc[i]),
                                          help="Saved with the flag and in the audit log."), done)

    def _save(self, flag_id: int, state: str, note: str | None, *, undo: bool = False) -> None:
        from benchloupe.store import curation

        with self._pending_lock:
            old = self._pending.get(flag_id)
            if note is None and old is not None:
                note = old[1]
            self._pending[flag_id] = (state, note, undo)

        def write(conn: sqlite3.Connection) -> None:
            with self._pending_lock:
                latest = self._pending.pop(flag_id, None)
            if latest is not None:
                curation.set_flag_state(conn, flag_id, latest[0], latest[1], undo=latest[2])

        store_write(self, write, reload=False)

    @property
    def saving(self) -> bool:
        """True while a decision is waiting to be written."""
        with self._pending_lock:
            return bool(self._pending)

    def action_open_item(self) -> None:
        if not len(self.view):
            return
        item_id = self.flags["item_id"].iloc[self.view[self.pos]]
        if pd.notna(item_id):
            from benchloupe.tui.screens.items import ItemPanel

            self.app.push_screen(ItemPanel(int(item_id)))

    def action_scroll_detail(self, direction: int) -> None:
        scroll = self.query_one("#queue-scroll", VerticalScroll)
        scroll.scroll_to(y=scroll.scroll_y + direction * max(scroll.size.height - 2, 1), animate=False)


def fmt_value(v, digits: int = 2, signed: bool = False) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float | np.number):
        return format(float(v), f"{'+' if signed else ''}.{digits}f")
    return str(v)


def count(n: int, noun: str) -> str:
    """``1 flag``, ``3 flags``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


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
