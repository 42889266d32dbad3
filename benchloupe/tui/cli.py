"""The ``benchloupe`` command line: the headless face of every feature, and the door to the terminal UI.

Exit codes a script can rely on: 0 success; 1 bad input or a failed operation (one line on stderr says what,
where and how to fix it); 2 wrong usage (argparse); 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# Single-threaded BLAS unless the user says otherwise: on the 2-core machines measured here, multi-threaded
# OpenBLAS oversubscribed the cores and was slower in every engine benchmark (docs/BENCHMARKS.md). This must
# run before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from benchloupe import __version__  # noqa: E402

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class CliError(Exception):
    """An error already phrased for the user."""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="PATH", default=None,
                   help="database file (default: $BENCHLOUPE_DB or ~/.local/share/benchloupe/benchloupe.db)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")


def db_path(args) -> Path:
    from benchloupe.store.db import default_db_path

    return Path(args.db).expanduser() if getattr(args, "db", None) else default_db_path()


# Commands whose parsers import the engine (their options are the engine's config dataclasses). The others are
# registered alone when none of these is asked for, so `benchloupe open` and `list` start without scipy/torch.
ANALYSIS_COMMANDS = {"fit", "compress", "anomalies", "screen", "bootstrap", "audit", "coverage", "calibrate", "fill",
                     "endpoints", "review"}


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    from benchloupe.tui import commands

    argv = sys.argv[1:] if argv is None else argv
    full = any(a in ANALYSIS_COMMANDS or a in ("-h", "--help") for a in argv)

    parser = argparse.ArgumentParser(
        prog="benchloupe",
        description="A terminal workbench for LLM-benchmark curators: import results, calibrate models and items "
                    "jointly, audit near-tie rankings, measure difficulty coverage and fill gaps with BenchFill. "
                    "Without a command, opens the workbench on the default database.",
    )
    parser.add_argument("--version", action="version", version=f"benchloupe {__version__}")
    _common(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in commands.REGISTRY:
        register(sub, _common)
    if full:
        for register in commands.analysis_commands():
            register(sub, _common)
    return parser


def main(argv: list[str] | None = None) -> int:
    from benchloupe.store.db import StoreError

    # Engine, store and import errors are ValueErrors or StoreErrors phrased for the user (one line).
    job_errors = (ValueError, StoreError)
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.command is None:
        from benchloupe.tui.commands import cmd_open

        args.file = None
        args.func = cmd_open
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"benchloupe: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except job_errors as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"benchloupe: error: {msg}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("benchloupe: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
