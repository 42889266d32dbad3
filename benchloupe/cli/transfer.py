"""``import`` and ``export``: files in, files out."""

from __future__ import annotations

import contextlib

from benchloupe.cli.errors import CliError, connect_db, db_path, stderr
from benchloupe.cli.output import data_stream, print_json, safe_json

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
NUMERIC_OPTIONS = {"--threshold"}  # checked by argparse: `--threshold abc` is a usage error naming the option
IMPORT_FLAGS = [("--require-status-ok", "DualEval: keep only rows whose status is ok (item_informativeness.py)"),
                ("--no-model-col", "wide: every column is an item; rows are respondents person_0001 ...")]


def cmd_import(args) -> int:
    from benchloupe.jobs import import_file

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
        updated = f", {s.items_updated} updated" if s.items_updated else ""
        print(f"imported {args.file} into {s.benchmark!r} ({s.format}): {s.items_new} new items{updated}, "
              f"{s.models_new} new "
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
        p.add_argument(flag, default=None, help=helptext, **({"type": float} if flag in NUMERIC_OPTIONS else {}))
    for flag, helptext in IMPORT_FLAGS:
        p.add_argument(flag, action="store_true", default=None, help=helptext)
    p.set_defaults(func=cmd_import)


# ------------------------------------------------------------------------------------------------ export

def cmd_export(args) -> int:
    import pandas as pd

    from benchloupe.store import read, runs

    run_export = args.what.startswith("run-")
    if not run_export and not args.benchmark:
        raise CliError(f"export {args.what} needs a BENCHMARK; `benchloupe list` shows them")
    if run_export and args.run is None:
        raise CliError(f"export {args.what} needs --run ID; `benchloupe show {args.benchmark or 'BENCHMARK'}` "
                       "lists a benchmark's runs")
    conn = connect_db(args)
    try:
        if run_export:
            _check_run(conn, args.run, args.benchmark)
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
                    data_stream().write(str(obj))
                    return 0
    finally:
        conn.close()
    to_file = args.out not in (None, "-")
    try:
        out = open(args.out, "w", encoding="utf-8", newline="") if to_file else data_stream()
    except OSError as exc:
        raise CliError(f"cannot write {args.out}: {exc.strerror or exc}; check the folder exists and is "
                       "writable") from None
    try:
        if args.format == "json" or args.json:
            out.write(safe_json(df.to_json(orient="records", force_ascii=False, indent=1)))
            out.write("\n")
        else:
            df.to_csv(out, index=False)
        out.flush()
    except OSError as exc:
        if not to_file:
            raise
        raise CliError(f"cannot write {args.out}: {exc.strerror or exc}; the file is incomplete") from None
    finally:
        if to_file:
            with contextlib.suppress(OSError):
                out.close()
    if to_file:
        stderr(f"wrote {len(df)} rows to {args.out}")
    return 0


def _check_run(conn, run_id: int, benchmark: str | None) -> None:
    """The run exists and, when a benchmark is named, belongs to it (as its benchmark or one of its inputs)."""
    from benchloupe.store import read, runs

    run = runs.get_run(conn, run_id)
    if run is None:
        raise CliError(f"no run #{run_id}; `benchloupe show BENCHMARK` lists a benchmark's runs")
    if benchmark:
        bid = read.benchmark_id(conn, benchmark)
        inputs = {r[0] for r in conn.execute("SELECT benchmark_id FROM run_inputs WHERE run_id = ?", (run_id,))}
        own = conn.execute("SELECT benchmark_id FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        if bid != own and bid not in inputs:
            raise CliError(f"run #{run_id} is a run of {run['benchmark']!r}, not of {benchmark!r}; "
                           f"`benchloupe show {benchmark}` lists its runs")


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


REGISTRY = [register_import, register_export]
