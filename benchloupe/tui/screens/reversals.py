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
         "anchor_a", "anchor_b", "reversed", "top_items", "items"}


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
        rev = p.get("reversed")
        text.append("reversed: ", style="bold")
        text.append("yes" if rev else "no" if rev is not None else "–", style="bold red" if rev else "bold")
        text.append("\n")
        text.append_text(payload_rest(p, SHOWN))
        top = p.get("top_items", p.get("items"))
        if isinstance(top, list) and top:
            text.append("\nItems that drove the reversal\n", style="bold underline")
            for it in top[:10]:
                if isinstance(it, dict):
                    key = it.get("item", it.get("key", it.get("item_key", "")))
                    contrib = it.get("contribution", it.get("contrib"))
                    text.append(f"{fmt_value(contrib, 3, signed=True):>8}  ", style="bold")
                    text.append(str(key))
                    rest = {k: v for k, v in it.items() if k not in ("key", "item", "item_key", "contribution",
                                                                      "contrib")}
                    if rest:
                        text.append("  " + " ".join(f"{k}={fmt_value(v, 2)}" for k, v in rest.items()), style="dim")
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
