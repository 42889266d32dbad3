"""The ``benchloupe`` parser and dispatcher: the headless face of every feature, and the door to the terminal UI.

Exit codes a script can rely on: 0 success; 1 bad input or a failed operation (one line on stderr says what,
where and how to fix it); 2 wrong usage (one line too); 130 interrupted (Ctrl-C or SIGTERM, from the first
instruction on: :mod:`benchloupe.interrupt`).
"""

from __future__ import annotations

import os
import sys

from benchloupe import interrupt

interrupt.install()  # before anything else of the command line is imported (issue 24, defect 8)

import argparse  # noqa: E402
import contextlib  # noqa: E402

# Single-threaded BLAS unless the user says otherwise: on the 2-core machines measured here, multi-threaded
# OpenBLAS oversubscribed the cores and was slower in every engine benchmark (docs/BENCHMARKS.md). This must
# run before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# No MADV_HUGEPAGE on numpy's large arrays unless the user asks for it (NUMPY_MADVISE_HUGEPAGE=1): where the
# kernel's transparent-hugepage defrag is "madvise" (the common default) and no huge page is free, every first
# touch of such an array stalls in synchronous compaction (numpy/numpy#31590). Measured here (issue 26): the first
# fill of a 70 MB array 0.28 s with it, 0.06 s without; the 5,000 x 14,000 static fit's process 0.5-0.7 s of system
# time with it, 0.35-0.4 s without. Also read by numpy at its first import only.
os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")

from benchloupe import __version__  # noqa: E402
from benchloupe.cli.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CliError, UsageError  # noqa: E402


def _global_options(p: argparse.ArgumentParser, default) -> None:
    p.add_argument("--db", metavar="PATH", default=default(None),
                   help="database file (default: $BENCHLOUPE_DB or ~/.local/share/benchloupe/benchloupe.db)")
    p.add_argument("--json", action="store_true", default=default(False), help="machine-readable JSON on stdout")
    p.add_argument("--debug", action="store_true", default=default(False),
                   help="print the full traceback of an unexpected error on stderr")
    p.add_argument("--as", dest="actor", metavar="NAME", default=default(None),
                   help="the curator's name recorded on every decision, note, acceptance and import (default: "
                        "$BENCHLOUPE_USER, else the login name)")


def _top_options(p: argparse.ArgumentParser) -> None:
    _global_options(p, lambda value: value)


def _common(p: argparse.ArgumentParser) -> None:
    """The global options again on every command, so ``benchloupe --db X list`` and ``benchloupe list --db X``
    mean the same. The command's copy has no default (SUPPRESS): argparse would otherwise overwrite the value
    given before the command with the subparser's default."""
    _global_options(p, lambda value: argparse.SUPPRESS)


class Parser(argparse.ArgumentParser):
    """argparse with a usage error on one line (what is wrong, and where the options are listed) instead of the
    whole usage block before it: exit 2, like argparse. A value such as ``-inf``, ``-1e309``, ``-2.5e-3`` or
    ``-1,2`` is a negative number (list), not an unknown option (argparse's own rule knows only ``-12`` and ``-1.5``), so that it
    reaches the option's range check."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        import re

        number = r"(\d[\d_]*\.?\d*|\.\d+)([eE][-+]?\d+)?|inf|infinity|nan"
        self._negative_number_matcher = re.compile(rf"^-({number})(,\s*-?({number}))*$", re.IGNORECASE)

    def error(self, message: str):
        from benchloupe.textsafe import visible

        self.exit(EXIT_USAGE, f"{self.prog}: error: {visible(message)}; `{self.prog} --help` lists the options\n")


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
    from benchloupe.cli import curation, report, search, transfer, workspace

    argv = sys.argv[1:] if argv is None else argv

    parser = Parser(
        prog="benchloupe",
        description="A terminal workbench for LLM-benchmark curators: import results, calibrate models and items "
                    "jointly, audit near-tie rankings, measure difficulty coverage and fill gaps with BenchFill. "
                    "Without a command, opens the workbench on the default database.",
    )
    parser.add_argument("--version", action="version", version=f"benchloupe {__version__}")
    _top_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in workspace.REGISTRY + transfer.REGISTRY + curation.REGISTRY + search.REGISTRY + report.REGISTRY:
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
    from benchloupe.cli import audit, calibration, coverage, estimate, fill

    return [calibration.register_fit, calibration.register_compress, estimate.register_estimate,
            estimate.register_next_items, estimate.register_compare, calibration.register_anomalies,
            calibration.register_screen, calibration.register_bootstrap, calibration.register_evaluate,
            calibration.register_contamination, audit.register_audit,
            coverage.register_coverage, coverage.register_calibrate, fill.register_endpoints, fill.register_fill,
            fill.register_review]


def write_trace(exc: BaseException, argv: list[str]) -> str:
    """The full traceback of an unexpected error in a file under the temporary folder; returns its path."""
    import tempfile
    import time
    import traceback

    text = f"benchloupe {__version__}\nargv: {argv!r}\n\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__))
    folder = os.path.join(tempfile.gettempdir(), "benchloupe-traces")
    try:
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"trace-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        return path
    except OSError:
        return "(nowhere: the temporary folder is not writable; rerun with --debug)"


_LAST_ERROR: list[str] = []  # the one line the failing command printed, for the runs it leaves failed


def _error(msg: str) -> int:
    from benchloupe.textsafe import visible

    _LAST_ERROR[:] = [visible(msg)]
    print(f"benchloupe: error: {visible(msg)}", file=sys.stderr, flush=True)
    return EXIT_ERROR


def _os_error_line(exc: OSError) -> str:
    where = exc.filename if exc.filename is not None else "a file"
    return f"{where}: {exc.strerror or exc}"


def main(argv: list[str] | None = None) -> int:
    """Run one command. Every failure ends as one line on stderr and exit 1: errors phrased for the user as they
    are, SQLite and file-system failures explained, and anything unexpected as what failed plus where its full
    traceback was written (``--debug`` prints it instead). Ctrl-C and SIGTERM at any point: exit 130."""
    try:
        with interrupt.guarded():
            code = _main(argv)
            if code == EXIT_INTERRUPTED:
                return interrupt.exit_interrupted()
            interrupt.finished()
            return code
    except KeyboardInterrupt:
        print("benchloupe: interrupted", file=sys.stderr, flush=True)
        return interrupt.exit_interrupted()


def _may_create(args) -> bool:
    """Whether the command may make a new database: only those that write what a workspace starts from (the
    demo, an import, an endpoint set, the workbench opened on a new file); every other one on a missing --db
    says so and leaves nothing behind (issue 37 #14)."""
    command = args.command
    if command in ("demo", "import"):
        return True
    if command == "endpoints":
        return getattr(args, "action", None) == "set"
    if command in ("open", None):  # the workbench on a new file, or the user's own default database
        default = getattr(args, "db", None) is None and getattr(args, "file", None) is None
        return default or (sys.stdout.isatty() and sys.stdin.isatty() and not getattr(args, "json", False))
    return False


def _main(argv: list[str] | None) -> int:
    """Run one command; when it fails (exit 1), a run it stored ``done`` before failing is marked failed with
    the same line (issue 37 #12: a failed command never leaves a ``done`` run behind). Only this command's runs:
    those this process finished before it (a job run directly, the workbench) are not its to fail."""
    _LAST_ERROR.clear()
    runs = sys.modules.get("benchloupe.store.runs")
    if runs is not None:
        runs.FINISHED_HERE.clear()
    code = _command(argv)
    runs = sys.modules.get("benchloupe.store.runs")
    if runs is not None:
        if code == EXIT_ERROR and _LAST_ERROR:
            runs.fail_finished_here(_LAST_ERROR[0])
        runs.FINISHED_HERE.clear()
    return code


def _command(argv: list[str] | None) -> int:
    import sqlite3

    from benchloupe.cli import output
    from benchloupe.store.db import StoreError, describe_sqlite_error

    # Engine, store and import errors are ValueErrors or StoreErrors phrased for the user (one line).
    job_errors = (ValueError, StoreError)
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    try:  # every number is read against its stated range here, before any work (cli.options.Ranged)
        args = parser.parse_args(argv)
    except CliError as exc:
        return _error(str(exc))
    if args.command is None:
        from benchloupe.cli.workspace import cmd_open

        args.file = None
        args.func = cmd_open
    try:
        if getattr(args, "actor", None) is not None:
            from benchloupe.store import actor

            actor.set_actor(args.actor)  # also $BENCHLOUPE_USER, for the job processes the workbench starts
        with output.terminal_safe(), _quiet_numeric_warnings():
            if getattr(args, "db", None) is not None:
                from benchloupe.cli.errors import db_path

                db_path(args)  # `--db ''` is refused before any command runs
            from benchloupe.cli.options import close_progress
            from benchloupe.store.db import creation

            try:
                with creation(_may_create(args)):
                    code = int(args.func(args) or 0)
            finally:
                close_progress()  # its timer threads end with the command (tests call main() many times)
            sys.stdout.flush()
        return code
    except UsageError as exc:
        from benchloupe.textsafe import visible

        print(f"benchloupe: error: {visible(str(exc))}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except CliError as exc:
        return _error(str(exc))
    except job_errors as exc:
        return _error(str(exc) if str(exc) else type(exc).__name__)
    except sqlite3.Error as exc:
        from benchloupe.cli.errors import db_path

        return _error(describe_sqlite_error(exc, db_path(args)))
    except KeyboardInterrupt:
        print("benchloupe: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except output.OutputError as exc:
        if sys.stdout is sys.__stdout__:  # the program's own stdout (not a caller's capture)
            # what it still buffers would fail again at the interpreter's exit ("Exception ignored", exit 120)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = _error(f"writing the output failed ({exc.strerror or exc}); what `{args.command or 'open'}` "
                      "did to the database is saved; check the disk or where the output goes")
        _LAST_ERROR.clear()  # the run finished and is saved: only its printing failed
        return code
    except OSError as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, sqlite3.Error):  # pandas' DatabaseError: the statement's text is not for the user
            from benchloupe.cli.errors import db_path

            return _error(describe_sqlite_error(cause, db_path(args)))
        if exc.filename is None:
            return _error(f"`{args.command or 'open'}` failed: {exc.strerror or exc}")
        return _error(_os_error_line(exc))
    except MemoryError:
        return _error(f"`{args.command or 'open'}` ran out of memory; the input is too large for this machine")
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, the trace in a file
        if getattr(args, "debug", False):
            import traceback

            traceback.print_exc()
            return EXIT_ERROR
        where = write_trace(exc, argv)
        first = (str(exc).splitlines() or [""])[0][:200]
        return _error(f"unexpected {type(exc).__name__} in `{args.command or 'open'}`"
                      + (f": {first}" if first else "") + f"; full traceback in {where} (--debug prints it); "
                      "please report it")


@contextlib.contextmanager
def _quiet_numeric_warnings():
    """numpy's RuntimeWarnings (overflow in exp, mean of an empty slice) are not messages for the user: the
    engine reports what matters in the run's warnings; without this they print as extra stderr lines."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


if __name__ == "__main__":
    sys.exit(main())
