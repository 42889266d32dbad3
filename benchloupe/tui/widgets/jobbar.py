"""The job line: what is running, its current stage, a progress bar with an estimate, or the last outcome."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import ProgressBar

from benchloupe.tui.widgets.safe import SafeStatic, Text


@dataclass
class JobState:
    """The app's one background job (a fit, an import, the demo build, a BenchFill session)."""

    title: str = ""
    stage: str = ""
    done: float = 0.0
    total: float | None = None
    running: bool = False
    outcome: str = ""
    failed: bool = False
    started: float = 0.0


class JobBar(Horizontal):
    """One line: ``title · stage`` and a bar while running; ``title: outcome`` afterwards."""

    DEFAULT_CSS = """
    JobBar { height: 1; background: $boost; }
    JobBar > #job-label { width: 1fr; height: 1; }
    JobBar > ProgressBar { width: 34; height: 1; }
    JobBar.-idle > ProgressBar { display: none; }
    JobBar > #job-label.-failed { color: $error; }
    """

    def compose(self) -> ComposeResult:
        yield SafeStatic("", id="job-label", markup=False)
        yield ProgressBar(total=None, show_eta=True, id="job-bar")

    def on_mount(self) -> None:
        self.show_state(self.app.job)

    def show_state(self, job: JobState) -> None:
        label = self.query_one("#job-label", SafeStatic)
        bar = self.query_one(ProgressBar)
        self.set_class(not job.running, "-idle")
        label.set_class(job.failed, "-failed")
        if job.running:
            text = Text(f" {job.title}", style="bold")
            text.append(f" · {job.stage}" if job.stage else " · starting", style="")
            text.append("   x cancels", style="dim")
            bar.update(total=job.total if job.total else None, progress=job.done)
        elif job.title:
            text = Text(f" {job.title}: {job.outcome}")
        else:
            text = Text(" no job running", style="dim")
        label.update(text)
