"""Near-tie reversals: step through the audit's close pairs: the two models with families and owners, their
full and anchor scores, whether the order reversed, the items that drove it, and the run's Table 1 row."""

from __future__ import annotations

import sqlite3

import pandas as pd

from benchloupe.store.queue import FlagQueue, payload_truthy
from benchloupe.tui.screens.queue import (
    STATE_FILTERS,
    FlagQueueScreen,
    fmt_value,
    open_item_panel,
    payload_rest,
    select_on_screen,
)
from benchloupe.tui.widgets.safe import Text

SHOWN = {"model_a", "model_b", "family_a", "family_b", "owner_a", "owner_b", "full", "anchor", "full_a", "full_b",
         "anchor_a", "anchor_b", "reversed", "top_items", "items", "fold", "target_half", "gap", "tied",
         "random_reversal_fraction", "random_tie_fraction"}


class ReversalsScreen(FlagQueueScreen):
    MODE = "reversals"
    KIND = "reversal"
    NOUN = "Reversal"
    PLURAL = "reversals"
    FILTERS = ("reversed", *STATE_FILTERS)  # reversed pairs by default; every near-tie pair is a filter away

    def filter_where(self) -> tuple[str, dict]:
        where, params = super().filter_where()
        if self.state_filter == "reversed":  # the pairs whose payload says ``reversed`` (Python's truth)
            where = " AND ".join(w for w in (where, payload_truthy("reversed")) if w)
        return where, params

    def fetch_context(self, conn: sqlite3.Connection, benchmark: str, q: FlagQueue) -> dict:
        from benchloupe.store import read, runs

        models = read.models(conn, benchmark).set_index("id")
        tables, splits = {}, {}
        for rid in q.run_ids(conn):
            metrics = (runs.get_run(conn, int(rid)) or {}).get("metrics", {})
            tables[int(rid)] = metrics.get("table1")
            splits[int(rid)] = split_header(metrics)
        keys = read.items(conn, benchmark, with_text=False)
        return {"models": models, "table1": tables, "splits": splits, "item_ids": dict(zip(keys["key"], keys["id"]))}

    def driving_item(self, row: pd.Series) -> int | None:
        """The id of the item that drove the reversal most (the first of ``top_items``)."""
        top = row["payload"].get("top_items", row["payload"].get("items"))
        if isinstance(top, list) and top and isinstance(top[0], dict):
            key = top[0].get("item", top[0].get("key", top[0].get("item_key")))
            hit = self.context.get("item_ids", {}).get(key)
            return None if hit is None else int(hit)
        return None

    def _current_driving_item(self) -> int | None:
        """The current pair's driving item, or None (and a warning) when there is no pair or none was recorded."""
        row = self._current_row()
        if row is None:
            return None
        item_id = self.driving_item(row)
        if item_id is None:
            self.notify("this pair has no driving item recorded", severity="warning")
        return item_id

    def action_open_item(self) -> None:
        """Enter: the panel of the item that drove the reversal most."""
        item_id = self._current_driving_item()
        if item_id is not None:
            open_item_panel(self.app, item_id, self._current_row()["model_id"])

    def action_select_item(self) -> None:
        """i: the item that drove the reversal most, selected on 2 Items."""
        item_id = self._current_driving_item()
        if item_id is not None:
            select_on_screen(self.app, "items", item_id)

    def render_flag(self, row: pd.Series) -> Text:
        p = row["payload"]
        models = self.context.get("models")
        text = Text()
        header = self.context.get("splits", {}).get(int(row["run_id"])) if pd.notna(row["run_id"]) else None
        if header:  # how much the run's verdict rests on its owner split (issue 22), above the pair
            stable = header.startswith("stable")
            text.append("Owner split: ", style="bold")
            text.append(header + "\n", style="bold green" if stable else "bold yellow" if "fragile" in header else "")
        for side, mid, name in (("a", row["model_id"], row["model"]), ("b", row["model_b_id"], row["model_b"])):
            text.append(f"Model {side.upper()} ", style="bold")
            text.append(str(p.get(f"model_{side}", name)), style="bold cyan")
            family, owner = p.get(f"family_{side}"), p.get(f"owner_{side}")
            if models is not None and pd.notna(mid) and int(mid) in models.index:
                m = models.loc[int(mid)]
                family, owner = family or m["family"], owner or m["owner"]
            text.append(f"  family {family or '-'} · owner {owner or '-'}")
            text.append(f"   full {_pair(p, 'full', side)} · anchor {_pair(p, 'anchor', side)}\n")
        text.append_text(pair_words(p))
        text.append_text(payload_rest(p, SHOWN))
        top = p.get("top_items", p.get("items"))
        if isinstance(top, list) and top:
            text.append("\nItems that drove the reversal", style="bold underline")
            text.append("  (each item's part in the change from the full gap to the anchor gap)\n", style="dim")
            for it in top[:10]:
                if isinstance(it, dict):
                    key = it.get("item", it.get("key", it.get("item_key", "")))
                    contrib = it.get("contribution", it.get("contrib"))
                    text.append(f"{fmt_value(contrib, 3, signed=True):>8}  ", style="bold")
                    text.append(str(key))
                    text.append(driver_words(it), style="dim")
                else:
                    text.append(str(it))
                text.append("\n")
        table = self.context.get("table1", {}).get(int(row["run_id"])) if pd.notna(row["run_id"]) else None
        if isinstance(table, dict) and table:
            text.append(f"\nThe run's Table 1 row (run #{int(row['run_id'])})\n", style="bold underline")
            for k, v in table.items():
                text.append(f"{k} ", style="dim")
                text.append(fmt_value(v, 3) + "   ", style="bold" if k in ("p", "status", "rate") else "")
        return text


def pair_words(p: dict) -> Text:
    """Whether the pair reversed, and how close and how robust it is, in words (the card printed the payload as
    "fold: 0 / gap: 0.001 / tied: no", issue 32 point 10): the gap of the full scores, which half of the items the
    anchor scored, and how often a random anchor of the same size reverses or ties the pair."""
    text = Text()
    rev = p.get("reversed")
    text.append("Reversed: ", style="bold")
    text.append("yes, the anchor orders the pair the other way" if rev else "no, the anchor keeps the order"
                if rev is not None else "–", style="bold red" if rev else "bold")
    if p.get("tied"):
        text.append(" (tied on one of the scores)", style="bold yellow")
    text.append("\n")
    parts = []
    if p.get("gap") is not None:
        parts.append(f"full scores {fmt_value(p['gap'], 3)} apart")
    fold = p.get("fold")
    if p.get("target_half") is not None:
        parts.append(f"anchor scored on the {p['target_half']} half" + (f" (fold {fold})" if fold is not None else ""))
    elif fold is not None:
        parts.append(f"(fold {fmt_value(fold)})")
    if parts:
        text.append(" · ".join(parts) + "\n")
    flips, ties = p.get("random_reversal_fraction"), p.get("random_tie_fraction")
    if flips is not None:
        text.append("A random anchor of the same size reverses this pair in ")
        text.append(_percent(flips), style="bold")
        text.append(" of draws" + (f" and ties it in {_percent(ties)}" if ties is not None else "") + "\n")
    return text


def _percent(v) -> str:
    try:
        x = 100 * float(v)
    except (TypeError, ValueError):
        return fmt_value(v)
    return f"{x:.0f}%" if x >= 1 or x == 0 else f"{x:.1f}%"


def driver_words(it: dict) -> str:
    """One driving item's answers and anchor weight in words ("A right, B wrong · not in the anchor"), not its
    raw fields ("weight=0.00 y_a=1.00 y_b=0.00")."""
    parts = []
    ya, yb = it.get("y_a"), it.get("y_b")
    word = {1: "right", 0: "wrong"}
    if ya is not None or yb is not None:
        parts.append(f"A {word.get(ya, fmt_value(ya))}, B {word.get(yb, fmt_value(yb))}")
    w = it.get("weight")
    if w is not None:
        parts.append("not in the anchor" if not w else f"anchor weight {fmt_value(w, 2)}")
    rest = {k: v for k, v in it.items() if k not in ("key", "item", "item_key", "contribution", "contrib", "y_a",
                                                        "y_b", "weight")}
    parts += [f"{k.replace('_', ' ')} {fmt_value(v, 2)}" for k, v in rest.items()]
    return ("  " + " · ".join(parts)) if parts else ""


def split_header(metrics: dict) -> str:
    """The run's split-stability verdict and knife-edge count in one line ("" for a run from before issue 22)."""
    parts = []
    if metrics.get("split_verdict"):
        parts.append(str(metrics["split_verdict"]))
    if "split_decisions" in metrics:
        parts.append(f"{metrics.get('split_ties', 0)} cost ties drawn, {metrics.get('split_knife_edges', 0)} knife "
                     f"edges in {metrics['split_decisions']} decisions")
    return " · ".join(parts)


def _pair(p: dict, what: str, side: str) -> str:
    v = p.get(what)
    if isinstance(v, dict):
        return fmt_value(v.get(side, v.get(f"model_{side}")), 3)
    if isinstance(v, list | tuple) and len(v) == 2:
        return fmt_value(v[0 if side == "a" else 1], 3)
    return fmt_value(p.get(f"{what}_{side}"), 3)
