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

A decision changes the flag shown immediately and is written by a worker with its own connection, in the
order of the keys (tui/writes.py), each as its own audited write. Several curators on one database (issue 25):
a decision names the version of the flag the curator saw and is refused, naming who changed it, when and to
what, when another writer changed it since (the card then shows the flag as it is now); ``z`` takes back only
this curator's own latest decision and is refused when someone changed the flag after it. The queue reloads its
flags when another process writes (tui/live.py), keeping the cursor, the marks, the filter and the focus; a card
changed meanwhile says so, and every card says who decided it and when, with its history. The filter also
offers "mine" and "others'" (decided by this curator, by someone else).

A queue is read a page at a time (issue 26; store/queue.py): the screen holds a window of
:data:`~benchloupe.store.queue.PAGE` flags of its view around the card, with the view's size, the position and
the triaged count from one COUNT pass; the worker reads the first window (and the models' and items' context),
a step past the window reads the next page on the UI thread from the rows after (before) the window's last
(first) flag, and the filter, ``n``, ``M``/``I``, a batch of marked flags, an undo of a flag outside the window
and the export read what they need. Before, the first visit read all 210,060 flags of a 5,000 x 14,000
workspace into pandas (2.2 s) and every live reload after a decision read them again.
"""

from __future__ import annotations

import sqlite3
from typing import ClassVar

import numpy as np
import pandas as pd
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll

from benchloupe.store.actor import by_at
from benchloupe.store.queue import LEAD, PAGE, Filter, FlagQueue, Window
from benchloupe.textsafe import one_line
from benchloupe.tui.screens.base import BenchScreen, store_write
from benchloupe.tui.widgets.dialogs import ChoiceDialog, PromptDialog
from benchloupe.tui.widgets.safe import SafeStatic, Text
from benchloupe.tui.widgets.table import keep_tail, status_width
from benchloupe.tui.writes import CHAIN, ChainBroken, Decision, Ledger

STATE_FILTERS = ("all", "open", "confirmed", "dismissed", "unsure")
WHO_FILTERS = ("mine", "others'")  # decided by this curator / by another one
FILTER_WORDS = {"open": "undecided"}
STATE_STYLE = {"open": "bold", "confirmed": "bold green", "dismissed": "dim", "unsure": "bold yellow"}
TEXT_PREVIEW = 600
HISTORY_ROWS = 5  # the latest decisions on a flag shown under its card


def _who_line(row) -> str:
    """``dismissed by bea at 14:02, note: other curator says noise`` from a flag row or a conflict's change."""
    get = row.get if hasattr(row, "get") else (lambda k, d=None: row[k] if k in row else d)
    text = f"{get('state')} {by_at(get('updated_by', get('by')), get('updated_at', get('at')))}".strip()
    note = get("note") or ""
    if note:
        text += f", note: {one_line(str(note)[:80])}{'…' if len(str(note)) > 80 else ''}"
    return text


class FlagQueueScreen(BenchScreen):
    """Base for the anomaly and reversal queues: subclasses set KIND/NOUN and implement ``render_flag``."""

    KIND: ClassVar[str] = ""
    FILTERS: ClassVar[tuple[str, ...]] = STATE_FILTERS + WHO_FILTERS
    TOPICS = ("flags", "runs", "items", "models")
    NOUN: ClassVar[str] = ""
    PLURAL: ClassVar[str] = ""
    SCORE_WORD: ClassVar[str] = ""  # what a flag's score is, in the card's head ("" : not shown there)
    # False: the flags' payloads stay JSON text until a card shows one (``payload``): the anomaly queue's
    # 210,060 payloads were parsed on every load for the one card on screen (issue 26)
    PARSE_PAYLOADS: ClassVar[bool] = True
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
        # the loaded window of the view (store/queue.py): ``flags`` holds the rows of view positions
        # ``start`` .. ``start + len(flags) - 1`` in the view's order, ``view`` their row numbers (so that
        # ``flags.iloc[view[pos - start]]`` is the flag at view position ``pos``), ``view_len`` how many flags the
        # filter takes, ``total`` and ``triaged`` the whole queue's counts (issue 26: a page, not 210,060 rows)
        self.flags = pd.DataFrame()
        self.view = np.zeros(0, np.int64)
        self.start = 0
        self.view_len = 0
        self.total = 0
        self.triaged = 0
        self.pos = 0
        self.queue: FlagQueue | None = None
        self.kept: int | None = None  # a flag kept in the view whatever the filter (the card a reload found decided)
        self.rows_read = 0  # flag rows this screen has read from the store (tests: a page per read)
        self._load_args: dict = {}
        self.state_filter = self.FILTERS[0]
        self.show_superseded = False
        self.context: dict = {}
        self.history: dict[int, list[dict]] = {}  # flag id -> its latest audit rows (who, when, what)
        self.focus: tuple[str, int, str] | None = None  # (column, value, label): one model's or item's flags
        self.focus_benchmark: str | None = None  # the benchmark that model or item belongs to
        # what this screen knows of each flag's version, its own queued writes and the undo stack (one Decision
        # per key press, a batch is one; ``before`` per flag: (state, note, carried_from) it replaced)
        self.ledger = Ledger()
        self._overlay: dict[int, tuple[str, str]] = {}  # own writes still queued: what the flag shows till saved
        self._shown: dict[int, str] = {}  # the state this screen last showed on a flag it changed (the counts)
        self.changed_meanwhile: dict[int, str] = {}  # flag id -> "dismissed by bea at 14:02" (another writer)
        self.marked: set[int] = set()  # flag ids marked with space for a batch decision
        self.cells: dict = {}  # flag id -> the cell (store.curation.Cell) it was about when decided here
        self.last_decision = ""

    @property
    def undo_stack(self) -> list[Decision]:
        return self.ledger.stack

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
            if self.queue is not None:
                self._refilter()
        super().on_screen_resume()

    def action_clear_focus(self) -> None:
        if self.focus is not None:
            self.focus = None
            self._refilter(keep=self.current_id())

    # ------------------------------------------------------------------ data
    def reload(self, *, live: bool = False) -> None:
        """As BenchScreen.reload; what the worker reads around (the flag on the card, the filter, this screen's
        own decisions still being written) is taken here, on the UI thread."""
        current = self.current_id()
        self._load_args = {"anchor": current, "at": self.pos, "overlay": dict(self._overlay),
                           "filter": self.current_filter(keep=current), "filter_key": self._filter_key(),
                           "marked": set(self.marked)}
        super().reload(live=live)

    def fetch(self, conn: sqlite3.Connection, benchmark: str, *, context: dict | None = None) -> dict:
        from benchloupe.store import read
        from benchloupe.store.queue import prepare

        args = dict(self._load_args) or {"anchor": None, "at": 0, "overlay": {}, "filter": self.current_filter(),
                                         "filter_key": self._filter_key(), "marked": set()}
        prepare(conn)
        bid = read.benchmark_id(conn, benchmark)
        q = FlagQueue(conn, bid, self.KIND, include_superseded=args["filter_key"][2],
                      parse_payload=self.PARSE_PAYLOADS)
        later = None
        if context is None:  # the models' and items' context, read beside the window on a connection of its own
            # (SQLite and numpy leave the GIL: on 2 cores a third of the first visit, issue 26)
            from concurrent.futures import ThreadPoolExecutor

            pool = ThreadPoolExecutor(1, thread_name_prefix="queue-context")
            later = pool.submit(self._context_apart, benchmark, q)
            pool.shutdown(wait=False)
        window = self._read_window(conn, q, args["filter"], args["overlay"], anchor_id=args["anchor"],
                                   fallback=args["at"])
        alive = q.in_view(conn, Filter(), args["marked"]) if args["marked"] else set()
        history = self._history(conn, window.rows)
        return {"queue": q, "window": window, "history": history, "benchmark": benchmark,
                "anchor": args["anchor"], "filter_key": args["filter_key"], "keep": args["filter"].keep,
                "marked": (args["marked"], alive), "context": context if later is None else later.result()}

    def _context_apart(self, benchmark: str, q: FlagQueue) -> dict:
        """:meth:`fetch_context` on its own connection (a thread beside the load's worker)."""
        from benchloupe.store.db import connect
        from benchloupe.store.queue import prepare

        conn = prepare(connect(self.app.db_path, create=False))
        try:
            return self.fetch_context(conn, benchmark, q)
        finally:
            conn.close()

    def fetch_live(self, conn: sqlite3.Connection, benchmark: str, changed: set[str]) -> dict:
        """Another writer changed the store: when only flags changed (a decision), the model and item context
        stays and only the flags and their history are read again."""
        keep = self.context if changed <= {"flags"} and self.context else None
        return self.fetch(conn, benchmark, context=keep)

    @staticmethod
    def _read_window(conn: sqlite3.Connection, q: FlagQueue, filt: Filter, overlay: dict, *,
                     anchor_id: int | None = None, fallback: int = 0) -> Window:
        """The window around flag *anchor_id* when the view takes it, else around view position *fallback*."""
        if anchor_id is not None:
            key = q.key_of(conn, anchor_id)
            if key is not None:
                w = q.window(conn, filt, overlay=overlay, anchor=key)
                i = w.anchor - w.start
                if 0 <= i < len(w.rows) and int(w.rows["id"].iloc[i]) == anchor_id:
                    return w
        return q.window(conn, filt, overlay=overlay, at=fallback)

    @staticmethod
    def _history(conn: sqlite3.Connection, rows: pd.DataFrame) -> dict[int, list[dict]]:
        from benchloupe.store import curation

        decided = [int(i) for i, v in zip(rows["id"], rows["version"]) if v] if len(rows) else []
        by_flag: dict[int, list[dict]] = {}
        for r in curation.flag_history(conn, decided, limit=HISTORY_ROWS).to_dict("records"):
            by_flag.setdefault(int(r["flag_id"]), []).append(r)
        return by_flag

    def loading_started(self) -> None:
        """The first load (or another benchmark's) says so while the worker reads (issue 26: 210,060 flags)."""
        if self.shown_token is None or self.shown_token[0] != self.app.benchmark:
            self.query_one("#queue-status", SafeStatic).update(
                Text(f"loading the {self.PLURAL} of {self.app.benchmark}…", style="dim"))

    def forget(self) -> None:
        """A failed read leaves no flag to decide on (base.BenchScreen.loading_failed)."""
        self.flags, self.view, self.pos, self.marked = pd.DataFrame(), np.zeros(0, np.int64), 0, set()
        self.start = self.view_len = self.total = self.triaged = 0
        self.queue = None

    def fetch_context(self, conn: sqlite3.Connection, benchmark: str, q: FlagQueue) -> dict:
        return {}

    @staticmethod
    def payload(row) -> dict:
        """The payload of flag *row* as a dict (parsed here when the queue kept it as text)."""
        from benchloupe.store.curation import payload_of

        return payload_of(row["payload"])

    def show(self, data: dict) -> None:
        current = self.current_id()
        if self.focus is not None and self.focus_benchmark != self._token[0]:
            self.focus = None  # a model or item of the benchmark the curator switched away from
        self.queue = data["queue"]
        self.context = data["context"]
        asked, alive = data["marked"]
        self.marked -= asked - alive  # marks on flags no longer in the queue (a rerun superseded them)
        first_load = not len(self.flags) and not self.ledger.known
        self.rows_read += data["queue"].rows_read
        self._install(data["window"], data["history"], first_load=first_load)
        self.kept = data["keep"]
        if data["filter_key"] != self._filter_key() or (current is not None and current != data["anchor"]):
            # the filter changed or the curator moved while this was read: read again around the card now
            self._refilter(keep=current, keep_pos=True)
            return
        self.pos = data["window"].anchor if data["window"].anchor is not None else 0
        self.pos = max(0, min(self.pos, self.view_len - 1))
        self.render_current()

    def _install(self, w: Window, history: dict[int, list[dict]], *, first_load: bool = False) -> None:
        """Put window *w* in place: what this screen knows of each flag's version (its own newer writes stay on
        the card, another writer's change since the card showed a flag is said), its own queued decisions."""
        flags = w.rows.reset_index(drop=True)
        ids = [int(i) for i in flags["id"]] if len(flags) else []
        versions = dict(zip(ids, (int(v) for v in flags["version"]))) if ids else {}
        if len(self.flags):  # a load that began before this screen's own latest write: keep what the card shows
            old = self.flags.set_index("id")
            cols = [c for c in ("state", "note", "version", "updated_by", "updated_at") if c in old.columns]
            for fid, v in versions.items():
                known = self.ledger.known.get(fid)
                if known is not None and v < known and fid in old.index:
                    flags.loc[flags["id"] == fid, cols] = old.loc[fid, cols].to_numpy()
        moved = self.ledger.loaded(versions) if ids else set()
        if not first_load:
            for fid in moved:  # another writer decided it while this screen showed it: the card says so
                self.changed_meanwhile[fid] = _who_line(flags.iloc[ids.index(fid)])
        for fid, (state, note) in self._overlay.items():  # this screen's own decisions still being written
            hit = flags.index[flags["id"] == fid]
            if len(hit):
                flags.loc[hit, ["state", "note"]] = [state, note]
        self.flags, self.view, self.start = flags, np.arange(len(flags)), w.start
        self.view_len, self.total, self.triaged = w.view, w.total, w.triaged
        self.history = history

    def _read(self, fn, *, what: str = "read"):
        """``fn(conn, queue)`` on a connection of the UI thread (a page turn, a filter: tens of milliseconds);
        a failure is said in one line and returns None."""
        from benchloupe.store.db import connect
        from benchloupe.store.queue import prepare

        q = self.queue
        if q is None:
            return None
        read_before = q.rows_read
        try:
            conn = prepare(connect(self.app.db_path, create=False))
            try:
                return fn(conn, q)
            finally:
                conn.close()
                self.rows_read += q.rows_read - read_before
        except Exception as exc:  # noqa: BLE001 - the store's message in one line; the card stays as it was
            self.app.report_error(exc, self.MODE)
            return None

    def _relocate(self, *, anchor_id: int | None = None, at: int = 0, after: tuple[float, int] | None = None,
                  before: tuple[float, int] | None = None) -> bool:
        """Read the window around flag *anchor_id* (else view position *at*), or the rows after key *after* /
        before key *before* (a page turn), and put the cursor on that flag / position. False when the read
        failed (nothing changed)."""
        filt, overlay = self.current_filter(), dict(self._overlay)

        def read(conn, q):
            if after is not None:
                w = q.window(conn, filt, overlay=overlay, anchor=after, after=True)
            elif before is not None:
                w = q.window(conn, filt, overlay=overlay, anchor=before, lead=PAGE - LEAD)
                w.anchor = max(0, w.anchor - 1)
            else:
                w = self._read_window(conn, q, filt, overlay, anchor_id=anchor_id, fallback=at)
            return w, self._history(conn, w.rows)

        got = self._read(read)
        if got is None:
            return False
        w, history = got
        self._install(w, history)
        self.pos = max(0, min(w.anchor or 0, self.view_len - 1))
        if not self._loaded(self.pos) and self.view_len:  # the view ended before it (it shrank meanwhile)
            self.pos = self.start + len(self.flags) - 1
        return True

    def export_rows(self, columns):
        """What ``w`` exports: every flag of the view (filter, focus, the card kept), *columns*, read by the
        export's worker."""
        from benchloupe.store.queue import prepare
        from benchloupe.tui.export import QueueRows

        q = self.queue
        if q is None:
            return None
        filt, overlay = self.current_filter(), dict(self._overlay)
        return QueueRows(self.view_len, lambda conn: q.export(prepare(conn), filt, columns, overlay=overlay))

    def current_filter(self, keep: int | None = None) -> Filter:
        """The view's filter; the flag kept in it whatever the filter is *keep*, else the one a reload kept."""
        where, params = self.filter_where()
        return Filter(where, params, keep if keep is not None else self.kept)

    def _filter_key(self) -> tuple:
        return (self.state_filter, self.focus, self.show_superseded, getattr(self.app, "actor", ""))

    def current_id(self) -> int | None:
        if not self.view_len or not self._loaded(self.pos):
            return None
        return int(self.flags["id"].iloc[self.pos - self.start])

    def _loaded(self, pos: int) -> bool:
        return self.start <= pos < self.start + len(self.flags)

    def _at(self, pos: int) -> pd.Series:
        """The row of the flag at view position *pos* (in the window)."""
        return self.flags.iloc[pos - self.start]

    def _current_row(self) -> pd.Series | None:
        return self._at(self.pos) if self.view_len and self._loaded(self.pos) else None

    def _refilter(self, keep: int | None = None, *, keep_pos: bool = False) -> None:
        """Read the view again; the cursor stays on flag *keep*, or (*keep_pos*: a reload, the flag left the
        filter) at the same place in the list."""
        old_pos = self.pos
        self.kept = keep if keep_pos else None
        if self.queue is not None:
            self._relocate(anchor_id=keep, at=old_pos if keep_pos else 0)
        self.render_current()

    def filter_where(self) -> tuple[str, dict]:
        """The flags the queue steps through, as SQL on the queue's rows (store/queue.py): the state filter and
        the model/item focus."""
        where, params = [], {}
        if self.state_filter in STATE_FILTERS[1:]:
            where.append("q.state = :state")
            params["state"] = self.state_filter
        elif self.state_filter in WHO_FILTERS:
            where.append("q.version > 0 AND (q.state != 'open' OR q.note != '') AND coalesce(q.updated_by, '')"
                         f" {'=' if self.state_filter == 'mine' else '!='} :actor")
            params["actor"] = str(self.app.actor)
        if self.focus is not None:
            column, value, _label = self.focus
            if column not in ("model_id", "item_id", "model_b_id"):
                raise ValueError(f"not a flag column: {column!r}")
            where.append(f"q.{column} = :focus")
            params["focus"] = int(value)
        return " AND ".join(where), params

    # ------------------------------------------------------------------ rendering
    def render_current(self) -> None:
        total, triaged = self.total, self.triaged
        row = self._current_row()
        status = Text(no_wrap=True, overflow="ellipsis")
        if row is not None:
            status.append(f"{self.NOUN} {self.pos + 1:,} of {self.view_len:,}", style="bold")
        else:
            status.append(f"no {self.PLURAL}", style="bold")
        if self.state_filter != "all":
            status.append(f" ({FILTER_WORDS.get(self.state_filter, self.state_filter)})", style="bold yellow")
            if row is not None and self.state_filter in STATE_FILTERS[1:]:
                now = row["state"]
                if now != self.state_filter:  # just decided: it stays here until the next move
                    status.append(f" · this one now {now}", style="bold")
        if self.show_superseded:
            status.append(" · with earlier runs", style="bold yellow")
        if self.focus is not None:
            status.append(f" · only {self.focus[2]} (esc: all)", style="bold yellow")
        status.append(f" · {triaged:,} of {total:,} triaged", style="bold")
        if self.marked:
            status.append(f" · {len(self.marked):,} marked: c d u o decide them", style="bold magenta")
        if self.last_decision:  # "(z undo)" only while there is something left to undo
            status.append(f" · {self.last_decision}" + (" (z undo)" if self.ledger.stack else ""),
                          style="bold green")
        status.append("  j k step · space mark · e note", style="dim")
        line = self.query_one("#queue-status", SafeStatic)  # "? all keys" is never the part cut (issue 32 #7)
        line.update(keep_tail(status, Text(" · ? all keys", style="dim"), status_width(line)))
        detail = self.query_one("#queue-detail", SafeStatic)
        if row is None:
            detail.update(self.empty_text(total))
            return
        text = Text()
        if int(row["id"]) in self.marked:
            text.append("● marked ", style="bold magenta")
        fid = int(row["id"])
        text.append(f"#{row['id']} ", style="dim")
        text.append(str(row["state"]), style=STATE_STYLE.get(row["state"], ""))
        if fid in self._overlay:
            text.append(" (saving…)", style="dim")
        elif row.get("version") and (who := by_at(row.get("updated_by"), row.get("updated_at"))):
            text.append(" " + who, style="dim")  # (an undo back to a never-decided flag has no author)
        text.append(f" · run #{row['run_id']}", style="dim")
        if self.SCORE_WORD:  # a reversal's score is only its reversed 0/1: "score 1.000" on every card said nothing
            text.append(f" · {self.SCORE_WORD} {fmt_value(row['score'], 3, signed=True)}", style="dim")
        if fid in self.changed_meanwhile:
            text.append(f"\n⚠ changed while you looked: {self.changed_meanwhile[fid]}", style="bold yellow")
        if row.get("superseded"):
            text.append(" · superseded by a later run", style="bold yellow")
        if pd.notna(row.get("carried_from")):
            text.append(f" · decision carried over from flag #{int(row['carried_from'])}", style="dim")
        if row["note"]:
            text.append("\nnote: ", style="bold")
            text.append(str(row["note"]))
        text.append("\n")
        text.append_text(self.render_flag(row))
        past = self.history.get(fid, [])
        if past:
            text.append("\nHistory\n", style="bold underline")
            for h in past:
                undo = " (undo)" if h["action"] == "flag:undo" else ""
                text.append(f"{h['state']}{undo} {by_at(h['actor'], h['at'])}", style="dim")
                if h["note"]:
                    text.append(" · note: ", style="dim")
                    text.append(one_line(h["note"]))  # a note never starts a history line of its own
                text.append("\n")
        detail.update(text)
        self.query_one("#queue-scroll", VerticalScroll).scroll_home(animate=False)

    def empty_text(self, total: int) -> Text:
        if total and self.state_filter in WHO_FILTERS:
            who = "you" if self.state_filter == "mine" else "other curators"
            return Text(f"no {self.PLURAL} decided by {who}; f changes the filter", style="dim")
        if total:
            return Text(f"no {self.PLURAL} in state {self.state_filter!r}; f changes the filter", style="dim")
        return Text(f"no {self.PLURAL} for this benchmark yet: start the analysis that finds them in "
                    "4: Runs", style="dim")

    def render_flag(self, row: pd.Series) -> Text:
        return Text(str(self.payload(row)))

    # ------------------------------------------------------------------ actions
    def action_step(self, step: int) -> None:
        if self.view_len:
            self._move_to(max(0, min(self.pos + step, self.view_len - 1)))
            self.render_current()

    def _move_to(self, pos: int) -> None:
        """Put the cursor on view position *pos*; past the loaded window, the next (previous) page is read from
        the rows after the window's last (before its first) flag, so that decisions made meanwhile move nothing."""
        if self._loaded(pos) or not len(self.flags):
            self.pos = pos
            return
        edge = self._at(self.start + len(self.flags) - 1) if pos > self.pos else self._at(self.start)
        key = (_sort_key(edge["score"]), int(edge["id"]))
        self._relocate(after=key) if pos > self.pos else self._relocate(before=key)

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
        if not self.app.can_write():
            return
        if self.marked:
            ids = sorted(self.marked)
            self.marked = set()
            self._decide_many(ids, state, count(len(ids), "marked " + self.NOUN.lower(), "marked " + self.PLURAL))
            return
        fid = self.current_id()
        if fid is None:
            return
        self._decide_many([fid], state, f"#{fid}")
        if self.pos < self.view_len - 1 and state != "open":
            self._move_to(self.pos + 1)
        self.render_current()

    def _row(self, fid: int) -> int | None:
        hit = np.flatnonzero(self.flags["id"].to_numpy() == fid) if len(self.flags) else []
        return int(hit[0]) if len(hit) else None

    def _show_change(self, fid: int, state: str, note: str, carried: object = None, *, was: str = "") -> None:
        """What flag *fid* shows until its write lands (and after a reload meanwhile: the overlay); *was* the
        state it showed (the triaged count follows)."""
        i = self._row(fid)
        if i is not None:
            was = str(self.flags["state"].iloc[i])
            self.flags.loc[i, ["state", "note"]] = [state, note]
            if "carried_from" in self.flags:
                self.flags.loc[i, "carried_from"] = carried if carried is not None else pd.NA
            if "stored_state" in self.flags:
                self.flags.loc[i, "stored_state"] = "open" if carried is not None else state
        was = was or self._shown.get(fid, state)
        self.triaged += (state != "open") - (was != "open")
        self._shown[fid] = state
        self._overlay[fid] = (state, note)
        self.changed_meanwhile.pop(fid, None)  # decided here now, on what the card shows

    def _decide_many(self, ids: list[int], state: str, what: str, *, note: str | None = None,
                     label: str | None = None, seen: dict[int, int | None] | None = None) -> None:
        """Show *state* (and *note*) on every flag of *ids* at once, put one entry on the undo stack, and write
        them in one transaction on the versions shown (refused when another writer changed one since)."""
        before = self._befores(ids)
        if not before:
            return
        for fid, (_state, old_note, _carried) in before.items():
            self._show_change(fid, state, note if note is not None else old_note, was=_state)
        decision = Decision(list(before), before, what, note=note or "",
                            kind="note" if label and label.endswith("note saved") else "decision")
        self.ledger.stack.append(decision)
        self._write(decision, [(fid, state, note) for fid in before], seen)
        self.last_decision = label or f"{what} {state}"
        self.render_current()

    def _befores(self, ids: list[int]) -> dict[int, tuple[str, str, object]]:
        """(state, note, carried_from) each flag of *ids* shows now, in the order of *ids*: from the window, or
        read for the flags outside it (a batch of marked flags or of one model); flags gone from the queue are
        left out."""
        rows = {fid: self.flags.iloc[i] for fid in ids if (i := self._row(fid)) is not None}
        missing = [fid for fid in ids if fid not in rows]
        if missing:
            overlay = dict(self._overlay)
            got = self._read(lambda conn, q: q.by_id(conn, missing, overlay=overlay))
            if got is not None:
                rows |= {int(r["id"]): r for _, r in got.iterrows()}
        from benchloupe.store.curation import Cell

        out = {}
        for fid in ids:
            if fid in rows:
                row = rows[fid]
                self.cells[fid] = Cell.of(row)  # the write names it: refused if the id now names another cell
                carried = row.get("carried_from")
                out[fid] = (str(row["state"]), str(row["note"]),
                            int(carried) if carried is not None and pd.notna(carried) else None)
        return out

    def _write(self, decision: Decision, changes: list[tuple[int, str, str | None]],
               seen: dict[int, int | None] | None = None) -> None:
        """Queue the write of *decision* (tui/writes.py); it expects the versions this screen saw now, or
        *seen*: those it showed when the curator began it (a note typed while someone else decided the flag)."""
        from benchloupe.store import curation

        ids = decision.ids
        expect = self.ledger.expect(ids)
        cells = {fid: self.cells[fid] for fid in ids if fid in self.cells}
        for fid, v in (seen or {}).items():
            if v is not None and expect.get(fid) is not CHAIN:
                expect[fid] = v

        def write(conn: sqlite3.Connection) -> None:
            try:
                versions = self.ledger.resolve(expect)
                saved = curation.set_flag_states(conn, changes, expect=versions, cells=cells)
            except Exception as exc:
                decision.state = "refused"
                self.ledger.finished(ids, None)
                self.app.call_from_thread(self._refused, decision, exc)
                if not isinstance(exc, curation.StoreError | ChainBroken):
                    raise
                return
            decision.versions, decision.audit_ids = saved.versions, list(saved.audit_ids.values())
            decision.state = "saved"
            self.ledger.finished(ids, saved.versions)
            self.app.call_from_thread(self._saved, ids)

        store_write(self, write, reload=False)

    def _saved(self, ids: list[int]) -> None:
        """UI thread: a write on *ids* landed; what they show is the store's now (unless more are queued)."""
        for fid in ids:
            if not self.ledger.pending.get(fid):
                self._overlay.pop(fid, None)
        self.render_current()

    def _refused(self, decision: Decision, exc: BaseException) -> None:
        """UI thread: the write of *decision* was refused (another writer changed a flag since the curator saw
        it, or the store failed): it leaves the undo stack, the message says why, the card shows the store."""
        from benchloupe.store.curation import Conflict

        if decision in self.ledger.stack:
            self.ledger.stack.remove(decision)
        for fid in decision.ids:
            if not self.ledger.pending.get(fid):
                self._overlay.pop(fid, None)
                i = self._row(fid)
                if fid in decision.before:  # what it showed before the refused change
                    state, note, carried = decision.before[fid]
                    was = self._shown.pop(fid, state)
                    self.triaged += (state != "open") - (was != "open")
                    if i is not None:
                        self.flags.loc[i, ["state", "note"]] = [state, note]
        if isinstance(exc, Conflict):
            for c in exc.changes:  # what the store holds now, at once (the reload below confirms it)
                self.changed_meanwhile[int(c["id"])] = _who_line(c)
                i = self._row(int(c["id"]))
                if i is not None and not self.ledger.pending.get(int(c["id"])):
                    self.flags.loc[i, ["state", "note", "updated_by", "updated_at"]] = [
                        c["state"], c.get("note") or "", c.get("by") or "", c.get("at")]
        self.last_decision = ""
        message = str(exc)
        if decision.kind == "note":
            message = message.replace("your decision was not saved", "your note was not saved")
        if isinstance(exc, Conflict | ChainBroken):
            kept = f" (it was: {decision.note})" if decision.note else ""
            self.notify(message + kept, title="Refused", severity="error", timeout=10)
        else:
            self.app.report_error(exc, self.MODE)
        self.render_current()
        self.reload()

    def action_undo(self) -> None:
        """z: undo this curator's latest decision, note or batch on this screen (even one still being saved:
        the undo is written after it): each flag gets back its state and note (one transaction, ``flag:undo``
        audit rows). Refused, changing nothing, when another writer changed one of the flags since."""
        if not self.app.can_write():
            return
        if not self.ledger.stack:
            self.notify("nothing to undo", severity="warning")
            return
        from benchloupe.store import curation

        decision = self.ledger.stack.pop()
        changes = []
        for fid in decision.ids:
            state, note, carried = decision.before[fid]
            self._show_change(fid, state, note, carried)
            # a carried-over decision lives on the earlier flag: this one goes back to open with no note
            changes.append((fid, "open" if carried is not None else state, "" if carried is not None else note))
        self._cursor_to_last(decision.ids)
        ids = decision.ids
        self.ledger.expect(ids)
        own = self.ledger.own
        cells = {fid: self.cells[fid] for fid in ids if fid in self.cells}

        def write(conn: sqlite3.Connection) -> None:
            if decision.state != "saved":  # it was refused: there is nothing of it to take back
                self.ledger.finished(ids, None, keep=True)
                self.app.call_from_thread(self._undo_skipped, decision)
                return
            expect = {fid: own.get(fid) if own.get(fid) is not None else decision.versions[fid] for fid in ids}
            try:
                saved = curation.set_flag_states(conn, changes, undo=True, expect=expect, undoes=decision.audit_ids,
                                                 cells=cells)
            except Exception as exc:
                self.ledger.finished(ids, None)
                undo = Decision(ids, {}, f"undo of {decision.label}", state="refused", kind="undo")
                self.app.call_from_thread(self._refused, undo, exc)
                if not isinstance(exc, curation.StoreError):
                    raise
                return
            self.ledger.finished(ids, saved.versions)
            self.app.call_from_thread(self._saved, ids)

        store_write(self, write, reload=False)
        first, state = decision.ids[0], decision.before[decision.ids[0]][0]
        if decision.kind == "note":  # the state never changed: the note is what came back
            note = decision.before[first][1]
            self.last_decision = f"#{first} note undone" + (f" (note: {note[:40]})" if note else " (no note)")
        else:
            self.last_decision = (f"#{first} back to {state}" if len(decision.ids) == 1
                                  else f"{len(decision.ids)} {self.PLURAL} back")
        self.render_current()

    def _cursor_to_last(self, ids: list[int]) -> None:
        """The cursor on the last flag of *ids* that the view takes (an undo shows what it took back), read
        around it when it is outside the window (the curator stepped on past a page since)."""
        for fid in reversed(ids):
            i = self._row(fid)
            if i is not None:
                self.pos = self.start + i
                return
        filt, overlay = self.current_filter(), dict(self._overlay)
        there = self._read(lambda conn, q: q.in_view(conn, filt, ids, overlay=overlay))
        target = next((fid for fid in reversed(ids) if fid in (there or ())), None)
        if target is not None:
            self._relocate(anchor_id=target, at=self.pos)

    def _undo_skipped(self, decision: Decision) -> None:
        self.notify(f"{decision.label}: that decision was not saved, so there was nothing to undo",
                    severity="warning")
        self.reload()

    def action_mark(self) -> None:
        """space: mark the current flag for a batch decision (again: unmark) and move on."""
        fid = self.current_id()
        if fid is None:
            return
        self.marked ^= {fid}
        if fid in self.marked and self.pos < self.view_len - 1:
            self._move_to(self.pos + 1)
        self.render_current()

    def decide_all_of(self, column: str, label: str) -> None:
        """Decide every open flag whose *column* (model_id, item_id) is the current flag's, after a
        confirmation that names the count (one transaction, one undo)."""
        row = self._current_row()
        if row is None:
            return
        value = row[column]
        if pd.isna(value):
            self.notify(f"this {self.NOUN.lower()} has no {label}", severity="warning")
            return
        if column not in ("model_id", "item_id"):
            raise ValueError(f"not a flag column: {column!r}")
        overlay = dict(self._overlay)
        ids = self._read(lambda conn, q: q.ids(conn, f"q.{column} = :v AND q.state = 'open'", {"v": int(value)},
                                               overlay=overlay))
        if ids is None:
            return
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
        if self._current_row() is None:
            return
        states = self.flags["state"].to_numpy()
        here, end = self.pos - self.start, len(self.flags)
        ahead = [i for i in range(here + 1, end) if states[i] == "open"]
        if ahead:
            self.pos = self.start + ahead[0]
            self.render_current()
            return
        first, last = self._at(self.start), self._at(self.start + end - 1)
        filt, overlay = self.current_filter(), dict(self._overlay)
        found = self._read(lambda conn, q: (
            (self.start + end < self.view_len and q.find(conn, filt, overlay=overlay, where="q.state = 'open'",
                                                         after=(_sort_key(last["score"]), int(last["id"]))))
            or (self.start > 0 and q.find(conn, filt, overlay=overlay, where="q.state = 'open'",
                                          before=(_sort_key(first["score"]), int(first["id"]))))
            or None))
        if found:
            self._relocate(anchor_id=int(found), at=self.pos)
            self.render_current()
            return
        behind = [i for i in range(0, here + 1) if states[i] == "open"]
        if not behind:
            self.notify(f"every {self.NOUN.lower()} here is triaged")
            return
        self.pos = self.start + behind[0]
        self.render_current()

    def action_note(self) -> None:
        """e: a note on the current flag (its state stays), saved when enter is pressed, before any key typed
        after it (tui/widgets/dialogs.py: PromptDialog's ``on_submit``); z takes it back like a decision."""
        if not self.app.can_write():
            return
        fid = self.current_id()
        if fid is None:
            return
        current = self._current_row()
        seen = {fid: None if self.ledger.pending.get(fid) else self.ledger.known.get(fid)}  # the card as it is now

        def submitted(note: str) -> None:
            before = self._befores([fid])
            if fid not in before:
                return
            self._decide_many([fid], before[fid][0], f"#{fid}", note=note, label=f"#{fid} note saved", seen=seen)

        self.app.push_screen(PromptDialog(f"Note on {self.NOUN.lower()} #{fid}", value=str(current["note"]),
                                          help="Saved with the flag and in the audit log.", on_submit=submitted))

    @property
    def saving(self) -> bool:
        """True while a decision of this screen is waiting to be written."""
        return self.ledger.saving()

    def action_open_item(self) -> None:
        """Enter: the flag's item panel, its curve marking the flag's model."""
        row = self._current_row()
        if row is None:
            return
        if pd.notna(row["item_id"]):
            open_item_panel(self.app, int(row["item_id"]), row["model_id"])
        else:
            self.notify(f"this {self.NOUN.lower()} is about no single item", severity="warning")

    def action_select_item(self) -> None:
        """i: the flag's item selected on 2 Items."""
        if self._current_row() is not None:
            item_id = self._current_row()["item_id"]
            if pd.isna(item_id):
                self.notify(f"this {self.NOUN.lower()} is about no single item", severity="warning")
                return
            select_on_screen(self.app, "items", int(item_id))

    def action_select_model(self) -> None:
        """m: the flag's model (model A of a pair) selected on 3 Models."""
        if self._current_row() is not None:
            model_id = self._current_row()["model_id"]
            if pd.isna(model_id):
                self.notify(f"this {self.NOUN.lower()} has no model", severity="warning")
                return
            select_on_screen(self.app, "models", int(model_id))

    def action_scroll_detail(self, direction: int) -> None:
        scroll = self.query_one("#queue-scroll", VerticalScroll)
        scroll.scroll_to(y=scroll.scroll_y + direction * max(scroll.size.height - 2, 1), animate=False)


def _sort_key(score) -> float:
    """A flag's place in the queue's order from its score, as the store sorts (store/queue.py: |score|, 0 for
    none)."""
    return 0.0 if score is None or pd.isna(score) else abs(float(score))


DECISIONS = (("c", "confirmed", "confirm"), ("d", "dismissed", "dismiss"), ("u", "unsure", "unsure"))


def open_item_panel(app, item_id: int, model_id=None) -> None:
    """Push the item panel of *item_id*; its curve marks *model_id* (the flagged model) when given."""
    from benchloupe.tui.screens.items import show_item

    show_item(app, item_id, mark_model=None if model_id is None or pd.isna(model_id) else int(model_id))


SELECT_TIMEOUT = 30.0


def select_on_screen(app, mode: str, row_id: int) -> None:
    """Switch to the *mode* screen (items, models) and select the row whose ``id`` is *row_id*, scrolled into
    view, once the screen has shown its data (``BenchScreen.reveal``: a search or filter there that hides the row
    is dropped); says so when the screen does not hold the row."""
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
        if not screen.reveal(row_id):
            app.notify(f"that {'item' if mode == 'items' else 'model'} is not on this screen (not in the run it"
                       " shows)", severity="warning")

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
    """``1 flag``, ``3 flags``, ``1,204 flags`` (:func:`benchloupe.words.count` with thousands separators, as
    the queue's status line counts)."""
    from benchloupe.words import count as words_count

    return f"{int(n):,}" + words_count(n, noun, plural)[len(str(n)):]


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
