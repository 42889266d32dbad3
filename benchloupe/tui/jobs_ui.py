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
        return {"message": f"session #{sid}: {s['pending']} proposals to review on 8 Fill", "session": sid}
    reason = str(s.get("message") or "no reason recorded").strip()
    raise SessionEnded(f"session #{sid} ended {state_word(s['state'])}: {reason}")


def format_names() -> list[str]:
    from benchloupe.store.importers.detect import FORMATS

    return sorted(FORMATS)


# ------------------------------------------------------------------------------------ run in the child

def run_demo(progress: Progress, cancel: threading.Event, db_path: str) -> dict:
    from benchloupe.jobs import build_demo

    progress(0, 1, "simulating the demo workspace")
    info = build_demo(db_path)
    progress(1, 1, "written")
    if info.get("created"):
        return {"message": f"demo workspace written: {', '.join(info['benchmarks'])}", **info}
    return info


def run_import(progress: Progress, cancel: threading.Event, db_path: str, path: str, fmt: str | None = None,
               benchmark: str | None = None) -> dict:
    from benchloupe.jobs import import_file

    progress(0, 1, f"parsing {Path(path).name}")
    summary = import_file(db_path, path, fmt, benchmark=benchmark)
    progress(1, 1, "written")
    d = summary.as_dict()
    counts = ", ".join(f"{v} {k}" for k, v in d.items()
                       if isinstance(v, int) and not isinstance(v, bool) and v and k != "benchmark_id")
    return {"message": f"imported into {d.get('benchmark', '?')}: {counts}", **d}


def run_analysis(progress: Progress, cancel: threading.Event, db_path: str, name: str, benchmark: str,
                 config: object, arena: str | None = None) -> int:
    from benchloupe.jobs import ANALYSES

    return ANALYSES[name].run(db_path, benchmark, config, arena=arena, progress=progress, cancel=cancel)


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


def import_job(db_path: Path, path: str, fmt: str | None = None, benchmark: str | None = None) -> JobSpec:
    return JobSpec(run_import, (str(db_path), str(path), fmt, benchmark))


def analysis_job(db_path: Path, name: str, benchmark: str, config: object, arena: str | None = None) -> JobSpec:
    return JobSpec(run_analysis, (str(db_path), name, benchmark, config, arena))


def fill_job(db_path: Path, benchmark: str, options: object, config: object) -> JobSpec:
    """A new BenchFill session (``jobs.fill.FillOptions``, ``BenchFillConfig``)."""
    return JobSpec(run_fill, (str(db_path), benchmark, options, config))


def resume_job(db_path: Path, session_id: int) -> JobSpec:
    return JobSpec(run_resume, (str(db_path), int(session_id)))
