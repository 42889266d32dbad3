"""The job line: what is running, its current stage, a progress bar with an estimate of the time left (from completed
work: :mod:`benchloupe.tui.pace`, not the bar's own), or the last outcome."""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import ProgressBar

from benchloupe.tui.pace import Pace, fmt_left
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
    pace: Pace = field(default_factory=Pace)  # the estimate shown, from completed calls (benchloupe.tui.pace)


NARROW = 100  # below this many columns the bar is short and has no estimate: the label keeps the counts


class JobBar(Horizontal):
    """One line: ``title · stage`` and a bar while running; ``title: outcome`` afterwards. The stage (a
    BenchFill session's "183 of 6,160 LLM calls") is never the part cut: at 80 columns the bar shrinks and
    the title is cut in the middle first (issue 21 item 11: the counts were cut off)."""

    DEFAULT_CSS = """
    JobBar { height: 1; background: $boost; }
    JobBar > #job-label { width: 1fr; height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
    JobBar > ProgressBar { width: 38; height: 1; }
    JobBar Bar { width: 22; }
    JobBar.-narrow > ProgressBar { width: 16; }
    JobBar.-narrow Bar { width: 10; }
    JobBar.-idle > ProgressBar { display: none; }
    JobBar > #job-label.-failed { color: $error; }
    """

    def compose(self) -> ComposeResult:
        yield SafeStatic("", id="job-label", markup=False)
        yield ProgressBar(total=None, show_eta=False, id="job-bar")

    def on_mount(self) -> None:
        self.show_state(self.app.job)

    def on_resize(self) -> None:
        self.show_state(self.app.job)

    def show_state(self, job: JobState) -> None:
        from benchloupe.tui.widgets.table import middle_cut

        label = self.query_one("#job-label", SafeStatic)
        bar = self.query_one(ProgressBar)
        width = self.size.width or self.app.size.width
        self.set_class(width < NARROW, "-narrow")
        self.set_class(not job.running, "-idle")
        label.set_class(job.failed, "-failed")
        if job.running:
            stage = f" · {job.stage}" if job.stage else " · starting"
            room = (label.size.width or width - (16 if width < NARROW else 38)) - 1 - len(stage)
            title = middle_cut(job.title, max(room, 12))
            text = Text(f" {title}", style="bold")
            text.append(stage, style="")
            if width >= NARROW:
                left = fmt_left(job.pace.left())
                if left:
                    text.append(f" · {left}")
                text.append("   x cancels", style="dim")
            bar.update(total=job.total if job.total else None, progress=job.done)
        elif job.title:
            text = Text(f" {job.title}: {job.outcome}")
        else:
            text = Text(" no job running", style="dim")
        label.update(text)
