"""BenchFill: a session's live progress (round, children, valid, annotated, best distance to the target) and
its review queue: each proposal against its parent as a word diff, the judge's verdict, the estimated
difficulty against the target; accept, reject, or edit the text and the reference answer then accept, each with
a note; skip (it stays to review), "reject the rest of this session" after a confirmation, space to mark
proposals that a/r then decide together (one transaction), and z to undo the latest decision or batch (an
accepted item is removed again, or the undo refused when later work uses it: store/fill.py). Sessions are resumed
from their journal (engine/jobs/fill.py), so closing the app loses nothing. Endpoint settings (base URL,
model names; the key is read from the environment variable named there) are edited here too.

Several curators on one session (issue 25): the proposal on the card is held by a short review lease
(store/fill.py: claimed when it is shown, renewed every few seconds, released when the curator moves on; it
expires when its reviewer's process is gone or stops renewing it), and another curator's card says "bea is
reviewing" and refuses a decision on it. A decision names the version it was made on (refused, naming who and
when, when it changed since); decisions are written in the order of the keys and ``z`` takes back the latest even
while it is still being saved (tui/writes.py). A session that needs N approvals shows them ("1 of 2: ann")."""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import sqlite3

import pandas as pd
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, TextArea

from benchloupe import ranges
from benchloupe.jobs import simulated
from benchloupe.jobs.fill_dupes import words as dup_words
from benchloupe.store import runners
from benchloupe.store.actor import by_at, short_time
from benchloupe.store.db import StoreError
from benchloupe.store.fill import approver_list
from benchloupe.textsafe import visible
from benchloupe.tui.jobs_ui import state_word  # the job's process decides a session's outcome in these words
from benchloupe.tui.screens.base import BenchScreen, store_write
from benchloupe.tui.screens.queue import fmt_value
from benchloupe.tui.widgets.dialogs import ConfirmDialog, Field, FormDialog, PromptDialog
from benchloupe.tui.widgets.safe import SafeStatic, Text
from benchloupe.tui.widgets.table import Column, FrameTable, fmt_int, fmt_num, format_lines
from benchloupe.tui.writes import CHAIN, ChainBroken, Decision, Ledger
from benchloupe.words import count

SESSION_COLUMNS = [Column("id", "id", 4, fmt_int, right=True), Column("state", "state", 15, state_word),
                   Column("gap", "gap", 13, export=("gap_lo", "gap_hi")),
                   Column("target", "target", 6, fmt_num(3), right=True),
                   Column("candidates", "cands", 5, fmt_int, right=True),
                   Column("pending", "todo", 4, fmt_int, right=True),
                   Column("message_shown", "message", 40, export=("message", "rewriter_url"))]
REVIEW_FILTERS = ("pending", "all", "accepted", "rejected", "mine", "others'")


def _words(text: str) -> list[str]:
    """Words split at spaces, tabs and newlines only (CR, VT and FF stay in their word, shown escaped)."""
    return [w for w in re.split(r"[ \t\n]+", text) if w]


def word_diff(parent: str, child: str) -> Text:
    """The proposal against its parent, word by word: removed words red and struck, added words green."""
    a, b = _words(parent), _words(child)
    text = Text()
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            text.append(" ".join(a[i1:i2]) + " ")
            continue
        if op in ("replace", "delete"):
            text.append(" ".join(a[i1:i2]), style="red strike")
            text.append(" ")
        if op in ("replace", "insert"):
            text.append(" ".join(b[j1:j2]), style="bold green")
            text.append(" ")
    return text


class BenchFillScreen(BenchScreen):
    MODE = "benchfill"
    TOPICS = ("fill", "items", "runs")
    LIVE_MIN_S = 0.5  # a running session writes its journal many times a second
    BINDINGS = [
        Binding("right_square_bracket", "step(1)", "Next", key_display="]", id="fill.next"),
        Binding("left_square_bracket", "step(-1)", "Prev", key_display="[", id="fill.prev"),
        Binding("a", "decide('accept')", "Accept", id="fill.accept"),
        Binding("r", "decide('reject')", "Reject", id="fill.reject"),
        Binding("e", "edit", "Edit+accept", id="fill.edit"),
        Binding("z", "undo", "Undo", id="fill.undo"),
        Binding("l", "skip", "Skip", show=False, id="fill.skip"),
        Binding("space", "mark", "Mark for batch (a r decide all marked)", show=False, id="fill.mark",
                priority=True),  # over the table's page
        Binding("X", "reject_rest", "Reject the rest", show=False, id="fill.reject_rest"),
        Binding("f", "filter", "Filter", show=False, id="fill.filter"),
        Binding("n", "new_session", "New session", show=False, id="fill.start"),
        Binding("R", "resume", "Resume", show=False, id="fill.resume"),
        Binding("E", "endpoints", "Endpoints", show=False, id="fill.endpoints"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.session_id: int | None = None
        self.cands = pd.DataFrame()
        self.view: list[int] = []
        self.pos = 0
        self.review_filter = "pending"
        self.endpoints: dict = {}
        self.summary: dict | None = None
        # versions seen, own queued writes and the undo stack (tui/writes.py: a Decision per key, a batch is one)
        self.ledger = Ledger()
        self.marked: set[int] = set()  # proposal ids marked with space for a batch decision
        self.focus_after: int | None = None  # the proposal to show after the next reload (an undone one)
        self.reviewer = runners.this_runner()  # this screen's review leases (store/fill.py)
        self.held: int | None = None  # the proposal whose lease this screen holds (or asked for)

    def compose_body(self) -> ComposeResult:
        yield FrameTable(id="sessions")
        yield SafeStatic("", id="fill-summary", classes="status-line", markup=False)
        with VerticalScroll(id="fill-scroll"):
            yield SafeStatic("", id="fill-review", markup=False)

    @property
    def undo_stack(self) -> list[Decision]:
        return self.ledger.stack

    @property
    def writing(self) -> int:
        return int(self.ledger.saving())

    def on_mount(self) -> None:
        from benchloupe.store.fill import REVIEW_BEAT_S

        self.set_interval(REVIEW_BEAT_S, self._beat)

    # ------------------------------------------------------------------ review leases
    def _hold(self, cid: int | None) -> None:
        """Hold the review lease of *cid* (None: release this screen's leases), in a worker."""
        if cid == self.held or self.app.read_only:
            return
        self.held = cid
        db, reviewer = self.app.db_path, self.reviewer

        def work() -> None:
            from benchloupe.store import fill
            from benchloupe.store.db import connect

            conn = connect(db)
            try:
                if cid is None:
                    fill.release_reviews(conn, reviewer["token"])
                else:
                    fill.claim_review(conn, cid, reviewer)
            finally:
                conn.close()

        self.run_worker(work, thread=True, group="lease", exit_on_error=False)

    def _beat(self) -> None:
        """Timer: renew the lease of the proposal on the card (another curator sees "… is reviewing")."""
        if self.held is None or self.app.read_only:
            return
        if not self._on_view():  # the curator went to another screen (a dialog over this one keeps the lease)
            self._hold(None)
            return
        db, token = self.app.db_path, self.reviewer["token"]

        def work() -> None:
            from benchloupe.store import fill
            from benchloupe.store.db import connect

            conn = connect(db)
            try:
                fill.renew_reviews(conn, token)
            finally:
                conn.close()

        self.run_worker(work, thread=True, group="lease-beat", exclusive=True, exit_on_error=False)
        self.render_current()  # a lease of another curator that stopped beating shows as gone

    def on_screen_suspend(self) -> None:
        """Another screen came up: a dialog (a note for the decision) keeps the lease, leaving the screen ends it."""
        self.set_timer(0.2, lambda: None if self._on_view() else self._hold(None))

    def on_unmount(self) -> None:
        if self.held is not None and not self.app.read_only:
            from benchloupe.store import fill
            from benchloupe.store.db import connect

            try:  # the app is closing: release at once, on this thread (a short write)
                conn = connect(self.app.db_path)
                try:
                    fill.release_reviews(conn, self.reviewer["token"])
                finally:
                    conn.close()
            except Exception:  # noqa: BLE001 - the lease expires on its own
                pass

    def other_reviewer(self, c) -> str | None:
        """``bea (since 14:02)`` when another curator's live lease holds proposal row *c*."""
        from benchloupe.store import fill

        holder = c.get("review_holder")
        if not isinstance(holder, str) or not holder:
            return None
        if runners.parse(c.get("review_runner")).get("token") == self.reviewer["token"]:
            return None
        if not fill.review_alive(c.get("review_runner"), c.get("review_heartbeat")):
            return None
        import datetime as dt

        since = dt.datetime.fromtimestamp(float(c["review_since"]), dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return f"{holder} (since {short_time(since)})"

    # ------------------------------------------------------------------ data
    def fetch(self, conn: sqlite3.Connection, benchmark: str) -> dict:
        from benchloupe.jobs import fill as jobs_fill
        from benchloupe.store import fill

        sessions = fill.sessions(conn, benchmark)
        sessions["gap"] = [f"[{lo:.3f},{hi:.3f}]" for lo, hi in zip(sessions["gap_lo"], sessions["gap_hi"])]
        sessions["message_shown"] = [("simulated · " if simulated.is_simulated(u) else "") + str(m or "")
                                     for u, m in zip(sessions["rewriter_url"], sessions["message"])]
        sid = self.session_id if self.session_id in set(sessions["id"]) else (
            int(sessions["id"].iloc[0]) if len(sessions) else None)
        summary = jobs_fill.session_summary(self.app.db_path, sid) if sid is not None else None
        cands = fill.candidates(conn, sid) if sid is not None else pd.DataFrame()
        return {"sessions": sessions, "lines": format_lines(sessions, SESSION_COLUMNS), "sid": sid,
                "summary": summary, "cands": cands, "endpoints": jobs_fill.get_endpoints(conn)}

    def show(self, data: dict) -> None:
        table = self.query_one("#sessions", FrameTable)
        table.set_data(data["sessions"], SESSION_COLUMNS, data["lines"])
        self.session_id = data["sid"]
        if self.session_id is not None:
            table.move_to_value("id", self.session_id)
        self.endpoints = data["endpoints"]
        current = self.focus_after if self.focus_after is not None else self.current_candidate()
        self.focus_after = None
        cands = data["cands"]
        if len(cands):
            versions = dict(zip((int(i) for i in cands["id"]), (int(v) for v in cands["version"])))
            if len(self.cands) and "version" in self.cands:  # older than this screen's own latest write: keep
                old = self.cands.set_index("id")
                cols = ["review_state", "note", "version", "decided_by", "decided_at"]
                for cid, v in versions.items():
                    known = self.ledger.known.get(cid)
                    if known is not None and v < known and cid in old.index:
                        cands.loc[cands["id"] == cid, cols] = old.loc[cid, cols].to_numpy()
            self.ledger.loaded(versions)
            for cid, (state, note) in self._overlay().items():  # own decisions still being written
                hit = cands.index[cands["id"] == cid]
                if len(hit):
                    cands.loc[hit, ["review_state", "note"]] = [state, note]
        self.cands = cands
        self.marked &= set(int(i) for i in self.cands["id"]) if len(self.cands) else set()
        self._refilter(keep=current)
        self.summary = data["summary"]
        self._summary(self.summary)

    def forget(self) -> None:
        self.cands, self.view, self.pos, self.marked, self.summary = pd.DataFrame(), [], 0, set(), None

    def on_frame_table_highlighted(self, event: FrameTable.Highlighted) -> None:
        sid = event.table.current_value("id")
        if sid is not None and int(sid) != self.session_id:
            self.session_id = int(sid)
            self.reload()

    def _summary(self, s: dict | None) -> None:
        box = self.query_one("#fill-summary", SafeStatic)
        if s is None:
            text = Text("no BenchFill sessions for this benchmark: on 7 Coverage pick a gap and press b, "
                        "or press n here", style="dim")
            eps = self.endpoints
            if not (eps.get("rewriter") and eps.get("judge") and eps.get("annotators")):
                text.append("\nendpoints are not configured yet: E sets the rewriter, judge and annotators",
                            style="yellow")
            self._simulated_line(text)
            box.update(text)
            return
        # Four lines of at most 78 cells, each cut with an ellipsis rather than wrapped into the next (at 80x24
        # the box holds four; the session's message and the review counts were cut off: issue 21 item 11).
        head = Text(f"session #{s['session']} ", style="bold")
        if simulated.uses_simulated(self.endpoints or {}):  # first, so that it shows at 80x24 too
            head.append("(simulated endpoints) ", style="magenta")
        head.append(state_word(s["state"]), style="bold green" if s["state"] == "proposed" else "bold")
        head.append(f" · round {s['round']}")
        job = self.app.job
        if s["state"] == "running" and job.running and job.title.startswith("BenchFill") and job.total:
            # this app runs the session: its calls of the whole session's plan (engine.benchfill._Calls)
            head.append(f" · {int(job.done):,} of {int(job.total):,} LLM calls", style="bold")
        else:
            head.append(f" · {s['llm_calls']:,} LLM calls")
        # answers count live (one journal row each); "estimated" only at the end of a round (issue 21 item 8)
        work = Text(f"children {s['children']} · valid {s['valid']} · answers {s['annotations']:,} · estimated "
                    f"{s['annotated']} · best distance {fmt_value(s['best_distance'], 3)}")
        review = Text(f"{len(self.marked)} marked: a r decide them · " if self.marked else "", style="bold magenta")
        review.append(f"target {s['target']:.3f} · {s['pending']} to review · {s['accepted']} accepted · "
                      f"{s['rejected']} rejected · showing {self.review_filter}", style="dim")
        if self.size.width >= 140:
            review.append("   ] [ step · l skip · a r e decide · z undo · space mark · X reject the rest · f filter",
                          style="dim")
        lines = [head, work, review]
        if s.get("message"):
            lines.append(Text(str(s["message"]), style="dim"))
        room = max(self.size.width - 2, 40)
        for line in lines:
            line.truncate(room, overflow="ellipsis")
        box.update(Text("\n").join(lines))

    def _simulated_line(self, text: Text) -> None:
        """Say so when the endpoints are the built-in simulated ones (prompts/simulated.py): no real model."""
        if simulated.uses_simulated(self.endpoints or {}):
            text.append("\nendpoints: simulated (built-in server on 127.0.0.1, no network, no key) · E points "
                        "them at a real one", style="magenta")

    def export_table(self) -> tuple[pd.DataFrame, str]:
        """w: the selected session's proposals as the review filter shows them, in its order."""
        from benchloupe.tui.export import proposals

        return proposals(self.cands, self.view), "proposals"

    def current_candidate(self) -> int | None:
        if not self.view:
            return None
        return int(self.cands["id"].iloc[self.view[self.pos]])

    def _overlay(self) -> dict[int, tuple[str, str]]:
        """What this screen's decisions still being written show (proposal id -> state, note)."""
        return {cid: v for cid, v in getattr(self, "_shown", {}).items() if self.ledger.pending.get(cid)}

    def _refilter(self, keep: int | None = None) -> None:
        if len(self.cands):
            states = self.cands["review_state"]
            if self.review_filter in ("mine", "others'"):
                by = self.cands["decided_by"].fillna("")
                decided = self.cands["version"] > 0
                mask = decided & ((by == self.app.actor) if self.review_filter == "mine" else (by != self.app.actor))
            else:
                mask = states.isin(("pending", "waiting")) if self.review_filter == "pending" else (
                    states == self.review_filter if self.review_filter != "all" else states.notna())
            self.view = [int(i) for i in mask.to_numpy().nonzero()[0]]
        else:
            self.view = []
        self.pos = 0
        if keep is not None:
            ids = [int(self.cands["id"].iloc[i]) for i in self.view]
            if keep in ids:
                self.pos = ids.index(keep)
        self.render_current()

    def render_current(self) -> None:
        box = self.query_one("#fill-review", SafeStatic)
        if not self.view:
            box.update(Text(f"no {self.review_filter} proposals in this session" if self.session_id else "",
                            style="dim"))
            self._hold(None)
            return
        c = self.cands.iloc[self.view[self.pos]]
        cid = int(c["id"])
        self._hold(cid if c["review_state"] in ("pending", "waiting") else None)
        text = Text("● marked " if cid in self.marked else "", style="bold magenta")
        text.append(f"Proposal {self.pos + 1} of {len(self.view)} ", style="bold")
        text.append(f"#{c['id']} ({c['child_key']}) · round {c['round']} · ", style="dim")
        text.append(str(c["review_state"]), style="bold")
        if self.ledger.pending.get(cid):
            text.append(" (saving…)", style="dim")
        elif c.get("decided_by") and c["review_state"] != "pending":
            text.append(" " + by_at(c.get("decided_by"), c.get("decided_at")), style="dim")
        if isinstance(c.get("item_key"), str) and c["item_key"]:
            text.append(f" · item {c['item_key']}", style="dim")
        needed = int(c["approvals"]) if pd.notna(c.get("approvals")) else 1
        if needed > 1:
            got = approver_list(c.get("approvers"))
            text.append(f"\napprovals {len(got)} of {needed}" + (f": {', '.join(got)}" if got else ""),
                        style="bold cyan")
        busy = self.other_reviewer(c)
        if busy:
            text.append(f"\n⚠ {busy} is reviewing this proposal: a r e wait until they move on (l skips)",
                        style="bold yellow")
        text.append("\nestimated difficulty ")
        text.append(fmt_value(c["difficulty_norm"], 3), style="bold")
        text.append(f" vs target {fmt_value(c['target'], 3)} · distance {fmt_value(c['distance'], 3)}")
        se = c["payload"].get("se") if isinstance(c["payload"], dict) else None
        if se is not None:
            text.append(" · " + se_words(se, c.get("b_min"), c.get("b_max")))
        text.append("\njudge: ", style="bold")
        text.append(str(c["verdict"] or "valid"))
        dup = dup_words(c["payload"].get("duplicate_of")) if isinstance(c["payload"], dict) else ""
        if dup:
            text.append(f"\n⚠ {dup}", style="bold yellow")
        if c["note"]:
            text.append("\nnote: ", style="bold")
            text.append(str(c["note"]))
        text.append(f"\n\nChange from the parent {c['parent_key'] or ''} ", style="bold underline")
        text.append("(red: removed, green: added)\n", style="dim")
        text.append_text(word_diff(str(c["parent_text"] or ""), str(c["text"])))
        text.append("\nanswer: ", style="bold")
        text.append(str(c["answer"]))
        if c["parent_answer"] is not None and str(c["parent_answer"]) != str(c["answer"]):
            text.append(f"  (parent: {c['parent_answer']})", style="dim")
        text.append("\n\nProposal\n", style="bold underline")
        text.append(str(c["text"]))
        box.update(text)
        self.query_one("#fill-scroll", VerticalScroll).scroll_home(animate=False)

    # ------------------------------------------------------------------ review
    def action_step(self, step: int) -> None:
        if self.view:
            self.pos = max(0, min(self.pos + step, len(self.view) - 1))
            self.render_current()

    def action_filter(self) -> None:
        i = REVIEW_FILTERS.index(self.review_filter)
        self.review_filter = REVIEW_FILTERS[(i + 1) % len(REVIEW_FILTERS)]
        self._refilter(keep=self.current_candidate())
        self._summary(self.summary)

    def _busy(self, cids: list[int]) -> bool:
        """Refuse (with the reason) a decision on a proposal another curator is reviewing."""
        rows = self.cands.set_index("id")
        for cid in cids:
            if cid in rows.index:
                busy = self.other_reviewer(rows.loc[cid])
                if busy:
                    self.notify(f"proposal #{cid}: {busy} is reviewing it; pick another (l skips) or wait",
                                title="Refused", severity="warning")
                    return True
        return False

    def action_decide(self, decision: str, edited: tuple[str, str] | None = None) -> None:
        """a / r: accept or reject this proposal with a note; with proposals marked (space), all the marked
        ones (one transaction, one undo). *edited*: the curator's (text, answer) to accept instead."""
        if not self.app.can_write():
            return
        if self.marked and edited is None:
            self._decide_marked(decision)
            return
        cid = self.current_candidate()
        if cid is None:
            return
        if self.cands["review_state"].iloc[self.view[self.pos]] in ("accepted", "rejected"):
            self.notify("this proposal is already decided; z undoes the latest decision", severity="warning")
            return
        if self._busy([cid]):
            return
        verb = {"accept": "Accept", "reject": "Reject"}[decision]
        seen = self._seen([cid])  # the proposal as the curator saw it when they began the decision

        def submitted(note: str) -> None:
            from benchloupe.jobs import fill as jobs_fill

            db, token = self.app.db_path, self.reviewer["token"]
            text, answer = edited if edited is not None else (None, None)
            self._decide([cid], decision, note, lambda conn, expect: jobs_fill.decide_candidate(
                db, cid, decision, note, edited_text=text, edited_answer=answer, expect_version=expect.get(cid),
                lease_token=token),
                f"proposal #{cid}: {decision}ed" + (" (edited)" if edited is not None else "") + " (z undo)", seen)

        self.app.push_screen(PromptDialog(f"{verb} proposal #{cid}" + (" as edited" if edited else ""),
                                          placeholder="a note for the audit log",
                                          help="An accepted proposal becomes an item (origin benchfill); "
                                               "coverage is recomputed.", on_submit=submitted))

    def _decide_marked(self, decision: str) -> None:
        ids = [i for i in self.cands["id"].astype(int) if i in self.marked]
        undecided = set(int(self.cands["id"].iloc[i]) for i in self._undecided())
        ids = [i for i in ids if i in undecided]
        self.marked = set()
        if not ids:
            self.notify("none of the marked proposals is still to review", markup=False)
            self.render_current()
            return
        if self._busy(ids):
            self.render_current()
            return
        verb = {"accept": "Accept", "reject": "Reject"}[decision]
        seen = self._seen(ids)

        def submitted(note: str) -> None:
            from benchloupe.jobs import fill as jobs_fill

            db, token = self.app.db_path, self.reviewer["token"]
            self._decide(ids, decision, note, lambda conn, expect: jobs_fill.decide_candidates(
                db, ids, decision, note, expect=expect, lease_token=token),
                f"{count(len(ids), 'marked proposal')} {decision}ed (z undo)", seen)

        self.app.push_screen(PromptDialog(f"{verb} the {count(len(ids), 'marked proposal')}",
                                          placeholder="one note for all of them (audit log)",
                                          help="One transaction: all of them or none; z undoes them together.",
                                          on_submit=submitted))

    def _show_decided(self, ids: list[int], decision: str, note: str) -> dict[int, tuple]:
        """The decision and its note on the proposals at once, before the write lands; what they showed."""
        hit = self.cands.index[self.cands["id"].isin(ids)]
        before = {int(self.cands.loc[i, "id"]): (str(self.cands.loc[i, "review_state"]), str(self.cands.loc[i, "note"]))
                  for i in hit}
        for i in hit:
            state = decision + "ed"
            needed = int(self.cands.loc[i, "approvals"]) if pd.notna(self.cands.loc[i, "approvals"]) else 1
            got = len(approver_list(self.cands.loc[i, "approvers"]))
            if decision == "accept" and got + 1 < needed:
                state = "waiting"
            self.cands.loc[i, ["review_state", "note"]] = [state, note]
        self._shown = {**getattr(self, "_shown", {}), **{cid: (decision + "ed", note) for cid in before}}
        self.render_current()
        self._summary(self.summary)
        return before

    def _seen(self, ids: list[int]) -> dict[int, int | None]:
        """The versions the card shows now (None behind this screen's own queued write)."""
        return {cid: None if self.ledger.pending.get(cid) else self.ledger.known.get(cid) for cid in ids}

    def _decide(self, ids: list[int], decision: str, note: str, fn, message: str,
                seen: dict[int, int | None] | None = None) -> None:
        """Show the decision on *ids*, put it on the undo stack, and queue its write (tui/writes.py): *fn(conn,
        expect)* decides on the versions this screen saw. A refused write leaves the stack, says why (another
        curator decided or reviews it) and the card shows the store's state again."""
        before = self._show_decided(ids, decision, note)
        d = Decision(list(ids), before, f"proposal #{ids[0]}" if len(ids) == 1 else count(len(ids), "proposal"),
                     note=note)
        self.ledger.stack.append(d)
        expect = self.ledger.expect(ids)
        for cid, v in (seen or {}).items():
            if v is not None and expect.get(cid) is not CHAIN:
                expect[cid] = v

        def write(conn) -> None:
            try:
                versions = self.ledger.resolve(expect)
                fn(conn, versions)
            except Exception as exc:
                d.state = "refused"
                self.ledger.finished(ids, None)
                self.app.call_from_thread(self._refused, d, exc)
                if not isinstance(exc, StoreError | ChainBroken | ValueError):
                    raise
                return
            own = {cid: versions[cid] + 1 for cid in ids if cid in versions}
            d.versions, d.state = own, "saved"
            self.ledger.finished(ids, own)

        store_write(self, write, message)

    def _refused(self, d: Decision, exc: BaseException) -> None:
        if d in self.ledger.stack:
            self.ledger.stack.remove(d)
        if len(self.cands):  # what the proposals showed before the refused decision, until the reload is in
            for cid, (state, note) in d.before.items():
                if not self.ledger.pending.get(cid):
                    self.cands.loc[self.cands["id"] == cid, ["review_state", "note"]] = [state, note]
            self.render_current()
        kept = f" (your note was: {d.note})" if d.note else ""
        self.notify(str(exc) + kept, title="Refused", severity="error", timeout=10)
        self.reload()  # the card shows the store's state again, not the guess

    def action_undo(self) -> None:
        """z: undo this session's latest accept/reject (or batch), even one still being saved (the undo is
        written after it): the proposals are pending again and an accepted item is removed from the benchmark,
        or, when later work uses it or another curator changed the proposal since, nothing changes and the
        message says why."""
        if not self.app.can_write():
            return
        if not self.ledger.stack:
            self.notify("nothing to undo", severity="warning")
            return
        d = self.ledger.stack.pop()
        ids = d.ids
        db = self.app.db_path
        self.focus_after = ids[0]
        hit = self.cands.index[self.cands["id"].isin(ids)] if len(self.cands) else []
        for i in hit:
            state, note = d.before.get(int(self.cands.loc[i, "id"]), ("pending", ""))
            self.cands.loc[i, ["review_state", "note"]] = [state, note]
        self.ledger.expect(ids)
        own = self.ledger.own

        def write(conn) -> None:
            from benchloupe.jobs import fill as jobs_fill

            if d.state != "saved":
                self.ledger.finished(ids, None, keep=True)
                self.app.call_from_thread(self.notify, f"{d.label}: that decision was not saved, so there was "
                                                       "nothing to undo", severity="warning")
                return
            expect = {cid: own.get(cid) if own.get(cid) is not None else d.versions.get(cid) for cid in ids}
            try:
                out = jobs_fill.undo_candidates(db, ids, expect={k: v for k, v in expect.items() if v is not None})
            except Exception as exc:
                from benchloupe.store.curation import Conflict

                if isinstance(exc, Conflict):  # another curator changed it since: it is theirs now
                    self.ledger.finished(ids, None)
                else:  # nothing was written (later work uses the item): still there to undo once fixed
                    self.ledger.finished(ids, None, keep=True)
                    self.app.call_from_thread(self.ledger.stack.append, d)
                self.app.call_from_thread(self._refused, Decision(ids, {}, d.label, state="refused"), exc)
                if not isinstance(exc, StoreError | ValueError):
                    raise
                return
            self.ledger.finished(ids, {cid: int(o["version"]) for cid, o in zip(ids, out)})

        what = f"proposal #{ids[0]}" if len(ids) == 1 else count(len(ids), "proposal")
        store_write(self, write, f"{what} back to review")
        self._refilter(keep=ids[0])
        self._summary(self.summary)

    def action_mark(self) -> None:
        """space: mark this proposal for a batch accept/reject (again: unmark) and move on."""
        cid = self.current_candidate()
        if cid is None:
            return
        self.marked ^= {cid}
        if cid in self.marked and self.pos < len(self.view) - 1:
            self.pos += 1
        self.render_current()
        self._summary(self.summary)

    def _undecided(self) -> list[int]:
        """Positions in ``cands`` of this session's proposals still waiting for a decision."""
        if not len(self.cands):
            return []
        return [int(i) for i in self.cands["review_state"].isin(("pending", "waiting")).to_numpy().nonzero()[0]]

    def action_skip(self) -> None:
        """l (later): leave this proposal undecided and go to the next undecided one (wrapping round)."""
        if not self.view:
            return
        cid = self.current_candidate()
        undecided = set(self._undecided())
        order = [*range(self.pos + 1, len(self.view)), *range(0, self.pos)]
        nxt = next((k for k in order if self.view[k] in undecided), None)
        if nxt is None:
            self.notify(f"proposal #{cid} is the only one left to review", markup=False)
            return
        self.pos = nxt
        self.render_current()
        self.notify(f"proposal #{cid} skipped; it stays to review", markup=False)

    def action_reject_rest(self) -> None:
        """X: reject every proposal of this session still undecided, after a confirmation (decisions are
        final), each with one note in the audit log."""
        rest = self._undecided()
        if self.session_id is None or not rest:
            self.notify("nothing left to reject in this session", markup=False)
            return
        ids = [int(self.cands["id"].iloc[i]) for i in rest]
        sid = self.session_id

        if not self.app.can_write() or self._busy(ids):
            return

        def confirmed(yes: bool | None) -> None:
            if not yes:
                return
            from benchloupe.jobs import fill as jobs_fill

            note = f"rejected with the rest of session #{sid}"
            db, token = self.app.db_path, self.reviewer["token"]
            self._decide(ids, "reject", note, lambda conn, expect: jobs_fill.decide_candidates(
                db, ids, "reject", note, expect=expect, lease_token=token),
                f"session #{sid}: {count(len(ids), 'proposal')} rejected (z undo)")
            self._refilter()

        self.app.push_screen(ConfirmDialog(f"Reject the {count(len(ids), 'proposal')} of session #{sid} still to review?",
                                           detail="One transaction; z undoes it; each is kept in the audit log."),
                             confirmed)

    def action_edit(self) -> None:
        """e: edit the proposal's text and reference answer, then accept the edited version (with a note)."""
        cid = self.current_candidate()
        if cid is None:
            return
        c = self.cands.iloc[self.view[self.pos]]
        if c["review_state"] in ("accepted", "rejected"):
            self.notify("this proposal is already decided; z undoes the latest decision", severity="warning")
            return
        text, answer = str(c["text"]), str(c["answer"])

        def done(edited: tuple[str, str] | None) -> None:
            if edited is None:
                return
            self.action_decide("accept", None if edited == (text, answer) else edited)

        choices = (c["payload"].get("choices") if isinstance(c["payload"], dict) else None) or []
        self.app.push_screen(EditDialog(f"Edit proposal #{cid}, then accept", text, answer, choices), done)

    # ------------------------------------------------------------------ sessions
    def action_new_session(self) -> None:
        start_fill_dialog(self, self.app.benchmark, 1)

    def action_resume(self) -> None:
        sid = self.session_id
        if sid is None:
            return
        from benchloupe.tui.jobs_ui import resume_job

        self.app.start_job(f"BenchFill #{sid}", resume_job(self.app.db_path, sid))

    def action_endpoints(self) -> None:
        eps = self.endpoints or {}
        rw, jd = eps.get("rewriter") or {}, eps.get("judge") or {}
        anns = eps.get("annotators") or []
        ann_text = ", ".join(f"{a['name']}={a.get('model', a['name'])}*{a.get('trials', 4)}" for a in anns)
        text = lambda s: s.strip()  # noqa: E731 - a field parser

        def same(e: dict) -> str:  # a URL equal to the rewriter's shows empty, so it follows a new rewriter URL
            url = e.get("base_url") or ""
            return "" if url == (rw.get("base_url") or "") else url

        fields = [Field("rw_url", "rewriter URL", rw.get("base_url", ""), text, "http://host:port/v1"),
                  Field("rw_model", "rewriter model", rw.get("model", ""), text),
                  Field("jd_url", "judge URL", same(jd), text, "empty = rewriter URL"),
                  Field("jd_model", "judge model", jd.get("model", ""), text),
                  Field("ann_url", "annotator URL", same(anns[0]) if anns else "", text,
                        "empty = rewriter URL"),
                  Field("anns", "annotators", ann_text, _parse_annotators, "name=model*trials, ..."),
                  Field("key_env", "key env var", rw.get("api_key_env", "OPENAI_API_KEY") or "", text,
                        "read from the environment; empty = no key")]

        def done(values: dict | None) -> None:
            if values is None:
                return
            db = self.app.db_path

            def write(conn) -> None:
                from benchloupe.jobs import fill as jobs_fill

                key = values["key_env"] or None
                rw_url = values["rw_url"]
                jobs_fill.set_endpoint(db, "rewriter", base_url=rw_url, model=values["rw_model"], api_key_env=key)
                jobs_fill.set_endpoint(db, "judge", base_url=values["jd_url"] or rw_url, model=values["jd_model"],
                                       api_key_env=key)
                keep = {name for name, _m, _t in values["anns"]}
                for a in anns:
                    if a["name"] not in keep:
                        jobs_fill.set_endpoint(db, "remove-annotator", name=a["name"])
                for name, model, trials in values["anns"]:
                    jobs_fill.set_endpoint(db, "annotator", name=name, model=model, trials=trials,
                                           base_url=values["ann_url"] or rw_url, api_key_env=key)

            store_write(self, write, "endpoints saved")

        self.app.push_screen(FormDialog("BenchFill endpoints (OpenAI-compatible)", fields,
                                        note="The API key itself is never stored: it is read from the variable "
                                             "named below."), done)


def _parse_annotators(raw: str) -> list[tuple[str, str, int]]:
    out = []
    for part in filter(None, (p.strip() for p in raw.split(","))):
        name, _, rest = part.partition("=")
        model, _, trials = (rest or name).partition("*")
        if not name.strip():
            raise ValueError(f"{part!r}: give name=model*trials")
        try:  # the command line's range and words (benchloupe.ranges; issue 24: 10^20 trials was accepted)
            count = ranges.FIELDS["AnnotatorSpec.trials"].parse(trials, form=True) if trials.strip() else 4
        except ValueError as exc:
            raise ValueError(f"{part!r}: trials {exc}") from None
        out.append((name.strip(), model.strip() or name.strip(), count))
    return out


class EditDialog(ModalScreen[tuple[str, str] | None]):
    """Edit a proposal's text and its reference answer; ctrl+s keeps the edit when it passes the rules an LLM
    rewrite must pass (jobs.fill.edit_problem: not empty, no control characters, a multiple-choice answer among
    the options), otherwise the reason shows
    and the dialog stays; escape cancels. Text arrives here free of control characters (the engine rejects
    rewrites holding them); any left (an imported parent) is shown escaped, never sent to the terminal."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="edit.cancel"),
                Binding("ctrl+s", "save", "Accept edit", id="edit.save", priority=True)]

    def __init__(self, title: str, text: str, answer: str, choices=()) -> None:
        super().__init__()
        self.title_text, self.choices = title, list(choices)
        self.text, self.answer = visible(text, keep_layout=True), visible(answer, keep_layout=True)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form"):
            yield SafeStatic(Text(self.title_text, style="bold"))
            yield SafeStatic(Text("text", style="dim"))
            yield TextArea(self.text, id="edit-area", soft_wrap=True)
            yield SafeStatic(Text("reference answer", style="dim"))
            yield Input(self.answer, id="edit-answer")
            yield SafeStatic("", id="edit-error", classes="error-line", markup=False)
            yield SafeStatic(Text("tab: next field   ctrl+s: accept the edited text   escape: cancel", style="dim"))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_save()

    def action_save(self) -> None:
        from benchloupe.jobs.fill import edit_problem

        text = self.query_one("#edit-area", TextArea).text
        answer = self.query_one("#edit-answer", Input).value
        problem = edit_problem(text, answer, self.choices)
        if problem:
            self.query_one("#edit-error", SafeStatic).update(Text(problem, style="bold red"))
            return
        self.dismiss((text, answer))

    def action_cancel(self) -> None:
        self.dismiss(None)


def se_words(se, b_min, b_max) -> str:
    """A proposal's standard error on the scale of the difficulty shown beside it (issue 32 point 9: a logit se
    sat beside a 0-1 difficulty): the online calibration's se is on the raw logit scale, and the normalised
    difficulty is ``(b - b_min) / (b_max - b_min)`` (engine.online.DifficultyScale), so its se is divided by the
    scale's width; without the scale the raw se is labelled as such."""
    def num(x) -> float:
        try:
            return float(x)
        except (TypeError, ValueError):
            return math.nan

    se, width = num(se), num(b_max) - num(b_min)
    if not math.isfinite(se):
        return "se unknown"
    if math.isfinite(width) and width > 0:
        return f"se {fmt_value(se / width, 3)} (0-1 scale)"
    return f"se {fmt_value(se, 3)} (logit scale)"


def start_fill_dialog(screen, benchmark: str, gap_rank: int) -> None:
    """Ask for a session's options (the paper's defaults) and start it as the app's job."""
    from benchloupe.jobs.fill import BenchFillConfig
    from benchloupe.tui.screens.run_forms import fill_fields

    config = BenchFillConfig()
    fields = fill_fields(config, gap_rank)
    app = screen.app
    db = app.db_path

    def done(values: dict | None) -> None:
        if values is None:
            return
        from benchloupe.jobs import fill as jobs_fill

        try:
            cfg = dataclasses.replace(config, **{k[4:]: v for k, v in values.items() if k.startswith("cfg-")})
            options = jobs_fill.FillOptions(values["gap"], values["answer_format"], values["baseline"])
        except Exception as exc:  # noqa: BLE001 - the config's own validation message
            app.report_error(exc, "BenchFill options")
            return

        def finished(result: dict) -> None:
            if isinstance(app.screen, BenchFillScreen):  # show the new session's review queue
                app.screen.session_id = result["session"]
                app.screen.reload()

        from benchloupe.tui.jobs_ui import fill_job

        caveat = jobs_fill.gap_caveat(db, benchmark, values["gap"])
        if app.start_job(f"BenchFill gap {values['gap']} of {benchmark}", fill_job(db, benchmark, options, cfg),
                         on_done=finished):
            app.switch_mode("benchfill")
            if caveat:
                app.notify(caveat, severity="warning", timeout=12, markup=False)

    def check(values: dict) -> None:
        from benchloupe.jobs import fill as jobs_fill

        dataclasses.replace(config, **{k[4:]: v for k, v in values.items() if k.startswith("cfg-")})
        jobs_fill.FillOptions(values["gap"], values["answer_format"], values["baseline"])

    from benchloupe.jobs.fill import gap_caveat

    note = "Defaults are the paper's; the seed (the baseline's parent draw) shows when the best-of-N baseline runs."
    if caveat := gap_caveat(db, benchmark, gap_rank):  # a tail or lattice gap is said before it is accepted
        note = f"{caveat}. {note}"
    app.push_screen(FormDialog(f"BenchFill on {benchmark}", fields, check=check, note=note), done)
