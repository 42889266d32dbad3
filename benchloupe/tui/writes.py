"""The workbench's writes, in the order the curator pressed the keys (issue 21 #3, issue 25).

Every decision, note and undo is written by a thread worker with its own connection (a connection belongs to
its thread). :class:`WriteQueue` gives each write a ticket on the UI thread when the key is handled and lets the
workers run strictly in ticket order, one at a time: a note, the decision after it and the undo after that reach
the database in that order, each as its own audited write, however long the store is busy (another process
holding the write lock). Before, writes took a plain lock (no order) and a decision and its undo waiting for it
were merged into one write.

:class:`Ledger` is what a decision screen knows of each object it shows (flags, gaps, BenchFill proposals):
the version it last saw (``flags.version``, ``fill_candidates.version``: optimistic concurrency, store/curation.py)
and its own writes still queued. A decision names the version the curator saw; when an earlier write of this
screen on the same object is still queued, it names *that write's result* instead (resolved in the worker, in
ticket order), so a quick note-then-decision is not refused against itself while another curator's change in
between still is; an undo expects what this screen's latest write on the object produced. :class:`Decision` is one entry of the undo stack: pushed when the key is pressed, so ``z``
always takes back the latest decision, even one still being saved (its undo is queued behind it and uses the
versions that write produced); a refused decision leaves the stack and there is nothing to undo.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from textual.message import Message

CHAIN = "after own write"  # an expectation: the version this screen's previous queued write produces


class Written(Message):
    """A store write finished; ``message`` is shown when not empty (screens/base.py reloads on it)."""

    def __init__(self, message: str, reload: bool) -> None:
        super().__init__()
        self.message, self.reload = message, reload


class WriteQueue:
    """Tickets taken on the UI thread, served one at a time in ticket order by the write workers."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._next = 0
        self._serving = 0
        self._abandoned: set[int] = set()

    def ticket(self) -> int:
        with self._cv:
            n = self._next
            self._next += 1
            return n

    def wait_turn(self, n: int, cancelled: Callable[[], bool] = lambda: False) -> bool:
        """Block until ticket *n* is served; False (and the ticket skipped) when *cancelled* first."""
        with self._cv:
            while self._serving != n:
                if cancelled():
                    self._abandoned.add(n)
                    self._advance()
                    return False
                self._cv.wait(0.1)
            return True

    def done(self, n: int) -> None:
        with self._cv:
            if self._serving == n:
                self._serving += 1
                self._advance()

    def _advance(self) -> None:
        while self._serving in self._abandoned:
            self._abandoned.discard(self._serving)
            self._serving += 1
        self._cv.notify_all()

    @property
    def pending(self) -> int:
        with self._cv:
            return self._next - self._serving


class ChainBroken(RuntimeError):
    """This screen's earlier write on the object was refused, so a decision made after it is refused too."""


@dataclass
class Decision:
    """One key press's write (a batch is one) and what taking it back needs: ``before`` per object id (what the
    screen showed before it), the versions and audit ids the write produced once saved."""

    ids: list[int]
    before: dict[int, tuple]
    label: str = ""
    state: str = "saving"  # saving -> saved | refused
    note: str = ""  # the note it writes (a refusal repeats it, so it is not lost)
    kind: str = "decision"  # decision | note | undo
    versions: dict[int, int] = field(default_factory=dict)
    audit_ids: list[int] = field(default_factory=list)


class Ledger:
    """What one decision screen knows of its objects' versions and its own queued writes (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.known: dict[int, int | None] = {}  # the version last seen (loads, own writes; never going back)
        self.own: dict[int, int | None] = {}  # the version this screen's latest write produced (None: refused)
        self.pending: dict[int, int] = {}
        self.stack: list[Decision] = []

    def expect(self, ids: Iterable[int]) -> dict[int, object]:
        """UI thread, when the key is pressed: what each object's write expects (the version seen, or CHAIN
        behind this screen's own queued write), and count the write as queued."""
        out: dict[int, object] = {}
        with self._lock:
            for i in ids:
                out[i] = CHAIN if self.pending.get(i) else self.known.get(i)
                self.pending[i] = self.pending.get(i, 0) + 1
        return out

    def resolve(self, expect: dict[int, object]) -> dict[int, int]:
        """Worker, in ticket order: the versions to check (CHAIN resolved to what the previous write made);
        :class:`ChainBroken` when that write was refused."""
        out = {}
        with self._lock:
            for i, e in expect.items():
                v = self.own.get(i) if e is CHAIN else e
                if e is CHAIN and v is None:
                    raise ChainBroken(f"#{i}: your previous change on it was not saved, so this one was not either")
                if v is not None:
                    out[i] = int(v)
        return out

    def finished(self, ids: Iterable[int], versions: dict[int, int] | None, *, keep: bool = False) -> None:
        """Worker: a queued write on *ids* ended; *versions* what it wrote, None when it was refused (what this
        screen knows of those objects is then stale until the next load); *keep*: it wrote nothing and knows
        nothing new (an undo skipped)."""
        with self._lock:
            for i in ids:
                self.pending[i] = max(0, self.pending.get(i, 0) - 1)
                if keep:
                    continue
                if versions is None:
                    self.own[i] = None
                    self.known[i] = None
                elif i in versions:
                    self.own[i] = versions[i]
                    self.known[i] = max(versions[i], self.known.get(i) or 0)

    def loaded(self, versions: dict[int, int]) -> set[int]:
        """UI thread, when fresh rows are shown: take their versions (never going back: a load that began before
        this screen's own write landed is older than that write); the ids whose version moved past what this
        screen knew, i.e. another writer changed them."""
        moved = set()
        with self._lock:
            for i, v in versions.items():
                if self.pending.get(i):
                    continue
                old = self.known.get(i)
                if old is not None and v > old:
                    moved.add(i)
                if old is None or v > old:
                    self.known[i] = v
        return moved

    def saving(self) -> bool:
        with self._lock:
            return any(self.pending.values())


def ordered_write(screen, fn: Callable[[sqlite3.Connection], object], message: str = "", *,
                  reload: bool = True) -> None:
    """Run ``fn(conn)`` in a thread worker with its own connection, after every write queued before it on this
    app (ticket order); then tell the app the store changed (reloading the current screen when *reload*)."""
    from textual.worker import get_current_worker

    app = screen.app
    queue: WriteQueue = app.write_queue
    n = queue.ticket()

    def write() -> None:
        from benchloupe.store.db import connect

        worker = get_current_worker()
        if not queue.wait_turn(n, lambda: worker.is_cancelled):
            return
        try:
            conn = connect(app.db_path)
            try:
                fn(conn)
            finally:
                conn.close()
        finally:
            queue.done(n)
        screen.post_message(Written(message, reload))

    screen.run_worker(write, thread=True, group="write", exit_on_error=False)
