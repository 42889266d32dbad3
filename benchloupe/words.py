"""Counts in words: "1 file", "2 files", "1 anomaly", "3 anomalies" (issue 21 item 11: "imported 1 files",
"Decide the 1 open anomalies"). Pure and dependency-free, so every layer may import it."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """*n* and *noun*, in the plural unless *n* is 1 (*plural* when the noun's is not noun + "s")."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def clip(text: str, limit: int) -> str:
    """*text* on one line, at most *limit* characters, cut at a word boundary with "…" when longer (issue 32: a
    retry line ended "is the server runnin")."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    head = flat[:limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > 0 else head).rstrip(" ,;:") + "…"  # a first word longer than the limit: cut
