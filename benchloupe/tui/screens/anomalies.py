"""Anomalies: step through anomaly candidates (a model's unexpected answer on an item) with the expected
probability, the observed outcome, the residual, and the model's and the item's context."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
from textual.binding import Binding

from benchloupe.store.queue import FlagQueue
from benchloupe.tui.screens.queue import FlagQueueScreen, count, fmt_value, item_text, payload_rest
from benchloupe.tui.widgets.safe import Text

OUTCOME = {1: "1 (right)", 0: "0 (wrong)"}


class AnomaliesScreen(FlagQueueScreen):
    MODE = "anomalies"
    KIND = "anomaly"
    NOUN = "Anomaly"
    PLURAL = "anomalies"
    SCORE_WORD = "residual"
    PARSE_PAYLOADS = False  # one card at a time: its payload is parsed when shown
    BINDINGS = [Binding("M", "decide_all('model_id')", "Decide all of model", show=False, id="anomalies.all_model"),
                Binding("I", "decide_all('item_id')", "Decide all of item", show=False, id="anomalies.all_item")]

    def action_decide_all(self, column: str) -> None:
        """M / I: every open anomaly of this flag's model / item, after a confirmation with the count."""
        self.decide_all_of(column, "model" if column == "model_id" else "item")

    def fetch_context(self, conn: sqlite3.Connection, benchmark: str, q: FlagQueue) -> dict:
        from benchloupe.store import views

        models = views.model_table(conn, benchmark).set_index("id")
        items = views.item_table(conn, benchmark, counts=False).set_index("id")  # the counts come from the queue
        return {"models": models, "items": items, "per_model": q.counts(conn, "model_id"),
                "per_item": q.counts(conn, "item_id")}

    def render_flag(self, row: pd.Series) -> Text:
        p = self.payload(row)
        ctx = self.context
        text = Text()
        text.append("Model ", style="bold")
        text.append(str(row["model"]), style="bold cyan")
        models = ctx.get("models")
        if models is not None and row["model_id"] in models.index:
            m = models.loc[row["model_id"]]
            text.append(f"  {m['family'] or '-'} · {m['owner'] or '-'}")
            theta, rank = _ability(m)
            if theta is not None:
                text.append(f" · θ {theta:+.2f} (rank {rank} of {len(models):,})")
        text.append(f" · {count(ctx.get('per_model', {}).get(row['model_id'], 0), 'flag')} on this model\n",
                    style="dim")
        text.append("Item  ", style="bold")
        text.append(str(row["item_key"]), style="bold cyan")
        items = ctx.get("items")
        if items is not None and row["item_id"] in items.index:
            it = items.loc[row["item_id"]]
            text.append(f"  group {it['group'] or '-'} · difficulty {fmt_value(it['difficulty'], signed=True)}"
                        f" · pass rate {fmt_value(it['pass_rate'])}")
        text.append(f" · {count(ctx.get('per_item', {}).get(row['item_id'], 0), 'flag')} on this item\n",
                    style="dim")
        text.append("expected P(correct) ")
        text.append(fmt_value(p.get("expected_p"), 3), style="bold")
        text.append(" · observed ")
        text.append(outcome_text(p.get("observed")), style="bold")
        text.append(" · residual ")
        text.append(fmt_value(p.get("residual"), 2, signed=True), style="bold")
        text.append("\n")
        text.append_text(fit_line(p))
        text.append_text(payload_rest(p, FIT_KEYS))
        text.append("\nText\n", style="bold underline")
        text.append_text(item_text(row["item_text"]))
        text.append("\nAnswer: ", style="bold")
        text.append(str(row["item_answer"] or ""))
        return text


FIT_KEYS = {"expected_p", "observed", "residual", "source", "mode", "theta", "b", "a", "c", "chance"}
FIT_WORDS = {"static": "static fit (the benchmark's own results)", "joint": "joint fit (static and arena)",
             "arena": "arena fit (pairwise votes)"}


def fit_line(p: dict) -> Text:
    """Where the expected P(correct) comes from, in words: the fit, the model's ability in it, the item's
    difficulty and sharpness (the payload's ``mode``, ``theta``, ``b``, ``a``; the card printed them raw as
    "a: 1.401 / b: 1.690 / mode: static", issue 32 point 10)."""
    text = Text()
    fit = p.get("mode", p.get("source"))
    parts = []
    if p.get("theta") is not None:
        parts.append(f"model ability θ {fmt_value(p['theta'], 2, signed=True)}")
    if p.get("b") is not None:
        parts.append(f"item difficulty {fmt_value(p['b'], 2, signed=True)}")
    if p.get("a") is not None:
        parts.append(f"sharpness {fmt_value(p['a'], 2)}")
    chance = p.get("c", p.get("chance"))
    if chance is not None:
        parts.append(f"chance floor {fmt_value(chance, 2)}")
    if fit is None and not parts:
        return text
    text.append("from the ", style="dim")
    text.append(FIT_WORDS.get(str(fit), f"{fit} fit" if fit is not None else "fit"))
    if parts:
        text.append(": " + " · ".join(parts))
    text.append("\n")
    return text


def outcome_text(obs) -> str:
    """The observed outcome on the card: a right/wrong outcome as ``1 (right)`` / ``0 (wrong)`` whether the
    analysis stored it as an integer or a float (the engine writes ``0.0``; the card said ``0.00``), any other
    number with four significant digits and at least two decimals past its whole part (a partial-credit or
    rate outcome, ``0.004``: it was ``0.00``), anything else as :func:`fmt_value` shows it."""
    if isinstance(obs, bool | int | float | np.number) and np.isfinite(obs):
        if obs in OUTCOME:
            return OUTCOME[int(obs)]
        if isinstance(obs, bool | int | np.integer):
            return str(int(obs))
        whole = int(np.log10(abs(float(obs)))) + 1 if abs(float(obs)) >= 1 else 0  # digits before the point
        return format(float(obs), f".{max(4, min(whole + 2, 12))}g")
    return fmt_value(obs)


def _ability(m: pd.Series) -> tuple[float | None, int | None]:
    for kind in ("joint", "static", "arena", "bt", "avg_reward"):
        theta, rank = m.get(f"{kind}_theta"), m.get(f"{kind}_rank")
        if theta is not None and pd.notna(theta):
            return float(theta), None if rank is None or pd.isna(rank) else int(rank)
    return None, None
