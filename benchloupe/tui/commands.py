"""Subcommands of the ``benchloupe`` CLI. Each ``register_*`` adds a subparser; each ``cmd_*`` runs one.

Commands only parse arguments, call :mod:`benchloupe.engine.jobs` or the store's readers, and print.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchloupe.tui.cli import CliError, db_path
from benchloupe.tui.output import kv, print_json, table


def _connect(args, *, must_exist: bool = True):
    from benchloupe.store.db import connect

    path = db_path(args)
    return connect(path, create=not must_exist)


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ open / demo

def workspace_summary(path: Path) -> dict:
    from benchloupe.store import read, runs
    from benchloupe.store.db import connect

    conn = connect(path)
    try:
        benches = read.benchmark_summaries(conn)
        recent = runs.list_runs(conn).head(5)
        open_flags = conn.execute("SELECT kind, count(*) FROM flags WHERE state = 'open' GROUP BY kind").fetchall()
        return {"db": str(path), "benchmarks": benches.drop(columns=["id"]),
                "recent_runs": recent[["id", "kind", "benchmark", "status", "created_at"]],
                "open_flags": {k: n for k, n in open_flags}}
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


def launch(path: Path, as_json: bool = False) -> int:
    """Open the workbench when stdout is a terminal; otherwise print the headless summary."""
    if not as_json and sys.stdout.isatty() and sys.stdin.isatty():
        try:
            from benchloupe.tui.app import run_app
        except ImportError:
            run_app = None
        if run_app is not None:
            return run_app(path)
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
    from benchloupe.engine.jobs import build_demo
    from benchloupe.tui.cliutil import StderrProgress

    path = db_path(args)
    info = build_demo(path, seed=args.seed, force=args.force, analyses=not args.bare,
                      progress=StderrProgress("demo analyses"))
    if not args.open:
        if args.json:
            print_json(info)
        else:
            print(info.get("message") or f"demo workspace written to {path}: {', '.join(info['benchmarks'])}")
        return 0
    if not info["created"]:
        _stderr(f"{info['message']}: {path}")
    return launch(path, args.json)


def register_demo(sub, common) -> None:
    p = sub.add_parser("demo", help="build the seeded demo workspace (simulated, with known ground truth)")
    common(p)
    p.add_argument("--seed", type=int, default=20261129, help="simulation seed (default: %(default)s)")
    p.add_argument("--force", action="store_true", help="rebuild the demo benchmarks if they exist")
    p.add_argument("--open", action="store_true", help="then open the workbench (summary when not a terminal)")
    p.add_argument("--bare", action="store_true", help="data only: skip the showcase analyses (fits, anomalies, "
                                                         "coverage, near-tie audit)")
    p.set_defaults(func=cmd_demo)


# ------------------------------------------------------------------------------------------------ list / show

def cmd_list(args) -> int:
    from benchloupe.store import read

    conn = _connect(args)
    try:
        df = read.benchmark_summaries(conn)
    finally:
        conn.close()
    if args.json:
        print_json(df)
    elif df.empty:
        print("no benchmarks; `benchloupe demo` or `benchloupe import ...` adds some")
    else:
        print(table(df.drop(columns=["id"])))
    return 0


def register_list(sub, common) -> None:
    p = sub.add_parser("list", help="list benchmarks with item, model and result counts and the last run")
    common(p)
    p.set_defaults(func=cmd_list)


def cmd_show(args) -> int:
    from benchloupe.store import read, runs

    conn = _connect(args)
    try:
        summ = read.benchmark_summaries(conn)
        row = summ[summ["name"] == args.benchmark]
        if row.empty:
            read.benchmark_id(conn, args.benchmark)  # raises the helpful error
        info = row.drop(columns=["id"]).iloc[0].to_dict()
        its = read.items(conn, args.benchmark, with_text=False)
        groups = its.groupby("group").size().to_dict() if len(its) else {}
        ms = read.models(conn, args.benchmark)
        families = ms["family"].fillna("(none)").value_counts().to_dict()
        sm = read.load_static(conn, args.benchmark, include_retired=True)
        if sm.correct.size:
            info["static_cells_observed"] = int(sm.mask.sum())
            info["static_missing"] = int((~sm.mask).sum())
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


# ------------------------------------------------------------------------------------------------ import

IMPORT_OPTIONS = [
    ("--model-col", "model column name"), ("--item-col", "item column name"),
    ("--correct-col", "0/1 column name"), ("--successes-col", "successes column"), ("--trials-col", "trials column"),
    ("--text-col", "item text column"), ("--answer-col", "answer column"), ("--group-col", "item group column"),
    ("--kind-col", "item kind column"), ("--chance-col", "multiple-choice chance column"),
    ("--key-col", "item key column (metadata files)"), ("--reward-col", "reward column"),
    ("--reward-model", "reward-model name for arena rewards"), ("--reward-model-col", "reward-model column"),
    ("--family-col", "model family column"), ("--owner-col", "model owner column"),
    ("--models-file", "CSV with name, family, owner (and arch) per model"),
    ("--model", "model name (lm-eval / Inspect logs: one model per file)"),
    ("--metric", "metric field to score (lm-eval) or scorer (Inspect)"),
    ("--exclude-models", "regular expression of models to leave out"),
    ("--prompt-col", "prompt column (arena rewards, preferences)"),
    ("--model-a-col", "first model column (preferences)"), ("--model-b-col", "second model column (preferences)"),
    ("--winner-col", "winner column: a / b / tie or a model name (preferences)"),
    ("--probability-col", "P(model_a wins) column (preferences)"),
    ("--freq-col", "pattern frequency column(s), comma-separated (classic pattern tables)"),
    ("--na-values", "extra cell values meaning missing, comma-separated (wide)"),
    ("--key-prefix", "DualEval keys: 'tag' reproduces the reference's tag::key"),
    ("--filter-name", "lm-eval filter (e.g. strict-match)"), ("--threshold", "score at or above which a cell is correct"),
    ("--partial", "Inspect 'P' scores: incorrect | correct | error"), ("--scorer", "Inspect scorer name"),
    ("--score-key", "Inspect score key inside a dict value"),
]
IMPORT_FLAGS = [("--require-status-ok", "DualEval: keep only rows whose status is ok (item_informativeness.py)"),
                ("--no-model-col", "wide: every column is an item; rows are respondents person_0001 ...")]


def cmd_import(args) -> int:
    from benchloupe.engine.jobs import import_file

    if args.format == "formats":
        from benchloupe.store.importers.detect import ALIASES, FORMATS

        for name, parser in sorted(FORMATS.items()):
            doc = (parser.__doc__ or "").strip().splitlines()
            print(f"{name:14s} {doc[0] if doc else ''}")
        print("aliases: " + ", ".join(f"{a} -> {f}" for a, f in sorted(ALIASES.items())))
        return 0
    if not args.file:
        raise CliError("import needs a FILE; e.g. `benchloupe import wide results.csv --benchmark mybench`")
    opts = {name.lstrip("-").replace("-", "_"): getattr(args, name.lstrip("-").replace("-", "_"))
            for name, _ in IMPORT_OPTIONS + IMPORT_FLAGS}
    fmt = None if args.format == "auto" else args.format
    summary = import_file(db_path(args), args.file, fmt, replace=args.replace, benchmark=args.benchmark, **opts)
    if args.json:
        print_json(summary.as_dict())
    else:
        s = summary
        print(f"imported {args.file} into {s.benchmark!r} ({s.format}): {s.items_new} new items, {s.models_new} new "
              f"models, {s.static_cells} static cells ({s.cells_changed} changed), {s.rewards} rewards, "
              f"{s.preferences} preferences" + (" [replaced]" if s.replaced else ""))
    return 0


def register_import(sub, common) -> None:
    p = sub.add_parser(
        "import", help="import results or item metadata (validated, one transaction; `import formats` lists formats)",
        description="Import one file. Formats: long, wide, items, arena, preferences, dualeval-static, "
                    "dualeval-arena, neartie-npz, lmeval, inspect, and helpers for the classic/metabench sets "
                    "(`benchloupe import formats`). 'auto' guesses from the name and header. Re-importing the "
                    "same file changes nothing; --replace replaces the benchmark's results.")
    common(p)
    p.add_argument("format", help="format name, 'auto', or 'formats' to list them")
    p.add_argument("file", nargs="?")
    p.add_argument("--benchmark", "-b", help="benchmark name (default: from the file name)")
    p.add_argument("--replace", action="store_true", help="replace the benchmark's results instead of merging")
    for flag, helptext in IMPORT_OPTIONS:
        p.add_argument(flag, default=None, help=helptext)
    for flag, helptext in IMPORT_FLAGS:
        p.add_argument(flag, action="store_true", default=None, help=helptext)
    p.set_defaults(func=cmd_import)


# ------------------------------------------------------------------------------------------------ export

def cmd_export(args) -> int:
    import pandas as pd

    from benchloupe.store import read, runs

    conn = _connect(args)
    try:
        if args.what == "items":
            df = read.items(conn, args.benchmark)
        elif args.what == "models":
            df = read.models(conn, args.benchmark)
        elif args.what == "results":
            sm = read.load_static(conn, args.benchmark, include_retired=True)
            df = pd.DataFrame(sm.correct.astype("float64"), columns=sm.items["key"], index=sm.models["name"])
            df = df.where(sm.mask)
            df.index.name = "model"
            df = df.reset_index()
        elif args.what == "preferences":
            df = read.load_preferences(conn, args.benchmark)
        elif args.what == "rewards":
            am = read.load_arena(conn, args.benchmark, reward_model=args.reward_model)
            df = pd.DataFrame(am.rewards, columns=am.items["key"], index=am.models["name"])
            df.index.name = "model"
            df = df.reset_index()
        else:
            if args.run is None:
                raise CliError("export run-models/run-items/run-artifact needs --run ID (see `benchloupe runs`)")
            if args.what == "run-models":
                df = runs.run_models(conn, args.run)
            elif args.what == "run-items":
                df = runs.run_items(conn, args.run)
            else:
                if not args.name:
                    names = runs.artifact_names(conn, args.run)
                    raise CliError(f"export run-artifact needs --name; run {args.run} has: {', '.join(names)}")
                obj = runs.load_artifact(conn, args.run, args.name)
                if obj is None:
                    raise CliError(f"run {args.run} has no artifact {args.name!r}")
                df = obj if isinstance(obj, pd.DataFrame) else pd.DataFrame([obj]) if isinstance(obj, dict) else None
                if df is None:
                    sys.stdout.write(str(obj))
                    return 0
    finally:
        conn.close()
    out = sys.stdout if args.out in (None, "-") else open(args.out, "w", encoding="utf-8", newline="")
    try:
        if args.format == "json" or args.json:
            out.write(df.to_json(orient="records", force_ascii=False, indent=1))
            out.write("\n")
        else:
            df.to_csv(out, index=False)
    finally:
        if out is not sys.stdout:
            out.close()
    if out is not sys.stdout:
        _stderr(f"wrote {len(df)} rows to {args.out}")
    return 0


def register_export(sub, common) -> None:
    p = sub.add_parser("export", help="export items, models, results, rewards, preferences or run outputs as CSV or JSON")
    common(p)
    p.add_argument("what", choices=["items", "models", "results", "rewards", "preferences", "run-models", "run-items",
                                    "run-artifact"])
    p.add_argument("benchmark", nargs="?", default=None)
    p.add_argument("--run", type=int, help="run id (run-* exports)")
    p.add_argument("--name", help="artifact name (run-artifact)")
    p.add_argument("--reward-model", default=None)
    p.add_argument("--format", choices=["csv", "json"], default="csv")
    p.add_argument("--out", "-o", help="output file (default: stdout)")
    p.set_defaults(func=cmd_export)


# ------------------------------------------------------------------------------------------------ db

def cmd_db(args) -> int:
    from benchloupe.store.db import connect, schema_version
    from benchloupe.store.schema import SCHEMA_VERSION

    path = db_path(args)
    if not path.exists():
        raise CliError(f"{path}: no such database; create it with `benchloupe demo --db {path}`")
    conn = connect(path, create=False, migrate=False)
    try:
        integrity = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        fk = conn.execute("PRAGMA foreign_key_check").fetchall()
        version = schema_version(conn)
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("benchmarks", "items", "models", "static_results", "arena_rewards", "preferences",
                            "runs", "flags", "fill_sessions", "audit_log")} if version else {}
    finally:
        conn.close()
    ok = integrity == ["ok"] and not fk and version == SCHEMA_VERSION
    info = {"db": str(path), "integrity": "ok" if integrity == ["ok"] else integrity[:5],
            "foreign_keys": "ok" if not fk else f"{len(fk)} violations", "schema_version": version,
            "expected_schema_version": SCHEMA_VERSION, "size_bytes": path.stat().st_size, "rows": counts, "ok": ok}
    if args.json:
        print_json(info)
    else:
        print(kv(info))
    return 0 if ok else 1


def register_db(sub, common) -> None:
    p = sub.add_parser("db", help="database maintenance: `db check` (integrity, foreign keys, schema version)")
    common(p)
    p.add_argument("action", choices=["check"])
    p.set_defaults(func=cmd_db)


def analysis_commands() -> list:
    from benchloupe.tui.commands_audit import register_audit
    from benchloupe.tui.commands_calibration import (
        register_anomalies,
        register_bootstrap,
        register_compress,
        register_fit,
        register_screen,
    )
    from benchloupe.tui.commands_coverage import register_calibrate, register_coverage
    from benchloupe.tui.commands_fill import register_endpoints, register_fill, register_review

    return [register_fit, register_compress, register_anomalies, register_screen, register_bootstrap, register_audit, register_coverage, register_calibrate, register_endpoints, register_fill,
            register_review]


REGISTRY = [register_open, register_demo, register_list, register_show, register_import, register_export, register_db]


def cmd_alias(args) -> int:
    from benchloupe.store.curation import alias_model

    conn = _connect(args)
    try:
        out = [alias_model(conn, args.model, a) for a in args.aliases]
    finally:
        conn.close()
    if args.json:
        print_json(out)
    else:
        for o in out:
            print(f"{o['alias']} -> {o['model']}" + (" (merged the separately imported model)" if o["merged"] else ""))
    return 0


def register_alias(sub, common) -> None:
    p = sub.add_parser("alias", help="link names of the same model across sources (merges a separately imported one)")
    common(p)
    p.add_argument("model", help="the model's name in the store")
    p.add_argument("aliases", nargs="+", help="other names of the same model (e.g. in an arena set)")
    p.set_defaults(func=cmd_alias)


REGISTRY.append(register_alias)


def cmd_flags(args) -> int:
    from benchloupe.store import curation, read

    conn = _connect(args)
    try:
        if args.set:
            if not args.set[0].isdigit():
                raise CliError(f"--set needs a flag id (a number) then a state; got {args.set[0]!r}")
            curation.set_flag_state(conn, int(args.set[0]), args.set[1], args.note)
        bid = read.benchmark_id(conn, args.benchmark) if args.benchmark else None
        df = curation.flags(conn, run_id=args.run, kind=args.kind, state=args.state, benchmark_id=bid)
    finally:
        conn.close()
    cols = ["id", "run_id", "kind", "state", "score", "model", "model_b", "item_key", "note"]
    if args.json:
        print_json(df[cols + ["payload"]])
    elif df.empty:
        print("no flags match")
    else:
        decided = int((df["state"] != "open").sum())
        print(f"{len(df)} flags, {decided} triaged")
        print(table(df[cols], limit=args.limit))
    return 0


def register_flags(sub, common) -> None:
    p = sub.add_parser("flags", help="list flags (anomalies, reversals, gaps) and triage one headlessly",
                       description="The Anomalies and Reversals screens are the place to step through flags; this "
                                   "lists them and sets one's state from a script: --set ID STATE [--note TEXT].")
    common(p)
    p.add_argument("benchmark", nargs="?")
    p.add_argument("--run", type=int)
    p.add_argument("--kind", choices=["anomaly", "reversal", "gap", "candidate"])
    p.add_argument("--state", choices=["open", "confirmed", "dismissed", "unsure"])
    p.add_argument("--set", nargs=2, metavar=("ID", "STATE"), type=str)
    p.add_argument("--note")
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(func=cmd_flags)


REGISTRY.append(register_flags)
