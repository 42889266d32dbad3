"""Workspace commands: ``open``, ``demo``, ``list``, ``show`` and ``db check``."""

from __future__ import annotations

import sys
from pathlib import Path

from benchloupe import ranges
from benchloupe.cli.errors import CliError, connect_db, db_path, stderr
from benchloupe.cli.options import ranged_argument
from benchloupe.cli.output import kv, print_json, table, table_rows
from benchloupe.textsafe import visible

# ------------------------------------------------------------------------------------------------ open / demo

def workspace_summary(path: Path) -> dict:
    from benchloupe.store import runs
    from benchloupe.store.db import connect
    from benchloupe.store.queue import open_counts

    conn = connect(path)
    try:
        benches = summaries(conn)
        recent = runs.list_runs(conn).head(5)
        # the current flags only (store/queue.py): the latest run of each analysis, decisions carried over, as
        # the workbench's screens count them (issue 32 #1: five coverage runs were counted five times)
        return {"db": str(path), "benchmarks": benches.drop(columns=["id"]),
                "recent_runs": recent[["id", "kind", "benchmark", "status", "created_at"]],
                "open_flags": open_counts(conn)}
    finally:
        conn.close()


def print_summary(path: Path, as_json: bool) -> None:
    s = workspace_summary(path)
    if as_json:
        print_json(s)
        return
    print(f"benchloupe workspace: {s['db']}")
    if s["benchmarks"].empty:
        print("(no benchmarks yet: `benchloupe demo` builds a demo workspace, `benchloupe import` adds data)")
    else:
        print(table(s["benchmarks"]))
    if not s["recent_runs"].empty:
        print("\nRecent runs:")
        print(table(s["recent_runs"]))
    if s["open_flags"]:
        print("\nOpen flags: " + ", ".join(f"{k} {n}" for k, n in s["open_flags"].items()))


def exit_now(code: int) -> None:
    """End the process at once after the workbench closed: the exit handlers run and the output is flushed,
    but the interpreter's teardown of the ~1,000 modules the workbench imported (1.3-2.5 s here, the terminal
    blank meanwhile: issue 32 point 5) is skipped; the workbench's threads are daemons with nothing left to do
    (tui/threads.py) and its database connections are closed."""
    import atexit
    import os

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


def workbench_opens(as_json: bool = False) -> bool:
    """True when :func:`launch` opens the workbench (a terminal on both ends, Textual importable), not the
    headless summary."""
    import importlib.util

    return not as_json and sys.stdout.isatty() and sys.stdin.isatty() and \
        importlib.util.find_spec("textual") is not None


def launch(path: Path, as_json: bool = False, first_job=None) -> int:
    """Open the workbench when stdout is a terminal, with *first_job* (title, ``JobSpec``) started after its first
    screen; otherwise print the headless summary."""
    if workbench_opens(as_json):
        try:
            from benchloupe.tui.app import run_app
        except ImportError:
            run_app = None
        if run_app is not None:
            from benchloupe.cli.output import raw_terminal

            with raw_terminal():  # the TUI draws the screen itself and escapes data in its own layer
                code = run_app(path, first_job=first_job)
            exit_now(code)
    print_summary(path, as_json)
    return 0


def cmd_open(args) -> int:
    path = Path(args.file).expanduser() if args.file else db_path(args)
    from benchloupe.store.db import connect

    connect(path).close()
    return launch(path, args.json)


def register_open(sub, common) -> None:
    p = sub.add_parser("open", help="open the workbench on a database file (headless summary when not a terminal)")
    common(p)
    p.add_argument("file", nargs="?", help="database file (default: --db or the default database)")
    p.set_defaults(func=cmd_open)


def cmd_demo(args) -> int:
    """The demo workspace. With ``--open`` on a terminal the showcase runs are the workbench's first job, after
    its first screen (issue 32 point 16: ``make demo`` showed nothing for the half minute they take); a demo
    already written but never finished (a workbench closed while they ran) gets them then too."""
    from benchloupe.cli.options import StderrProgress
    from benchloupe.jobs import build_demo, demo_unfinished, run_demo_showcase
    from benchloupe.jobs.process import JobSpec

    path = db_path(args)
    later = args.open and not args.bare and workbench_opens(args.json)
    info = build_demo(path, seed=args.seed, force=args.force, analyses=not (args.bare or later),
                      progress=StderrProgress("demo analyses"))
    if not args.open:
        if args.json:
            print_json(info)
        else:
            print(info.get("message") or f"demo workspace written to {path}: {', '.join(info['benchmarks'])}")
        return 0
    if not info["created"]:
        stderr(f"{info['message']}: {path}")
    first = None
    if later and demo_unfinished(path):
        first = ("demo analyses", JobSpec(run_demo_showcase, (str(path), int(args.seed))))
    return launch(path, args.json, first_job=first)


def register_demo(sub, common) -> None:
    p = sub.add_parser("demo", help="build the seeded demo workspace (simulated, with known ground truth)")
    common(p)
    ranged_argument(p, "--seed", range=ranges.SEED, default=20261129, help="simulation seed (default: %(default)s)")
    p.add_argument("--force", action="store_true", help="rebuild the demo benchmarks if they exist")
    p.add_argument("--open", action="store_true", help="then open the workbench (summary when not a terminal)")
    p.add_argument("--bare", action="store_true", help="data only: skip the showcase analyses (fits, anomalies, "
                                                         "coverage, near-tie audit) and the late model that "
                                                         "arrives after them")
    p.set_defaults(func=cmd_demo)


# ------------------------------------------------------------------------------------------------ list / show

def summaries(conn):
    """``read.benchmark_summaries`` in the workbench's vocabulary: ``results`` counts observed static cells
    (what the Benchmarks screen shows), not the per-model rows they are stored in."""
    from benchloupe.store import read

    df = read.benchmark_summaries(conn)
    if "static_rows" in df.columns:
        df.insert(int(df.columns.get_loc("static_rows")), "results",
                  [read.static_cell_count(conn, n) for n in df["name"]])
        df = df.drop(columns=["static_rows"])
    return df


def summary_rows(conn) -> tuple[list[str], list[tuple]]:
    """:func:`summaries` as plain columns and rows, without pandas or numpy (``list`` starts in ~0.1 s, issue 16):
    the same ``results`` column (observed static cells)."""
    from benchloupe.store.summary import summary_rows as rows

    return rows(conn)


def cmd_list(args) -> int:
    conn = connect_db(args)
    try:
        cols, rows = summary_rows(conn)
    finally:
        conn.close()
    if args.json:
        print_json([dict(zip(cols, r)) for r in rows])
    elif not rows:
        print("no benchmarks; `benchloupe demo` or `benchloupe import ...` adds some")
    else:
        print(table_rows(cols[1:], [r[1:] for r in rows]))
    return 0


def register_list(sub, common) -> None:
    p = sub.add_parser("list", help="list benchmarks with item, model and result counts and the last run")
    common(p)
    p.set_defaults(func=cmd_list)


def cmd_show(args) -> int:
    from benchloupe.store import read, runs

    conn = connect_db(args)
    try:
        summ = summaries(conn)
        row = summ[summ["name"] == args.benchmark]
        if row.empty:
            read.benchmark_id(conn, args.benchmark)  # raises the helpful error
        info = row.drop(columns=["id"]).iloc[0].to_dict()
        its = read.items(conn, args.benchmark, with_text=False)
        groups = its.groupby("group").size().to_dict() if len(its) else {}
        ms = read.models(conn, args.benchmark)
        families = ms["family"].fillna("none").value_counts().to_dict()
        sm = read.load_static(conn, args.benchmark, include_retired=True)
        if sm.correct.size:
            info["results_missing"] = int((~sm.mask).sum())
            info["mean_accuracy"] = float(sm.correct[sm.mask].mean()) if sm.mask.any() else None
        info["groups"] = groups
        info["families"] = families
        info["reward_models"] = read.reward_models(conn, args.benchmark)
        recent = runs.list_runs(conn, args.benchmark).head(10)[["id", "kind", "status", "created_at"]]
    finally:
        conn.close()
    if args.json:
        print_json({**info, "runs": recent})
        return 0
    print(kv(info))
    if len(recent):
        print("\nRuns:")
        print(table(recent))
    return 0


def register_show(sub, common) -> None:
    p = sub.add_parser("show", help="one benchmark: counts, groups, families, accuracy, runs")
    common(p)
    p.add_argument("benchmark")
    p.set_defaults(func=cmd_show)


# ------------------------------------------------------------------------------------------------ db


def _static_cells(conn) -> int:
    """The observed static results (cells) of every benchmark, as ``list`` counts them, not the packed rows."""
    from benchloupe.store import read
    from benchloupe.store.summary import static_cell_counts

    per, mixed = static_cell_counts(conn)
    total = sum(per.values())
    for bid in mixed:
        name = conn.execute("SELECT name FROM benchmarks WHERE id = ?", (bid,)).fetchone()[0]
        total += read.static_cell_count(conn, name)
    return int(total)

def cmd_db(args) -> int:
    """``db check``: integrity, foreign keys and schema version; a damaged file is reported, not a traceback."""
    import sqlite3

    from benchloupe.store import runs
    from benchloupe.store.db import StoreError, connect, schema_version
    from benchloupe.store.schema import SCHEMA_VERSION

    path = db_path(args)
    if not path.exists():
        raise CliError(f"{path}: no such database; create it with `benchloupe demo --db {path}`")
    if args.action == "remove-run":
        from benchloupe.jobs import remove_run

        if args.run is None:
            raise CliError("db remove-run needs the run's id: `benchloupe db remove-run N`")
        remove_run(path, args.run)
        print(f"removed run {args.run}")
        return 0
    info: dict = {"db": str(path)}
    try:
        conn = connect(path, create=False, migrate=False)
    except StoreError as exc:
        if "damaged" not in str(exc):
            raise
        conn = None
        integrity, fk, version, counts = [f"damaged: {exc.__cause__ or exc}"], [], None, {}
    run_status: dict = {}
    if conn is not None:
        try:
            integrity = [r[0] for r in conn.execute("PRAGMA integrity_check")]
            fk = conn.execute("PRAGMA foreign_key_check").fetchall()
            version = schema_version(conn)
            counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                      for t in ("benchmarks", "items", "models", "static_results", "arena_rewards", "preferences",
                                "runs", "flags", "fill_sessions", "audit_log")} if version else {}
            if counts:  # issue 32: a static_results row packs one model's vector; the count is of results (cells)
                counts["static_results"] = _static_cells(conn)
            run_status = runs.status_counts(conn) if version == SCHEMA_VERSION else {}
        except sqlite3.DatabaseError as exc:
            integrity, fk, version, counts = [f"damaged: {exc}"], [], None, {}
        finally:
            conn.close()
    ok = integrity == ["ok"] and not fk and version == SCHEMA_VERSION
    info.update({"integrity": "ok" if integrity == ["ok"] else integrity[:5],
                 "foreign_keys": "ok" if not fk else f"{len(fk)} violations", "schema_version": version,
                 "expected_schema_version": SCHEMA_VERSION, "size_bytes": path.stat().st_size, "rows": counts,
                 "runs_by_status": run_status, "ok": ok})
    if not ok and integrity != ["ok"]:
        info["fix"] = "restore the file from a backup; `sqlite3 FILE .recover` may salvage rows"
    if args.json:
        print_json(info)
    else:
        print(kv(info))
    if not ok:  # the report is on stdout; stderr gets the one line every failure gets (issue 24)
        if integrity != ["ok"]:
            what = f"the database file is damaged ({str(integrity[0]).removeprefix('damaged: ')[:120]})"
            fix = "restore it from a backup; `sqlite3 FILE .recover` may salvage rows"
        elif fk:
            what, fix = f"{len(fk)} foreign-key violations", "restore it from a backup"
        else:
            what = f"schema version {version}, expected {SCHEMA_VERSION}"
            fix = "open it once with this benchloupe to migrate it" if version and version < SCHEMA_VERSION else \
                "upgrade benchloupe"
        stderr(f"benchloupe: error: {visible(str(path))}: {visible(what)}; {fix}")
    return 0 if ok else 1


def register_db(sub, common) -> None:
    p = sub.add_parser("db", help="database maintenance: `db check` (integrity, foreign keys, schema version), "
                                  "`db remove-run N` (an interrupted, cancelled or failed run)")
    common(p)
    p.add_argument("action", choices=["check", "remove-run"])
    ranged_argument(p, "run", nargs="?", range=ranges.ROW_ID,
                    help="remove-run: the run's id (`benchloupe show BENCHMARK` lists them)")
    p.set_defaults(func=cmd_db)


REGISTRY = [register_open, register_demo, register_list, register_show, register_db]
