"""Broken items (issue 33): step through the item audit's flags with the evidence card: why it is flagged, the
statistics (item-rest r, sign-free slope with its interval, q-values, S-X2), the option table by ability quartile
with the suggested key, and a small fit plot (observed vs expected proportion right by score group). Decisions as
on every queue (c confirm, d dismiss, u unsure, z undo, e note); K fixes the key to the suggested one (re-scores
the item's results from the stored options, one transaction; `benchloupe flags --undo` takes it back), R retires
the item and confirms the flag. r runs the item audit on the open benchmark with its defaults (the Runs screen,
4, starts it with a form)."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
from textual.binding import Binding

from benchloupe.store.queue import FlagQueue
from benchloupe.tui.screens.queue import FlagQueueScreen, fmt_value
from benchloupe.tui.widgets.safe import Text

QUARTILES = ("Q1 weakest", "Q2", "Q3", "Q4 top")
BAR = " ▁▂▃▄▅▆▇█"


class ItemFlagsScreen(FlagQueueScreen):
    MODE = "itemflags"
    KIND = "item"
    NOUN = "Item flag"
    PLURAL = "item flags"
    BINDINGS = [
        Binding("K", "fix_key", "Fix key", show=False, id="itemflags.fix_key"),
        Binding("R", "retire", "Retire item", show=False, id="itemflags.retire"),
        Binding("r", "run_audit", "Run item audit", show=False, id="itemflags.run"),
    ]

    def action_run_audit(self) -> None:
        """r: the item audit on the open benchmark, with its defaults, as a job (its flags land here)."""
        from benchloupe.jobs import analysis
        from benchloupe.tui.jobs_ui import analysis_job

        config = analysis("items").config_cls()
        self.app.start_job(f"items on {self.app.benchmark}",
                           analysis_job(self.app.db_path, "items", self.app.benchmark, config))

    def empty_text(self, total: int) -> Text:
        if total:
            return super().empty_text(total)
        return Text("no item flags for this benchmark yet: r runs the item audit here (defaults), or start "
                    "'items' with its form in 4: Runs", style="dim")

    def fetch_context(self, conn: sqlite3.Connection, benchmark: str, q: FlagQueue) -> dict:
        """Per run: item id -> its row in the run's cards (option shares, fit curve)."""
        from benchloupe.store import runs

        cards = {}
        for rid in q.run_ids(conn):
            table = runs.load_table(conn, int(rid), "table")
            arrays = runs.load_artifact(conn, int(rid), "cards")
            if table is None or not isinstance(arrays, dict):
                continue
            ids = np.asarray(table["item_id"], np.int64)
            cards[int(rid)] = ({int(i): j for j, i in enumerate(ids.tolist())}, arrays)
        return {"cards": cards}

    def _card(self, row: pd.Series) -> tuple[int, dict] | None:
        if pd.isna(row["run_id"]) or pd.isna(row["item_id"]):
            return None
        got = self.context.get("cards", {}).get(int(row["run_id"]))
        if got is None or int(row["item_id"]) not in got[0]:
            return None
        return got[0][int(row["item_id"])], got[1]

    def render_flag(self, row: pd.Series) -> Text:
        p = self.payload(row)
        text = Text()
        text.append("Item ", style="bold")
        text.append(str(row["item_key"]), style="bold cyan")
        text.append(f"  {', '.join(p.get('reasons', [row.get('reason', '')]))}", style="bold red")
        text.append(f"  key {p.get('answer') or '-'}\n")
        if p.get("headline"):
            text.append(str(p["headline"]) + "\n")
        text.append(f"right {fmt_value(p.get('p_right'), 3)} of {p.get('n_answers', '-')} · item-rest r "
                    f"{fmt_value(p.get('r_rest'), 3, signed=True)} (q {fmt_value(p.get('q_backwards'), 2)}) · "
                    f"slope {fmt_value(p.get('slope'), 2, signed=True)} [{fmt_value(p.get('slope_lo'), 2)}, "
                    f"{fmt_value(p.get('slope_hi'), 2)}]\n", style="dim")
        text.append(f"best distractor r {fmt_value(p.get('r_distractor'), 3, signed=True)} "
                    f"(q {fmt_value(p.get('q_miskey'), 2)}) · S-X2 {fmt_value(p.get('sx2'), 1)} on "
                    f"{fmt_value(p.get('sx2_df'), 0)} df (q {fmt_value(p.get('sx2_q'), 2)})\n", style="dim")
        card = self._card(row)
        choices = [str(c) for c in p.get("choices") or []]
        if card is not None:
            j, arrays = card
            shares = np.asarray(arrays.get("option_shares", np.zeros((0, 4, 0))))
            if shares.ndim == 3 and j < len(shares) and shares.shape[2] and choices:
                text.append("\nOptions by ability quartile (% choosing)\n", style="bold underline")
                k = min(len(choices), shares.shape[2])
                text.append(f"{'':11s}" + "".join(f"{c[:6]:>7s}" for c in choices[:k]) + "\n", style="bold")
                for qi, name in enumerate(QUARTILES[:shares.shape[1]]):
                    text.append(f"{name:11s}")
                    for o in range(k):
                        v = shares[j, qi, o]
                        style = "bold green" if choices[o] == str(p.get("answer")) else \
                            "bold yellow" if choices[o] == str(p.get("suggested_key")) else ""
                        text.append(f"{'-' if v != v else f'{v * 100:.0f}':>7s}", style=style)
                    text.append("\n")
            obs = np.asarray(arrays.get("fit_observed", np.zeros((0, 0))))
            exp = np.asarray(arrays.get("fit_expected", np.zeros((0, 0))))
            if obs.ndim == 2 and j < len(obs) and obs.shape[1] and np.isfinite(obs[j]).any():
                text.append("\nFit by score group (observed / expected right)\n", style="bold underline")
                text.append("observed " + _bars(obs[j]) + "\nexpected " + _bars(exp[j]) + "\n")
        if p.get("suggested_key"):
            text.append("\nK: fix the key to ", style="dim")
            text.append(str(p["suggested_key"]), style="bold yellow")
            text.append(" (re-scores the item's results) · R: retire the item\n", style="dim")
        text.append("\nText\n", style="bold underline")
        text.append(str(row["item_text"] or "")[:600])
        return text

    def action_fix_key(self) -> None:
        """K: make the suggested key the item's answer (results re-scored from the stored options)."""
        row = self._current_row()
        if row is None:
            return
        p = self.payload(row)
        new = p.get("suggested_key")
        if not new:
            self.notify("no suggested key for this item (no stored options, or the key leads)", severity="warning")
            return
        fid, item_id, old = int(row["id"]), int(row["item_id"]), p.get("answer")

        def write(conn: sqlite3.Connection, _q) -> dict:
            from benchloupe.store import itemkeys

            return itemkeys.fix_key(conn, item_id, str(new), expect_answer=old, flag_id=fid)

        out = self._read(write, what="fix key")  # a refusal (key changed, no options) is shown, nothing written
        if out is not None:
            self.notify(f"item {out['item']}: key {out['from']} -> {out['to']}; {out['changed']} results re-scored "
                        "(flags --undo takes it back)")
            self.reload()

    def action_retire(self) -> None:
        """R: retire the item (left out of new fits; its results kept) and confirm the flag."""
        row = self._current_row()
        if row is None:
            return
        fid, item_id = int(row["id"]), int(row["item_id"])

        def write(conn: sqlite3.Connection, _q) -> bool:
            from benchloupe.store import curation

            curation.set_item_status(conn, item_id, "retired", expect_status="active")
            curation.set_flag_state(conn, fid, "confirmed")
            return True

        if not self._read(write, what="retire"):  # a refusal is shown, nothing written
            return
        self.notify(f"item {row['item_key']} retired; flag {fid} confirmed")
        self.reload()


def _bars(values: np.ndarray) -> str:
    """Proportions in [0, 1] as a row of block characters (one per score group), a number at each end."""
    v = np.asarray(values, float)
    cells = "".join(" " if x != x else BAR[int(round(min(max(x, 0), 1) * (len(BAR) - 1)))] for x in v)
    first = next((x for x in v if x == x), float("nan"))
    last = next((x for x in v[::-1] if x == x), float("nan"))
    return f"{fmt_value(first, 2)} {cells} {fmt_value(last, 2)}"
