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


def build_parser() -> argparse.ArgumentParser:
    from benchloupe.tui import commands

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
    return parser


def main(argv: list[str] | None = None) -> int:
    from benchloupe.engine.jobs import JobError

    parser = build_parser()
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
    except JobError as exc:
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
