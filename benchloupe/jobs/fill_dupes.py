"""BenchFill proposals that nearly duplicate an existing item or another proposal (issue 33): each proposal,
as the rewriter's round is journaled, is checked against the workspace's active items (every benchmark, its
parent included: a rewrite that barely changed it is one) and the session's earlier proposals, with item
health's near-duplicate test (MinHash over character 5-shingles, the exact Jaccard >= .8 to confirm). A hit is
kept in the proposal's payload as ``duplicate_of``, which the review shows before the curator decides.
The index is imported when first built, so the review's :func:`words` loads nothing of the engine."""

from __future__ import annotations

import sqlite3


class ProposalDupes:
    """The index of one session's reference texts, built on first use from the store, grown by each proposal."""

    def __init__(self, conn: sqlite3.Connection, session_id: int) -> None:
        self.conn, self.sid = conn, session_id
        self.index = None
        self.items: dict[int, tuple[str, str]] = {}  # item id -> (key, benchmark)

    def _build(self):
        from benchloupe.engine.itemhealth.dupes import TextIndex

        index = TextIndex()
        rows = self.conn.execute("SELECT i.id, i.key, b.name, i.text FROM items i JOIN benchmarks b ON b.id ="
                                 " i.benchmark_id WHERE i.status = 'active' AND i.text != '' ORDER BY i.id")
        for iid, key, bench, text in rows:
            self.items[int(iid)] = (str(key), str(bench))
            index.add(("item", int(iid)), str(text))
        for key, text in self.conn.execute("SELECT child_key, text FROM fill_candidates WHERE session_id = ?"
                                           " ORDER BY id", (self.sid,)):
            index.add(("proposal", str(key)), str(text))
        return index

    def mark(self, child_key: str, text: str, parent_item_id: int | None) -> dict | None:
        """The ``duplicate_of`` entry of a new proposal (None: no near-duplicate); the proposal is then kept
        in the index, so a later one that repeats it is marked too."""
        if self.index is None:
            self.index = self._build()
        hit = self.index.nearest(text, exclude=("proposal", child_key))
        self.index.add(("proposal", child_key), text)
        if hit is None:
            return None
        (kind, ref), jac = hit
        if kind == "proposal":
            return {"kind": "proposal", "child_key": ref, "jaccard": round(jac, 3)}
        key, bench = self.items[ref]
        return {"kind": "item", "item_id": ref, "key": key, "benchmark": bench, "jaccard": round(jac, 3),
                "parent": ref == parent_item_id}


def words(dup: dict | None) -> str:
    """The review's line for a ``duplicate_of`` entry ('' for none)."""
    if not isinstance(dup, dict):
        return ""
    jac = f"Jaccard {float(dup.get('jaccard') or 0):.2f}"
    if dup.get("kind") == "proposal":
        return f"near-duplicate of proposal {dup.get('child_key')} of this session ({jac})"
    if dup.get("parent"):
        return f"near-duplicate of its parent item {dup.get('key')} ({jac}): the rewrite barely changed it"
    return f"near-duplicate of item {dup.get('key')} of {dup.get('benchmark')} ({jac})"
