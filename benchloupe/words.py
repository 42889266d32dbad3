"""Counts in words: "1 file", "2 files", "1 anomaly", "3 anomalies" (issue 21 item 11: "imported 1 files",
"Decide the 1 open anomalies"). Pure and dependency-free, so every layer may import it."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """*n* and *noun*, in the plural unless *n* is 1 (*plural* when the noun's is not noun + "s")."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
