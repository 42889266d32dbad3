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


def format_names() -> list[str]:
    from benchloupe.store.importers.detect import FORMATS

    return sorted(FORMATS)


def demo_job(db_path: Path) -> JobFn:
    def run(progress: Progress, cancel: threading.Event) -> dict:
        from benchloupe.jobs import build_demo

        progress(0, 1, "simulating the demo workspace")
        info = build_demo(db_path)
        progress(1, 1, "written")
        if info.get("created"):
            return {"message": f"demo workspace written: {', '.join(info['benchmarks'])}", **info}
        return info
    return run


def import_job(db_path: Path, path: str, fmt: str | None = None, benchmark: str | None = None) -> JobFn:
    def run(progress: Progress, cancel: threading.Event) -> dict:
        from benchloupe.jobs import import_file

        progress(0, 1, f"parsing {Path(path).name}")
        summary = import_file(db_path, path, fmt, benchmark=benchmark)
        progress(1, 1, "written")
        d = summary.as_dict()
        counts = ", ".join(f"{v} {k}" for k, v in d.items() if isinstance(v, int) and not isinstance(v, bool) and v and k != "benchmark_id")
        return {"message": f"imported into {d.get('benchmark', '?')}: {counts}", **d}
    return run


def analysis_job(db_path: Path, name: str, benchmark: str, config: object, arena: str | None = None) -> JobFn:
    def run(progress: Progress, cancel: threading.Event) -> int:
        from benchloupe.jobs import ANALYSES

        return ANALYSES[name].run(db_path, benchmark, config, arena=arena, progress=progress, cancel=cancel)
    return run
