"""Make a whole report: check where it goes, read every section from the store, render, write atomically.

The output is checked before anything is read (an existing folder for an HTML file, a missing or unwritable
folder, a file where the Markdown folder should be: one line each, :class:`ReportError`). The HTML file is
written under a temporary name beside it and renamed into place; the Markdown folder gets its files the same way.
The database is only read.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchloupe.store.atomic import replace_file
from benchloupe.store.db import connect

from . import FORMATS, html, markdown, sections, sections_more
from .gather import Context

SECTIONS = (("overview", sections.overview), ("calibration", sections.calibration), ("items", sections.items),
            ("compression", sections.compression), ("anomalies", sections_more.anomalies),
            ("neartie", sections_more.neartie), ("coverage", sections_more.coverage),
            ("decisions", sections_more.decisions))


class ReportError(ValueError):
    """A report that cannot be made, phrased for the user (one line)."""


@dataclass
class Written:
    path: Path  # the HTML file, or the Markdown file inside its folder
    files: list[Path]
    bytes: int
    figures: int
    missing: list[str]


def default_output(fmt: str, benchmark: str | None = None) -> Path:
    """``report.html`` (``report/`` for md), or named after *benchmark* (``demo-chem-report.html``) with every
    character that is not a letter, digit, dot, dash or underscore as a dash."""
    import re

    stem = "report" if benchmark is None else (re.sub(r"[^A-Za-z0-9._-]+", "-", benchmark).strip("-.") or "benchmark") + "-report"
    return Path(f"{stem}.html" if fmt == "html" else stem)


def check_output(out: Path, fmt: str) -> None:
    """Refuse an output the report cannot be written to, before any work."""
    if fmt not in FORMATS:
        raise ReportError(f"--format {fmt}: must be one of {', '.join(FORMATS)}")
    if fmt == "html":
        if out.is_dir():
            raise ReportError(f"{out}: is a folder; give the HTML report a file name (-o {out / 'report.html'}) "
                              "or use --format md to write a folder")
        folder = out.parent if str(out.parent) else Path(".")
    else:
        if out.exists() and not out.is_dir():
            raise ReportError(f"{out}: exists and is not a folder; --format md writes a folder (report.md with its "
                              "figures beside it): give a folder with -o")
        folder = out if out.is_dir() else out.parent
    if not folder.is_dir():
        raise ReportError(f"{folder}: no such folder; create it or give -o a path in an existing folder")
    if not os.access(folder, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise ReportError(f"{out if out.exists() else folder}: not writable; give -o a path you can write")


def make_report(db_path, benchmark: str, out: Path | None = None, *, fmt: str = "html", curator: str = "",
                progress: Callable[[float, float, str], None] | None = None,
                cancel: threading.Event | None = None) -> Written:
    """The report of *benchmark* in the database at *db_path*, written to *out*."""
    out = Path(out) if out is not None else default_output(fmt)
    check_output(out, fmt)
    progress = progress or (lambda done, total, message: None)
    total = len(SECTIONS) + 2
    conn = connect(db_path, create=False)
    try:
        ctx = Context.open(conn, str(db_path), benchmark)
        done: list = []
        for n, (name, build) in enumerate(SECTIONS):
            if cancel is not None and cancel.is_set():
                raise KeyboardInterrupt
            progress(n, total, f"report of {benchmark}: {name}")
            done.append(build(ctx))
        progress(len(SECTIONS), total, f"report of {benchmark}: provenance")
        done.append(sections_more.provenance(ctx, curator))
    finally:
        conn.close()
    progress(len(SECTIONS) + 1, total, f"report of {benchmark}: writing {out}")
    title = f"benchloupe report: {benchmark}"
    figures = sum(1 for s in done for b in s.blocks if hasattr(b, "svg"))
    missing = [m for s in done for m in s.missing]
    if fmt == "html":
        text = html.render(title, done).encode("utf-8")
        _write(out, text)
        written = Written(out, [out], len(text), figures, missing)
    else:
        md, files = markdown.render(title, done)
        out.mkdir(exist_ok=True)
        paths = []
        for name, body in {**files, "report.md": md}.items():
            _write(out / name, body.encode("utf-8"))
            paths.append(out / name)
        written = Written(out / "report.md", paths, sum(p.stat().st_size for p in paths), figures, missing)
    progress(total, total, f"report of {benchmark}: written")
    return written


def _write(path: Path, data: bytes) -> None:
    replace_file(path, data, prefix=f".{path.name}.", shared=True)
