"""Counts in words: "1 file", "2 files", "1 anomaly", "3 anomalies" (issue 21 item 11: "imported 1 files",
"Decide the 1 open anomalies"). Pure and dependency-free, so every layer may import it."""

from __future__ import annotations

import math


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


def estimate_text(est, lo, hi, seen, n_items) -> str:
    """"est. 61.2 % [58.9, 63.5] · 30 of 249 items" (issue 34): how every face shows a predicted full-benchmark
    accuracy, always saying it is an estimate and from how many items; blank for a model without one."""
    try:
        value = float(est)
    except (TypeError, ValueError):
        return ""
    if math.isnan(value):
        return ""
    return f"est. {100 * value:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}] \u00b7 {int(seen)} of {int(n_items)} items"
