"""Coverage: the benchmark's normalised difficulty ECDF against the uniform target with the largest gaps
shaded (a terminal plot) and the models' ability range as a band under the axis, DDM, max gap, top-5 sum and
the diagnostics from the latest coverage run; the lattice and tail warnings and the robustness summary
(paper 003 C.3, C.5); each gap with its C.6 interval and status (gap, uncertain, tail, lattice). Gap flags are
triaged like every other flag (c confirm, d dismiss, u unsure, o reopen, z undo, n next open; space marks gaps
that the next decision then takes together, in one transaction and one undo); b starts a BenchFill session on
the selected gap."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pandas as pd
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

from benchloupe.textsafe import visible
from benchloupe.tui.screens.base import BenchScreen
from benchloupe.tui.widgets.plots import ecdf_plot
from benchloupe.tui.widgets.safe import SafeStatic, Text
from benchloupe.tui.widgets.table import Column, FrameTable, fmt_num, format_lines
from benchloupe.tui.writes import ChainBroken, Decision, Ledger

GAP_COLUMNS = [Column("mark", "", 1, export=()), Column("rank", "gap", 4, right=True),
               Column("lo", "from", 6, fmt_num(3), right=True), Column("hi", "to", 6, fmt_num(3), right=True),
               Column("width", "width", 6, fmt_num(3), right=True),
               Column("interval", "95% interval", 13, export=("ci_lo", "ci_hi")), Column("status", "status", 9),
               Column("state", "state", 10), Column("by", "by", 8)]
HEADLINE = ("ddm", "max_gap", "topk_sum", "max_gap_ratio", "uniform_exceed_prob")


class CoverageScreen(BenchScreen):
    MODE = "coverage"
    BINDINGS = [Binding("r", "run_coverage", "Run coverage", id="coverage.run"),
                Binding("b", "fill", "BenchFill gap", id="coverage.fill"),
                Binding("c", "decide('confirmed')", "Confirm", id="coverage.confirm"),
                Binding("d", "decide('dismissed')", "Dismiss", id="coverage.dismiss"),
                Binding("u", "decide('unsure')", "Unsure", show=False, id="coverage.unsure"),
                Binding("space", "mark", "Mark gap for batch (c d u o decide all marked)", show=False,
                        id="coverage.mark", priority=True),
                Binding("o", "decide('open')", "Reopen", show=False, id="coverage.reopen"),
                Binding("n", "next_open", "Next untriaged", show=False, id="coverage.next_open"),
                Binding("z", "undo", "Undo", show=False, id="coverage.undo"),
                Binding("v", "notes", "All notes", show=False, id="coverage.notes")]
    TOPICS = ("flags", "runs", "items")

    def __init__(self) -> None:
        super().__init__()
        # versions seen, own queued writes, and the undo stack (tui/writes.py; ``before``: the state replaced)
        self.ledger = Ledger()
        self.marked: set[int] = set()  # gap flag ids marked with space

    @property
    def undo_stack(self) -> list[Decision]:
        return self.ledger.stack

    def compose_body(self) -> ComposeResult:
        yield SafeStatic("", id="coverage-head", classes="status-line", markup=False)
        yield SafeStatic("", id="coverage-notes", markup=False)
        yield SafeStatic("", id="coverage-plot", markup=False)
        yield FrameTable(id="gaps")

    def fetch(self, conn: sqlite3.Connection, benchmark: str) -> dict:
        from benchloupe.store import curation, runs, views

        rid = views.latest_run_id(conn, benchmark, ("coverage",))
        if rid is None:
            return {"run": None}
        run = runs.get_run(conn, rid)
        gaps = curation.flags(conn, run_id=rid, kind="gap")
        rows = []
        for r in gaps.itertuples():
            p = r.payload
            lo_ci, hi_ci = p.get("ci_lo"), p.get("ci_hi")
            interval = f"{lo_ci:.3f}-{hi_ci:.3f}" if isinstance(lo_ci, float) and isinstance(hi_ci, float) and \
                math.isfinite(lo_ci) and math.isfinite(hi_ci) else "-"
            rows.append({"flag_id": r.id, "rank": p.get("rank"), "lo": p.get("lo"), "hi": p.get("hi"),
                         "width": p.get("width"), "interval": interval, "ci_lo": lo_ci, "ci_hi": hi_ci,
                         "status": str(p.get("status", "")), "state": r.state, "version": int(r.version),
                         "by": r.updated_by if r.version else ""})
        gap_df = pd.DataFrame(rows, columns=["flag_id", "rank", "lo", "hi", "width", "interval", "ci_lo", "ci_hi",
                                             "status", "state", "version", "by"])
        gap_df.insert(0, "mark", "")
        gap_df = gap_df.sort_values("width", ascending=False, kind="stable").reset_index(drop=True)
        gap_df["rank"] = gap_df["rank"].fillna(pd.Series(range(1, len(gap_df) + 1))).astype(int)
        items = runs.run_items(conn, rid)
        z = items["z"].astype(float).to_numpy() if "z" in items else np.array([])
        return {"run": run, "gaps": gap_df, "lines": format_lines(gap_df, GAP_COLUMNS), "z": z}

    def show(self, data: dict) -> None:
        self.data = data
        head = self.query_one("#coverage-head", SafeStatic)
        table = self.query_one(FrameTable)
        if data["run"] is None:
            head.update(Text("no coverage run for this benchmark yet: r runs coverage with the paper's defaults "
                             "(it fits its own 1PL difficulties)", style="dim"))
            self.query_one("#coverage-plot", SafeStatic).update("")
            self.query_one("#coverage-notes", SafeStatic).update("")
            table.set_data(pd.DataFrame(columns=[c.key for c in GAP_COLUMNS]), GAP_COLUMNS)
            return
        run = data["run"]
        m = run["metrics"]
        text = Text(f"coverage run #{run['id']}", style="bold")
        failed = failed_checks(m)
        if failed is not None:  # first, so 80 columns never cut the check's name (issue 32 point 8)
            text.append(" · diagnostics ")
            text.append("pass" if not failed else "FAIL: " + ", ".join(CHECK_SHORT.get(k, k) for k in failed),
                        style="bold green" if not failed else "bold red")
        for k in HEADLINE:
            if k in m:
                v = m[k]
                text.append(f" · {k} ")
                if isinstance(v, bool):
                    text.append("pass" if v else "FAIL", style="bold green" if v else "bold red")
                else:
                    text.append(f"{v:.3g}" if isinstance(v, float) else str(v), style="bold")
        notes = notes_text(m, data["gaps"])
        if self.size.height < 40:  # 80x24: one line per note, so the plot and the gap table keep their room
            lines = notes.split("\n")
            room = max(self.size.width - 2, 20)
            cut = [k for k, line in enumerate(lines) if line.cell_len > room]
            for k, line in enumerate(lines):
                line.truncate(room - (13 if cut and k == cut[0] else 0), overflow="ellipsis")
            if cut:  # a note cut before its point says v opens them all in full
                lines[cut[0]].append(" v: all notes", style="bold")
            notes = Text("\n").join(lines)
        head.update(text)
        self._note_lines = notes.plain.count("\n") + 1 if notes.plain else 0
        self.query_one("#coverage-notes", SafeStatic).update(notes)
        self.ledger.loaded(dict(zip((int(i) for i in data["gaps"]["flag_id"]),
                                    (int(v) for v in data["gaps"]["version"]))))
        for fid, state in getattr(self, "_overlay", {}).items():  # own decisions still being written
            if self.ledger.pending.get(fid):
                data["gaps"].loc[data["gaps"]["flag_id"] == fid, "state"] = state
        data["lines"] = format_lines(data["gaps"], GAP_COLUMNS)
        self.marked &= set(int(i) for i in data["gaps"]["flag_id"])
        if self.marked:  # marks survive a reload
            data["gaps"]["mark"] = ["●" if int(i) in self.marked else "" for i in data["gaps"]["flag_id"]]
            data["lines"] = format_lines(data["gaps"], GAP_COLUMNS)
        table.set_data(data["gaps"], GAP_COLUMNS, data["lines"])
        table.focus()
        self._plot()

    def forget(self) -> None:
        self.data = {"run": None}
        self.marked = set()

    def action_notes(self) -> None:
        """v: the run's notes (warnings, intervals, robustness) in full, wrapped and scrollable: at 80x24 each
        is cut to one line (issue 21 item 11: the tail warning lost its point)."""
        run = getattr(self, "data", {}).get("run")
        if run is None:
            self.notify("no coverage run yet: r runs coverage", severity="warning")
            return
        self.app.push_screen(NotesScreen(f"Coverage run #{run['id']} of {self.app.benchmark}: notes",
                                         notes_text(run["metrics"], self.data.get("gaps"))))

    def on_frame_table_highlighted(self, event: FrameTable.Highlighted) -> None:
        if getattr(self, "data", {}).get("run") is not None:
            self._plot()

    def _plot(self) -> None:
        gaps = self.data["gaps"]
        table = self.query_one(FrameTable)
        spans = [(float(lo), float(hi)) for lo, hi in zip(gaps["lo"], gaps["hi"])]
        band = self.data["run"]["metrics"].get("ability_range")
        band = tuple(band) if isinstance(band, list) and len(band) == 2 else None
        # The plot's widget has one column of padding on each side; its height leaves the gap table 5 rows.
        rows = self.size.height - 15 - getattr(self, "_note_lines", 0)
        plot = ecdf_plot(self.data["z"], spans, width=max(self.size.width - 4, 40),
                         height=max(min(rows, 16), 4), selected=table.row, band=band)
        self.query_one("#coverage-plot", SafeStatic).update(plot)

    def action_run_coverage(self) -> None:
        from benchloupe.jobs import ANALYSES
        from benchloupe.tui.jobs_ui import analysis_job

        if "coverage" not in ANALYSES:
            self.notify("the coverage analysis is not available in this build", severity="warning")
            return
        config = ANALYSES["coverage"].config_cls()
        self.app.start_job(f"coverage on {self.app.benchmark}",
                           analysis_job(self.app.db_path, "coverage", self.app.benchmark, config))

    def action_fill(self) -> None:
        table = self.query_one(FrameTable)
        if table.row is None:
            self.notify("no gap selected: run coverage first (r)", severity="warning")
            return
        from benchloupe.tui.screens.benchfill import start_fill_dialog

        start_fill_dialog(self, self.app.benchmark, int(table.frame["rank"].iloc[table.row]))

    def action_decide(self, state: str) -> None:
        """c/d/u/o: decide the selected gap, or every marked gap (space) in one transaction and one undo."""
        table = self.query_one(FrameTable)
        if getattr(self, "data", {}).get("run") is None or table.row is None or not len(table.frame):
            self.notify("no gap selected: run coverage first (r)", severity="warning")
            return
        frame = table.frame
        if self.marked:
            ids = [int(i) for i in frame["flag_id"] if int(i) in self.marked]
            self.marked = set()
        else:
            ids = [int(frame["flag_id"].iloc[table.row])]
        if not self.app.can_write():
            return
        before = dict(zip(frame["flag_id"].astype(int), frame["state"].astype(str)))
        decision = Decision(ids, {fid: (before[fid],) for fid in ids})
        self.ledger.stack.append(decision)
        self._write([(fid, state) for fid in ids], decision)

    def action_mark(self) -> None:
        """space: mark the selected gap for a batch decision (again: unmark) and move down."""
        table = self.query_one(FrameTable)
        if getattr(self, "data", {}).get("run") is None or table.row is None or not len(table.frame):
            return
        fid = int(table.frame["flag_id"].iloc[table.row])
        self.marked ^= {fid}
        table.frame.loc[table.row, "mark"] = "●" if fid in self.marked else ""
        table.update_rows([table.row])
        if fid in self.marked:
            table.cursor = min(table.cursor + 1, len(table.view) - 1)

    def _write(self, changes: list[tuple[int, str]], decision: Decision, *, undo: bool = False) -> None:
        """Show each gap's new state on its row at once, then write them in one transaction on the versions
        shown (audited; ``flag:undo`` when *undo*, expecting what this screen's own write left); refused, naming
        who changed a gap since, when another curator did."""
        from benchloupe.store import curation
        from benchloupe.tui.screens.base import store_write

        table = self.query_one(FrameTable)
        ranks = []
        self._overlay = getattr(self, "_overlay", {})
        for flag_id, state in changes:
            hit = np.flatnonzero(table.frame["flag_id"].to_numpy() == flag_id)
            if hit.size:
                row = int(hit[0])
                table.frame.loc[row, ["state", "mark"]] = [state, ""]
                table.update_rows([row])
                ranks.append(int(table.frame["rank"].iloc[row]))
                self.data["gaps"].loc[self.data["gaps"]["flag_id"] == flag_id, "state"] = state
            self._overlay[flag_id] = state
        what = f"gap {ranks[0]}" if len(changes) == 1 and ranks else f"{len(changes)} gaps"
        state = changes[0][1] if len({s for _f, s in changes}) == 1 else "restored"
        ids = [f for f, _s in changes]
        expect = self.ledger.expect(ids)
        own = self.ledger.own
        run = self.data.get("run") or {}  # a gap is about no cell: its kind and run are what it names
        cells = {f: curation.Cell("gap", run.get("id"), None, None, None) for f in ids}

        def write(conn) -> None:
            if undo and decision.state != "saved":
                self.ledger.finished(ids, None, keep=True)
                self.app.call_from_thread(self._refused, None, "that decision was not saved, so there was "
                                                               "nothing to undo")
                return
            try:
                if undo:
                    versions = {f: own.get(f) if own.get(f) is not None else decision.versions[f] for f in ids}
                else:
                    versions = self.ledger.resolve(expect)
                saved = curation.set_flag_states(conn, [(f, s, None) for f, s in changes], undo=undo,
                                                 expect=versions, undoes=decision.audit_ids if undo else None,
                                                 cells=cells)
            except Exception as exc:
                self.ledger.finished(ids, None)
                if not undo:
                    decision.state = "refused"
                self.app.call_from_thread(self._refused, None if undo else decision, str(exc))
                if not isinstance(exc, curation.StoreError | ChainBroken):
                    raise
                return
            if not undo:
                decision.versions, decision.audit_ids = saved.versions, list(saved.audit_ids.values())
                decision.state = "saved"
            self.ledger.finished(ids, saved.versions)

        store_write(self, write, f"{what}: {'back to ' if undo else ''}{state}{'' if undo else ' (z undo)'}")

    def _refused(self, decision: Decision | None, message: str) -> None:
        if decision is not None and decision in self.ledger.stack:
            self.ledger.stack.remove(decision)
        self.notify(message, title="Refused", severity="error", timeout=10)
        self.reload()

    def action_undo(self) -> None:
        """z: undo the latest decision or batch on this screen (even one still being saved); refused when
        another curator changed one of its gaps since."""
        if not self.app.can_write():
            return
        if not self.ledger.stack:
            self.notify("nothing to undo", severity="warning")
            return
        decision = self.ledger.stack.pop()
        self.query_one(FrameTable).move_to_value("flag_id", decision.ids[0])
        self._write([(fid, decision.before[fid][0]) for fid in decision.ids], decision, undo=True)

    def action_next_open(self) -> None:
        """n: the next gap still open (wrapping round)."""
        table = self.query_one(FrameTable)
        if not len(table.view):
            return
        states = table.frame["state"].to_numpy()[table.view]
        order = np.r_[np.arange(table.cursor + 1, len(table.view)), np.arange(0, table.cursor + 1)]
        hit = order[states[order] == "open"]
        if not hit.size:
            self.notify("every gap is triaged")
            return
        table.cursor = int(hit[0])


class NotesScreen(ModalScreen[None]):
    """A text shown whole in a scrollable dialog; escape, q or v closes it."""

    BINDINGS = [Binding("escape,q,v", "dismiss", "Close", id="notes.close"),
                Binding("j,down", "scroll(1)", "Down", show=False), Binding("k,up", "scroll(-1)", "Up", show=False)]

    def __init__(self, title: str, body: Text) -> None:
        super().__init__()
        self.title_text, self.body = title, body

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog help"):
            yield SafeStatic(Text(self.title_text, style="bold underline"))
            yield SafeStatic(self.body)
            yield SafeStatic(Text("escape closes", style="dim"))

    def action_scroll(self, step: int) -> None:
        scroll = self.query_one(VerticalScroll)
        scroll.scroll_to(y=scroll.scroll_y + step, animate=False)


CHECK_SHORT = {"model_information": "model info", "item_information": "item info",
               "model_inversion_rate": "model inversions", "item_inversion_rate": "item inversions",
               "difficulty_resolution": "resolution", "max_gap_inside_ability_range": "gap in tail"}
CHECK_WORDS = {
    "model_information": ("model information", "model_information", "the items tell the models apart too little"),
    "item_information": ("item information", "item_information", "the models tell the items apart too little"),
    "model_inversion_rate": ("model inversions", "model_inversion_rate",
                             "too often a weaker model beats a stronger one on an item"),
    "item_inversion_rate": ("item inversions", "item_inversion_rate",
                            "too often an easier item is missed where a harder one is solved"),
    "difficulty_resolution": ("difficulty resolution", None,
                              "the widest gap is below what the item count can resolve"),
    "max_gap_inside_ability_range": ("gap inside the ability range", None,
                                     "the widest gap lies in a tail beyond the models' abilities"),
}


def failed_checks(m: dict) -> list[str] | None:
    """The names of the run's failed diagnostic checks (None when the run recorded none)."""
    checks = m.get("diagnostic_checks")
    if not isinstance(checks, dict):
        return None
    return [k for k, ok in checks.items() if not ok]


def _uncertain_widest(m: dict, gaps: pd.DataFrame | None) -> bool:
    """Whether the gap behind ``max_gap_trusted`` has status "uncertain" (its C.6 interval reaches below the
    item spacing): then it is the widest *resolvable* gap, not a trusted one."""
    if gaps is None or not len(gaps) or "status" not in gaps or "width" not in gaps:
        return False
    w = m.get("max_gap_trusted")
    hit = gaps[np.isclose(pd.to_numeric(gaps["width"], errors="coerce"), float(w))] if isinstance(w, float) else []
    return bool(len(hit)) and (hit["status"] == "uncertain").any()


def notes_text(m: dict, gaps: pd.DataFrame | None = None) -> Text:
    """The trust readout of a run: the failed diagnostic checks named with their values, warnings (lattice,
    tail, difficulty source), the max gap's interval, the models' ability range and the robustness summary
    (C.3 leave-one-out, C.5 BIC, prior variants)."""
    text = Text(no_wrap=False)
    failed = failed_checks(m)
    if failed:
        parts = []
        for k in failed:
            name, key, why = CHECK_WORDS.get(k, (k.replace("_", " "), k, ""))
            value = m.get(key) if key else None
            parts.append(name + (f" {value:.3g}" if isinstance(value, float) else "") + (f" ({why})" if why else ""))
        text.append("⚠ diagnostics fail: " + "; ".join(parts) + "\n", style="bold red")
    ci = m.get("max_gap_ci")
    if isinstance(ci, list) and len(ci) == 2 and all(isinstance(x, float) and math.isfinite(x) for x in ci):
        text.append(f"max gap 95% interval {ci[0]:.3f}-{ci[1]:.3f}")
    elif "uncertainty" not in m:  # a run without C.6 draws has no interval to show (never "nan-nan")
        text.append("no C.6 intervals (coverage ran without uncertainty draws)")
    if isinstance(m.get("max_gap_trusted"), float):
        if _uncertain_widest(m, gaps):  # its interval reaches below the spacing: not "trusted"
            text.append(f" · widest resolvable gap {m['max_gap_trusted']:.3f} (uncertain)")
        else:
            text.append(f" · widest trusted gap {m['max_gap_trusted']:.3f}")
    band = m.get("ability_range")
    if isinstance(band, list) and len(band) == 2:
        text.append(f" · ability range {band[0]:.2f}-{band[1]:.2f} (band ▔ under the axis)")
    for w in m.get("warnings", []) or []:
        text.append("\n⚠ " + visible(str(w)), style="bold yellow")
    rob = m.get("robustness")
    if isinstance(rob, dict):
        parts = []
        loo = rob.get("loo")
        if isinstance(loo, dict):
            parts.append(f"LOO ({loo.get('refits')} refits) Spearman min {loo.get('spearman_min', float('nan')):.3f},"
                         f" max gap {loo.get('max_gap_range', ['?', '?'])[0]:.3f}-"
                         f"{loo.get('max_gap_range', ['?', '?'])[1]:.3f}, same place "
                         f"{loo.get('max_gap_same_place', float('nan')):.0%}")
        bic = rob.get("bic")
        if isinstance(bic, dict):
            parts.append(f"BIC selects {visible(str(bic.get('selected')))}")
            if bic.get("warning"):
                text.append("\n⚠ " + visible(str(bic["warning"])), style="bold yellow")
        pri = rob.get("priors")
        if isinstance(pri, dict):
            parts.append(f"prior variants shift DDM by {pri.get('ddm_shift_max', float('nan')):.3f}, max gap by "
                         f"{pri.get('max_gap_shift_max', float('nan')):.3f}")
        if parts:
            text.append("\nrobustness: " + "; ".join(parts))
    return text
