"""``benchloupe report BENCHMARK``: one file a curator can attach, with the figures and tables of every analysis
(issue 35). The work is :mod:`benchloupe.report`, imported when the command runs: the parser and ``--help`` load
neither it nor matplotlib."""

from __future__ import annotations

from pathlib import Path

from benchloupe.cli.errors import db_path
from benchloupe.cli.options import StderrProgress
from benchloupe.cli.output import print_json


def cmd_report(args) -> int:
    from benchloupe.report.build import default_output, make_report
    from benchloupe.store import actor

    out = Path(args.output) if args.output else default_output(args.format)
    done = make_report(db_path(args), args.benchmark, out, fmt=args.format, curator=actor.current(),
                       progress=StderrProgress("report", quiet=args.json))
    if args.json:
        print_json({"path": str(done.path), "files": [str(p) for p in done.files], "bytes": done.bytes,
                    "figures": done.figures, "missing": done.missing})
        return 0
    print(f"report written to {done.path} ({done.figures} figures, {done.bytes / 1e3:,.0f} kB"
          + (f", {len(done.files)} files" if len(done.files) > 1 else "") + ")")
    for line in done.missing:
        print(f"  {line}")
    return 0


def register_report(sub, common) -> None:
    p = sub.add_parser("report", help="one self-contained HTML file (or Markdown with figures) of every analysis of "
                                      "a benchmark, to attach or share")
    common(p)
    p.add_argument("benchmark", help="the benchmark to report on")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="where to write: an HTML file (default report.html), or with --format md a folder "
                        "(default report/) that gets report.md with its figures (SVG) and numbers (CSV)")
    p.add_argument("--format", choices=("html", "md"), default="html",
                   help="html: one file with inline SVG, no network, no JavaScript (default); md: Markdown with "
                        "relative image links")
    p.set_defaults(func=cmd_report)


REGISTRY = [register_report]
