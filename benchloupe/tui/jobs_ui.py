"""Background jobs the screens start, as ``fn(progress, cancel)`` closures for ``BenchloupeApp.start_job``.

Each one only calls :mod:`benchloupe.jobs` (which opens its own connection in the worker thread)
and returns something the job line can summarise: a run id, or a dict with a ``message``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

Progress = Callable[[float, float, str], None]
JobFn = Callable[[Progress, threading.Event], object]


def demo_job(db_path: Path) -> JobFn:
    def run(progress: Progress, cancel: threading.Event) -> dict:
        from benchloupe.hints import render
        from benchloupe.jobs import build_demo
        from benchloupe.tui.wording import label

        progress(0, 1, "simulating the demo workspace")
        info = build_demo(db_path)
        progress(1, 1, "written")
        if info.get("created"):
            return {"message": f"demo workspace written: {', '.join(info['benchmarks'])}", **info}
        return {**info, "message": render(info["message"], label)}
    return run


def import_job(db_path: Path, paths: list[str], fmt: str | None = None, options: dict | None = None) -> JobFn:
    """Import *paths* (files, folders, globs: as ``benchloupe import``) in one transaction with the import
    options *options* (parser keywords plus ``benchmark`` and ``replace``; plain data). The result's
    ``message`` is one line for the job line, ``summary`` the per-benchmark and per-model lines."""
    options = dict(options or {})

    def run(progress: Progress, cancel: threading.Event) -> dict:
        from benchloupe.jobs.imports import import_paths, summary_lines

        def parsing(n: int, total: int, label: str) -> None:
            progress(n - 1, total, f"parsing {Path(label).name}")

        summary = import_paths(db_path, list(paths), fmt, progress=parsing, **options)
        progress(1, 1, "written")
        lines = summary_lines(summary, max_models=MAX_MODELS_SHOWN)
        return {"message": lines[0], "summary": "\n".join(lines), **summary.as_dict()}
    return run


MAX_MODELS_SHOWN = 8  # per benchmark in the notification (metabench has 4,280); the CLI lists them all


def analysis_job(db_path: Path, name: str, benchmark: str, config: object, arena: str | None = None,
                 reward_model: str | None = None) -> JobFn:
    def run(progress: Progress, cancel: threading.Event) -> int:
        from benchloupe.jobs import ANALYSES

        extra = {"reward_model": reward_model} if reward_model else {}
        return ANALYSES[name].run(db_path, benchmark, config, arena=arena, progress=progress, cancel=cancel, **extra)
    return run
