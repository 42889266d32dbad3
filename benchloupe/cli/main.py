"""The ``benchloupe`` parser and dispatcher: the headless face of every feature, and the door to the terminal UI.

Exit codes a script can rely on: 0 success; 1 bad input or a failed operation (one line on stderr says what,
where and how to fix it); 2 wrong usage (argparse); 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys

# Single-threaded BLAS unless the user says otherwise: on the 2-core machines measured here, multi-threaded
# OpenBLAS oversubscribed the cores and was slower in every engine benchmark (docs/BENCHMARKS.md). This must
# run before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from benchloupe import __version__  # noqa: E402
from benchloupe.cli.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, CliError  # noqa: E402


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="PATH", default=None,
                   help="database file (default: $BENCHLOUPE_DB or ~/.local/share/benchloupe/benchloupe.db)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")


class _Listed(Exception):
    """Raised by :class:`_ListingOnly` once a command's name and help are registered."""


class _ListingOnly:
    """Subparsers proxy for the analysis commands: a command named on the command line is registered whole; any
    other gets its name and one-line help only, and its registrar stops before it imports the engine (whose config
    dataclasses define the options). So ``--help``, ``list`` and ``import`` never load scipy or the engine."""

    def __init__(self, sub, named: set[str]):
        self.sub, self.named = sub, named

    def add_parser(self, name: str, **kw):
        if name in self.named:
            return self.sub.add_parser(name, **kw)
        self.sub.add_parser(name, help=kw.get("help"))
        raise _Listed


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    from benchloupe.cli import curation, transfer, workspace

    argv = sys.argv[1:] if argv is None else argv

    parser = argparse.ArgumentParser(
        prog="benchloupe",
        description="A terminal workbench for LLM-benchmark curators: import results, calibrate models and items "
                    "jointly, audit near-tie rankings, measure difficulty coverage and fill gaps with BenchFill. "
                    "Without a command, opens the workbench on the default database.",
    )
    parser.add_argument("--version", action="version", version=f"benchloupe {__version__}")
    _common(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in workspace.REGISTRY + transfer.REGISTRY + curation.REGISTRY:
        register(sub, _common)
    analysis = _ListingOnly(sub, set(argv))
    for register in analysis_commands():
        try:
            register(analysis, _common)
        except _Listed:
            pass
    return parser


def analysis_commands() -> list:
    """Registrars of the commands whose options come from the engine's config dataclasses (imported on demand)."""
    from benchloupe.cli import audit, calibration, coverage, fill

    return [calibration.register_fit, calibration.register_compress, calibration.register_anomalies,
            calibration.register_screen, calibration.register_bootstrap, calibration.register_evaluate,
            calibration.register_contamination, audit.register_audit,
            coverage.register_coverage, coverage.register_calibrate, fill.register_endpoints, fill.register_fill,
            fill.register_review]


def main(argv: list[str] | None = None) -> int:
    from benchloupe.store.db import StoreError

    # Engine, store and import errors are ValueErrors or StoreErrors phrased for the user (one line).
    job_errors = (ValueError, StoreError)
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.command is None:
        from benchloupe.cli.workspace import cmd_open

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
