"""The background jobs the screens start, as :class:`JobSpec` for ``BenchloupeApp.start_job``.

A job runs in a child process (jobs/process.py), so each one is a module-level function
``fn(progress, cancel, *plain arguments)`` plus a builder that packs the arguments; the function only calls
:mod:`benchloupe.jobs` (which opens its own connection to the database *path*) and returns something the job
line can summarise: a run id, or a dict with a ``message``. Nothing here imports Textual: the child does not
load the UI.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from benchloupe.jobs.process import JobSpec
from benchloupe.words import count

Progress = Callable[[float, float, str], None]

STATE_WORDS = {"running": "running", "proposed": "proposals ready", "no_valid_child": "no valid proposal",
               "failed": "failed", "cancelled": "cancelled", "interrupted": "interrupted"}


def state_word(state: object) -> str:
    """A session's state in words (``no_valid_child`` reads "no valid proposal")."""
    return STATE_WORDS.get(str(state), str(state).replace("_", " "))


class SessionEnded(Exception):
    """A BenchFill session stopped without proposals to review (failed, no valid child, cancelled)."""


def session_outcome(db, sid: int) -> dict:
    """What the job line says when a session's search returns: its proposals, or why there are none (the job
    then fails with the session's own reason instead of saying it finished)."""
    from benchloupe.jobs import fill as jobs_fill

    s = jobs_fill.session_summary(db, sid)
    if s["state"] == "proposed":
        return {"message": f"session #{sid}: {count(s['pending'], 'proposal')} to review on 8 Fill", "session": sid}
    reason = str(s.get("message") or "no reason recorded").strip()
    raise SessionEnded(f"session #{sid} ended {state_word(s['state'])}: {reason}")


# ------------------------------------------------------------------------------------ run in the child

MAX_MODELS_SHOWN = 8  # per benchmark in the notification (metabench has 4,280); the CLI lists them all


def run_demo(progress: Progress, cancel: threading.Event, db_path: str) -> dict:
    """The demo as ``benchloupe demo`` builds it: the simulated data, then its showcase analyses (fits,
    anomalies, coverage, the near-tie audit), so every screen has something to show (issue 21 item 5: the
    app built it bare)."""
    from benchloupe.hints import render
    from benchloupe.jobs import build_demo
    from benchloupe.tui.wording import label

    progress(0, 1, "simulating the demo workspace")
    info = build_demo(db_path, analyses=True, progress=progress, cancel=cancel)
    progress(1, 1, "written")
    if info.get("created"):
        return {"message": f"demo workspace written with its analyses run: {', '.join(info['benchmarks'])}", **info}
    return {**info, "message": render(info["message"], label)}


def run_import(progress: Progress, cancel: threading.Event, db_path: str, paths: list[str], fmt: str | None = None,
               options: dict | None = None) -> dict:
    """Import *paths* (files, folders, globs: as ``benchloupe import``) in one transaction with the import
    options *options* (parser keywords plus ``benchmark`` and ``replace``; plain data). The result's
    ``message`` is one line for the job line, ``summary`` the per-benchmark and per-model lines."""
    from benchloupe.jobs.imports import import_paths, summary_lines

    def parsing(n: int, total: int, label: str) -> None:
        progress(n - 1, total, f"parsing {Path(label).name}")

    summary = import_paths(db_path, list(paths), fmt, progress=parsing, **dict(options or {}))
    progress(1, 1, "written")
    lines = summary_lines(summary, max_models=MAX_MODELS_SHOWN)
    return {"message": lines[0], "summary": "\n".join(lines), **summary.as_dict()}


def run_analysis(progress: Progress, cancel: threading.Event, db_path: str, name: str, benchmark: str,
                 config: object, arena: str | None = None, reward_model: str | None = None) -> int:
    from benchloupe.jobs import ANALYSES
    from benchloupe.jobs.workers import for_database, using

    extra = {"reward_model": reward_model} if reward_model else {}
    with using(for_database(db_path)):  # the workbench's replicate-workers setting (issue 36)
        return ANALYSES[name].run(db_path, benchmark, config, arena=arena, progress=progress, cancel=cancel,
                                  **extra)


def run_report(progress: Progress, cancel: threading.Event, db_path: str, benchmark: str, output: str,
               fmt: str) -> dict:
    """``benchloupe report``: the report of *benchmark* written to *output* (matplotlib loads in this child only)."""
    from benchloupe.report.build import make_report
    from benchloupe.store import actor

    done = make_report(db_path, benchmark, Path(output), fmt=fmt, curator=actor.current(), progress=progress,
                       cancel=cancel)
    missing = f"; {count(len(done.missing), 'analysis', 'analyses')} without a run" if done.missing else ""
    return {"message": f"report written to {done.path} ({count(done.figures, 'figure')}, "
                       f"{done.bytes / 1e3:,.0f} kB){missing}", "path": str(done.path)}


def run_fill(progress: Progress, cancel: threading.Event, db_path: str, benchmark: str, options: object,
             config: object) -> dict:
    from benchloupe.jobs import fill as jobs_fill

    sid = jobs_fill.start_fill(db_path, benchmark, options, config=config, progress=progress, cancel=cancel)
    return session_outcome(db_path, sid)


def run_resume(progress: Progress, cancel: threading.Event, db_path: str, session_id: int) -> dict:
    from benchloupe.jobs import fill as jobs_fill

    return session_outcome(db_path, jobs_fill.resume_fill(db_path, session_id, progress=progress, cancel=cancel))


# ------------------------------------------------------------------------------------ the builders

def demo_job(db_path: Path) -> JobSpec:
    return JobSpec(run_demo, (str(db_path),))


def import_job(db_path: Path, paths: list[str], fmt: str | None = None, options: dict | None = None) -> JobSpec:
    return JobSpec(run_import, (str(db_path), [str(x) for x in paths], fmt, dict(options or {})))


def analysis_job(db_path: Path, name: str, benchmark: str, config: object, arena: str | None = None,
                 reward_model: str | None = None) -> JobSpec:
    return JobSpec(run_analysis, (str(db_path), name, benchmark, config, arena, reward_model))


def report_job(db_path: Path, benchmark: str, output: str, fmt: str) -> JobSpec:
    return JobSpec(run_report, (str(db_path), benchmark, str(output), fmt))


def fill_job(db_path: Path, benchmark: str, options: object, config: object) -> JobSpec:
    """A new BenchFill session (``jobs.fill.FillOptions``, ``BenchFillConfig``)."""
    return JobSpec(run_fill, (str(db_path), benchmark, options, config))


def resume_job(db_path: Path, session_id: int) -> JobSpec:
    return JobSpec(run_resume, (str(db_path), int(session_id)))
