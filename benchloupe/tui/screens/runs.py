"""Runs: start any registered analysis from a form prefilled with the paper's defaults (the config
dataclass's defaults), follow it on the job line (stage, bar, estimate; x cancels), browse the history with
configs and metrics, and compare two runs (rank correlation, the models that moved)."""

from __future__ import annotations

import json
import re
import sqlite3

import pandas as pd
from textual.app import ComposeResult
from textual.binding import Binding

from benchloupe.tui.screens.base import BenchScreen
from benchloupe.tui.screens.run_forms import analysis_fields, build_config, default_config, form_check
from benchloupe.tui.widgets.dialogs import FormDialog
from benchloupe.tui.widgets.safe import SafeStatic, Text
from benchloupe.tui.widgets.table import Column, FrameTable, fmt_int, format_lines
from benchloupe.words import count

AREA_ORDER = ("calibration", "screening", "anomalies", "compression", "estimation", "coverage", "audit",
              "uncertainty")
ANALYSIS_COLUMNS = [Column("name", "analysis", 13), Column("area", "area", 12), Column("inputs", "needs", 12),
                    Column("title", "what", 90)]
RUN_COLUMNS = [Column("id", "run", 5, fmt_int, right=True), Column("kind", "kind", 13),
               Column("status", "status", 9), Column("created_at", "started", 20),
               Column("summary", "metrics", 100, export=("metrics",))]
MOVED_COLUMNS = [Column("model", "model", 30), Column("rank_a", "rank A", 7, fmt_int, right=True),
                 Column("rank_b", "rank B", 7, fmt_int, right=True),
                 Column("moved", "moved", 6, lambda v: f"{int(v):+d}", right=True)]


_CITATION = re.compile(r"\s*\((?:[^()]*\b(?:paper|Appendix)\b[^()]*|§[^()]*)\)|,?\s*\bAlgorithm \d+\b|^Table \d+\s+")


def plain_title(title: str) -> str:
    """An analysis' title in words, without the paper citation the code keeps ("Residual anomaly candidates
    (paper 000 §4.3)" reads "Residual anomaly candidates"): a curator reads what it does, not where it is from."""
    words = _CITATION.sub("", str(title)).strip(" ,")
    return words[:1].upper() + words[1:] if words else str(title)


def metric_summary(metrics: dict, limit: int = 8) -> str:
    """The first few scalar metrics as ``name=value`` (counts as integers, other numbers to 3 significant digits)."""
    parts = []
    for k, v in metrics.items():
        if isinstance(v, bool) or not isinstance(v, int | float) or v is None:
            continue
        parts.append(f"{k}={v}" if isinstance(v, int) else f"{k}={v:.3g}")
        if len(parts) == limit:
            break
    return " ".join(parts)


class RunsScreen(BenchScreen):
    MODE = "runs"
    BINDINGS = [
        Binding("enter", "select_row", "Start / show run", id="runs.open"),
        Binding("n", "new_run", "Start", id="runs.start"),
        Binding("m", "mark", "Mark", id="runs.mark"),
        Binding("c", "compare", "Compare", id="runs.compare"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.analyses: dict = {}
        self.marked: int | None = None
        self.pending_start: str | None = None

    def compose_body(self) -> ComposeResult:
        yield SafeStatic(Text("Analyses · enter or n starts one with the paper's defaults", style="dim"),
                      classes="status-line")
        yield FrameTable(id="analyses")
        yield SafeStatic("", id="history-title", classes="status-line", markup=False)
        yield FrameTable(id="history")
        yield SafeStatic("", id="run-detail", classes="detail", markup=False)

    def fetch(self, conn: sqlite3.Connection, benchmark: str) -> dict:
        from benchloupe.jobs import ANALYSES
        from benchloupe.store import runs

        listed = sorted(ANALYSES.values(), key=lambda a: AREA_ORDER.index(a.area) if a.area in AREA_ORDER
                        else len(AREA_ORDER))
        an = pd.DataFrame([{"name": a.name, "area": a.area, "inputs": a.inputs, "title": plain_title(a.title)}
                           for a in listed],
                          columns=["name", "area", "inputs", "title"])
        hist = runs.list_runs(conn, benchmark)
        hist["summary"] = [metric_summary(json.loads(m)) if s == "done" else (e or "")
                           for m, s, e in zip(hist["metrics"], hist["status"], hist["error"])]
        return {"analyses": dict(ANALYSES), "an": an, "an_lines": format_lines(an, ANALYSIS_COLUMNS),
                "hist": hist, "hist_lines": format_lines(hist, RUN_COLUMNS)}

    def show(self, data: dict) -> None:
        self.analyses = data["analyses"]
        an = self.query_one("#analyses", FrameTable)
        an.set_data(data["an"], ANALYSIS_COLUMNS, data["an_lines"], keep_key="name")
        hist = self.query_one("#history", FrameTable)
        hist.set_data(data["hist"], RUN_COLUMNS, data["hist_lines"], dim=(data["hist"]["status"] != "done").to_numpy(),
                      keep_key="id")
        title = Text(f"History of {self.app.benchmark}: {count(len(data['hist']), 'run')}", style="bold")
        title.append("  enter shows a run · m marks it · c compares the mark with the highlighted run", style="dim")
        if self.marked is not None:
            title.append(f"  (marked #{self.marked})", style="bold yellow")
        self.query_one("#history-title", SafeStatic).update(title)
        if not data["an"].empty and self.focused is None:
            an.focus()
        self._detail()
        if self.pending_start:
            name, self.pending_start = self.pending_start, None
            self.start_analysis(name)

    def export_table(self) -> tuple[pd.DataFrame, str]:
        """w: this benchmark's runs as the history table shows them (the analyses above are the catalogue)."""
        return self.query_one("#history", FrameTable).export_frame(), "runs"

    def start_analysis(self, name: str) -> None:
        """Open the form of analysis *name* (after the screen has loaded, if it has not yet)."""
        if not self.analyses:
            self.pending_start = name
            return
        if self.query_one("#analyses", FrameTable).move_to_value("name", name):
            self.action_new_run()

    def on_frame_table_highlighted(self, event: FrameTable.Highlighted) -> None:
        if event.table.id == "history":
            self._detail()

    def on_frame_table_selected(self, event: FrameTable.Selected) -> None:
        if event.table.id == "analyses":
            self.action_new_run()
        else:
            self._detail(full=True)

    def _detail(self, full: bool = False) -> None:
        hist = self.query_one("#history", FrameTable)
        box = self.query_one("#run-detail", SafeStatic)
        if hist.row is None:
            box.update(Text("no runs yet for this benchmark", style="dim"))
            return
        r = hist.frame.iloc[hist.row]
        analysis = self.analyses.get(r["kind"])
        text = Text(f"run #{r['id']}: {plain_title(analysis.title) if analysis else r['kind']} · {r['status']}",
                    style="bold")
        text.append(f" · seed {r['seed']} · {r['created_at']} → {r['finished_at'] or '…'}\n")
        if r["error"]:
            text.append(f"error: {r['error']}\n", style="red")
        verdict = json.loads(r["metrics"] or "{}").get("split_verdict")
        if verdict:  # a near-tie run's owner-split stability (issue 22), before the metrics cut at 300 characters
            text.append("split stability: ", style="bold")
            text.append(f"{verdict}\n")
        for label, blob in (("config", r["config"]), ("metrics", r["metrics"]), ("timings", r["timings"])):
            d = json.loads(blob)
            shown = ", ".join(f"{k}={_short(v)}" for k, v in d.items())
            text.append(f"{label}: ", style="bold")
            text.append((shown if full else shown[:300]) + "\n")
        box.update(text)

    def action_new_run(self) -> None:
        an = self.query_one("#analyses", FrameTable)
        name = an.current_value("name")
        if name is None or name not in self.analyses:
            self.notify("no analysis selected (none is registered yet?)", severity="warning")
            return
        analysis = self.analyses[name]
        config = default_config(analysis)
        bench = self.app.benchmark

        def submit(values: dict | None) -> None:
            if values is None:
                return
            try:
                conf = build_config(config, values)
            except Exception as exc:  # noqa: BLE001 - the config's own validation message (the form checked it)
                self.app.report_error(exc, f"{name} config")
                return
            from benchloupe.tui.jobs_ui import analysis_job

            target = values["benchmark"] or bench
            if target != self.app.benchmark:
                self.app.benchmark = target
                self.query_one("TopBar").refresh_bar()
            self.app.start_job(f"{name} on {target}",
                               analysis_job(self.app.db_path, name, target, conf, values.get("arena"),
                                            values.get("reward_model")))

        self.app.push_screen(FormDialog(f"Start {name}: {plain_title(analysis.title)}",
                                        analysis_fields(analysis, config, bench or ""),
                                        note="Defaults are the paper's; only the fields of the chosen method "
                                             "are shown.", check=form_check(config, self.app.db_path)), submit)

    def action_mark(self) -> None:
        hist = self.query_one("#history", FrameTable)
        run_id = hist.current_value("id")
        if run_id is not None:
            self.marked = int(run_id)
            self.notify(f"run #{self.marked} marked; move to another run and press c to compare", markup=False)

    def action_compare(self) -> None:
        hist = self.query_one("#history", FrameTable)
        run_id = hist.current_value("id")
        if self.marked is None or run_id is None or int(run_id) == self.marked:
            self.notify("mark one run with m, then highlight another and press c", severity="warning")
            return
        self.app.push_screen(CompareScreen(self.marked, int(run_id)))


def _short(v) -> str:
    """A config or metric value in a run's detail: numbers to 4 digits, long lists and dicts as a count, text
    without the paper citations the jobs record beside it (it reads "1PL MAP fit of this benchmark")."""
    if isinstance(v, str):
        return plain_title(v) if _CITATION.search(v) else v
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list | dict) and len(str(v)) > 40:
        return f"<{type(v).__name__} of {len(v)}>"
    return str(v)


class CompareScreen(BenchScreen):
    """Two runs' rankings: correlation and the models that moved most."""

    MODE = "runs"
    HELP_TITLE = "the run comparison"
    BINDINGS = [Binding("escape", "app.pop_screen", "Back", id="compare.back")]

    def __init__(self, run_a: int, run_b: int) -> None:
        super().__init__()
        self.run_a, self.run_b = run_a, run_b

    def compose_body(self) -> ComposeResult:
        yield SafeStatic(Text(f"comparing run #{self.run_a} with #{self.run_b}…", style="dim"), id="compare-head",
                     markup=False)
        yield FrameTable(id="moved")

    def fetch(self, conn: sqlite3.Connection, benchmark: str) -> dict:
        from benchloupe.store import runs, views

        out = views.compare_runs(conn, self.run_a, self.run_b)
        out["kinds"] = (runs.get_run(conn, self.run_a) or {}).get("kind"), (runs.get_run(conn, self.run_b) or {}).get("kind")
        out["lines"] = format_lines(out["moved"], MOVED_COLUMNS)
        return out

    def show(self, d: dict) -> None:
        text = Text(f"A = run #{d['run_a']} ({d['kinds'][0]})   B = run #{d['run_b']} ({d['kinds'][1]})\n",
                    style="bold")
        text.append(f"{count(d['common'], 'model')} in both ({d['models_a']} in A, {d['models_b']} in B)")
        if d["spearman"] is not None:
            text.append(f" · Spearman {d['spearman']:.3f} · Kendall {d['kendall']:.3f}", style="bold")
            moved = d["moved"]
            n = int((moved["moved"] != 0).sum())
            text.append(f" · {count(n, 'model')} changed rank")
        else:
            text.append(" · fewer than two common models: nothing to correlate", style="yellow")
        self.query_one("#compare-head", SafeStatic).update(text)
        table = self.query_one(FrameTable)
        table.set_data(d["moved"], MOVED_COLUMNS, d["lines"])
        table.focus()
