"""``import`` and ``export``: files in, files out."""

from __future__ import annotations

import contextlib
import re
import sys

from benchloupe import ranges
from benchloupe.cli.errors import CliError, connect_db, db_path, stderr
from benchloupe.cli.options import ranged_argument
from benchloupe.cli.output import data_stream, print_json, safe_json
from benchloupe.textsafe import visible
from benchloupe.words import count

# ------------------------------------------------------------------------------------------------ import

def _import_options():
    """(flag, help, is a switch, is a number) per option of ``import``: the jobs layer's table, as flags."""
    from benchloupe.store.importers.options import OPTIONS

    return [("--" + o.name.replace("_", "-"), o.help, o.kind == "flag", o.kind == "number") for o in OPTIONS]


# `import formats`: one line per format for a curator (issue 32: the parsers' docstrings carried markup and
# internal names, and were cut at their first line); tests/unit/test_cli_words.py checks every format has one
FORMAT_SUMMARIES = {
    "alpacaeval": "an AlpacaEval annotations.json: rewards and pairwise preferences (arena)",
    "arena": "arena rewards: one row per (model, prompt) with a reward (arena)",
    "battles": "Chatbot Arena battles: pairwise preferences (arena)",
    "classic-irt": "classic IRT sets (mirt's LSAT7, SAT12, ...): pattern tables or 0/1 matrices of respondents",
    "dualeval": "a DualEval static or arena JSONL file (recognised from its first row)",
    "helm": "one HELM run's per_instance_stats.json: one model's results on the items",
    "inspect": "one Inspect log: one model's results (successes of trials when it has epochs)",
    "items": "item metadata: text, answer, group, kind, chance and other columns, keyed by item",
    "lm-eval": "one lm-eval samples file (JSONL or parquet): one model's results; reruns of a task are kept apart",
    "long": "a long results table: one row per (model, item) with 0/1 or successes/trials",
    "metabench": "metabench <set>.responses.csv.gz (wide, model id first); benchmark metabench-<set>",
    "neartie-npz": "a family-DIF audit .npz (items x models, transposed on import)",
    "opencompass": "one OpenCompass results/<model>/<dataset>.json with details: one model's results",
    "preferences": "pairwise preferences: model_a, model_b, item, prob_a (arena)",
    "wide": "a models x items 0/1 CSV (model names in the first column unless --no-model-col)",
}


def cmd_import(args) -> int:
    from benchloupe.jobs.imports import import_paths, summary_lines
    from benchloupe.store.importers.options import OPTION_NAMES

    if args.format == "formats":
        from benchloupe.store.importers.detect import ALIASES, FORMATS

        for name in sorted(FORMATS):
            print(f"{name:14s} {FORMAT_SUMMARIES.get(name, '')}")
        print("aliases: " + ", ".join(f"{a} -> {f}" for a, f in sorted(ALIASES.items())))
        return 0
    if not args.paths:
        raise CliError("import needs a FILE, folder, glob or - (stdin); e.g. "
                       "`benchloupe import wide results.csv --benchmark mybench`")
    opts = {name: getattr(args, name) for name in OPTION_NAMES}
    fmt = None if args.format == "auto" else args.format
    _check_format(args.format, opts)
    tty = sys.stderr.isatty() and not args.json

    def progress(n: int, total: int, path: str) -> None:
        if tty and total > 1:
            sys.stderr.write(f"\r\x1b[Kparsing {n}/{total} {visible(path)[-60:]}")
            sys.stderr.flush()

    try:
        summary = import_paths(db_path(args), args.paths, fmt, replace=args.replace, progress=progress,
                               benchmark=args.benchmark, **opts)
    finally:
        if tty:
            sys.stderr.write("\r\x1b[K")
    if args.json:
        print_json(summary.as_dict())
        return 0
    for line in summary_lines(summary):
        print(visible(line))
    return 0


def _check_format(fmt: str, opts: dict) -> None:
    """An unknown format is a usage error (exit 2, before any path is looked at); an option the named format does
    not take is refused rather than silently ignored (``import wide --exclude-models`` kept every model)."""
    from benchloupe.cli.errors import UsageError
    from benchloupe.jobs.imports import format_options
    from benchloupe.store.importers.detect import ALIASES, FORMATS

    if fmt == "auto":
        return
    if fmt not in FORMATS and fmt not in ALIASES:
        raise UsageError(f"unknown import format {ranges.shown(fmt)!r}; use auto or one of "
                         f"{', '.join(sorted(FORMATS))} (`benchloupe import formats` lists them)")
    takes = set(format_options(fmt))
    given = [name for name, value in opts.items() if value is not None and name not in takes]
    if given:
        flags = ", ".join("--" + n.replace("_", "-") for n in given)
        own = ", ".join("--" + n.replace("_", "-") for n in format_options(fmt)) or "none"
        raise CliError(f"{flags} {'does' if len(given) == 1 else 'do'} not apply to format {fmt}; drop "
                       f"{'it' if len(given) == 1 else 'them'} (format {fmt} takes: {own})")


def register_import(sub, common) -> None:
    p = sub.add_parser(
        "import", help="import results or item metadata (validated, one transaction; `import formats` lists formats)",
        description="Import files, folders, globs or stdin (-), all in one transaction. Formats: long, wide, items, arena, preferences, dualeval-static, "
                    "dualeval-arena, neartie-npz, lm-eval (JSONL or Open LLM Leaderboard parquet), inspect, alpacaeval, battles, helm, opencompass, and helpers for the classic/metabench sets "
                    "(`benchloupe import formats`). 'auto' guesses from the name and header. Re-importing the "
                    "same file changes nothing; --replace replaces the benchmark's results.")
    common(p)
    p.add_argument("format", help="format name, 'auto', or 'formats' to list them")
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="files, folders (walked recursively), globs, or - for standard input")
    p.add_argument("--benchmark", "-b", help="benchmark name (default: from the file name)")
    p.add_argument("--replace", action="store_true", help="replace the benchmark's results instead of merging")
    for flag, helptext, switch, number in _import_options():
        if switch:
            p.add_argument(flag, action="store_true", default=None, help=helptext)
        elif number:  # `--threshold abc` is a usage error naming the option, `--threshold nan` one line (issue 24)
            ranged_argument(p, flag, default=None, help=helptext, range=ranges.FIELDS[f"import.{flag[2:].replace('-', '_')}"])
        else:
            p.add_argument(flag, default=None, help=helptext)
    p.set_defaults(func=cmd_import)


# ------------------------------------------------------------------------------------------------ export

def _export_harness(args) -> int:
    """Accepted BenchFill items in the formats of the harnesses the benchmark came from (issue 12)."""
    import json
    from pathlib import Path

    from benchloupe.store import export

    if not args.benchmark:
        raise CliError(f"export {args.what} needs a BENCHMARK")
    conn = connect_db(args)
    try:
        rows = export.harness_items(conn, args.benchmark, origin=None if args.all_items else "benchfill")
    finally:
        conn.close()
    if not rows:
        raise CliError(f"benchmark {args.benchmark!r} has no accepted BenchFill items (review proposals first, or "
                       "pass --all-items)")
    if args.what == "inspect-samples":
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in export.inspect_samples(rows))
        if args.out in (None, "-"):
            data_stream().write(safe_json(text))
            return 0
        Path(args.out).write_text(text, encoding="utf-8")
        _wrote(args, {"path": args.out, "rows": len(rows), "format": "inspect-samples"},
               f"wrote {len(rows)} Inspect samples to {args.out} (inspect_ai.dataset.json_dataset reads it)")
        return 0
    if not args.out:
        raise CliError("export lm-eval-task needs --out FOLDER (it writes the dataset JSONL and the task YAML)")
    folder = Path(args.out)
    task = export.lmeval_task_name(args.benchmark, benchfill=not args.all_items)
    data, yaml_path = folder / f"{task}.jsonl", folder / f"{task}.yaml"
    _refuse_foreign_export(args.benchmark, data, yaml_path)
    folder.mkdir(parents=True, exist_ok=True)
    records, mc = export.lmeval_dataset(rows)
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    yaml_path.write_text(export.lmeval_task_yaml(task, str(data.resolve()), mc, args.benchmark), encoding="utf-8")
    _wrote(args, {"path": str(data), "task": task, "task_yaml": str(folder / (task + ".yaml")), "rows": len(records),
                  "format": "lm-eval-task"},
           f"wrote {len(records)} items to {data} and task {task!r} to {folder / (task + '.yaml')}; run: "
           f"lm_eval --include_path {folder} --tasks {task} --model ...")
    return 0


def _refuse_foreign_export(benchmark: str, data, yaml_path) -> None:
    """Refuse, before writing anything, to overwrite a task another benchmark's export (or anyone else) wrote into
    the folder (issue 37); re-exporting the same benchmark replaces its own files."""
    from benchloupe.store import export

    if not data.exists() and not yaml_path.exists():
        return
    try:
        owner = export.lmeval_task_owner(yaml_path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        owner = None
    if owner == benchmark:
        return
    whose = f"the export of benchmark {owner!r}" if owner is not None else "a task benchloupe did not write"
    raise CliError(f"{yaml_path if yaml_path.exists() else data} already holds {whose}; not overwritten: choose "
                   "another --out folder, or remove those files")


def _wrote(args, info: dict, line: str) -> None:
    """What an export wrote to a file: the line on stderr, or with --json a JSON object on stdout (a script asked
    for JSON; issue 24: it got the text line)."""
    if args.json:
        print_json(info)
    else:
        stderr(line)


def cmd_export(args) -> int:
    import pandas as pd

    if args.what in ("inspect-samples", "lm-eval-task"):
        return _export_harness(args)

    from benchloupe.store import export, read, runs

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
            df = export.models_frame(conn, args.benchmark)
        elif args.what == "results":
            df = export.results_frame(conn, args.benchmark)
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
                    if not names:  # issue 32: it said "run 8 has: " and nothing
                        raise CliError(f"run {args.run} stored no artifacts; export its per-model or per-item "
                                       f"outputs with `benchloupe export run-models --run {args.run}` or "
                                       f"`benchloupe export run-items --run {args.run}`")
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
            risky = formula_cells(df)
            (_safe_csv(df) if args.safe_csv else df).to_csv(out, index=False)
            if risky and not args.safe_csv:
                stderr(f"warning: {count(risky, 'cell')} {'starts' if risky == 1 else 'start'} with =, +, - or @ "
                       "and a spreadsheet may run them as "
                       "formulas; the CSV holds them exactly as stored (--safe-csv writes them with a leading ')")
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
        _wrote(args, {"path": args.out, "rows": len(df), "format": "json" if args.format == "json" or args.json
                      else "csv"}, f"wrote {len(df)} rows to {args.out}")
    return 0


_FORMULA = re.compile(r"^[=+\-@\t\r]")
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _is_formula(value: object) -> bool:
    """A text cell a spreadsheet would read as a formula (OWASP "CSV injection"): it starts with =, +, -, @, a tab
    or a carriage return, and is not simply a number (-1.5)."""
    return isinstance(value, str) and bool(_FORMULA.match(value)) and not _NUMBER.match(value)


def formula_cells(df) -> int:
    """How many text cells (and column names) of *df* :func:`_is_formula`."""
    n = sum(_is_formula(c) for c in df.columns)
    for col in df.columns:
        if df[col].dtype == object or str(df[col].dtype) in ("str", "string"):
            n += int(sum(_is_formula(v) for v in df[col].to_numpy()))
    return n


def _safe_csv(df):
    """*df* with every formula-like text cell (and column name) prefixed with ``'`` (issue 37 #15, ``--safe-csv``):
    a spreadsheet shows the text instead of running it; the default export stays byte-exact."""
    out = df.copy()
    out.columns = ["'" + c if _is_formula(c) else c for c in df.columns]
    for col in out.columns:
        if out[col].dtype == object or str(out[col].dtype) in ("str", "string"):
            out[col] = ["'" + v if _is_formula(v) else v for v in out[col].to_numpy()]
    return out


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
                                    "run-artifact", "inspect-samples", "lm-eval-task"],
                   help="inspect-samples: accepted BenchFill items as Inspect Sample JSONL; lm-eval-task: the same as "
                        "an lm-eval JSONL dataset plus task YAML, written into the --out folder")
    p.add_argument("benchmark", nargs="?", default=None)
    ranged_argument(p, "--run", range=ranges.ROW_ID, help="run id (run-* exports)")
    p.add_argument("--name", help="artifact name (run-artifact)")
    p.add_argument("--reward-model", default=None)
    p.add_argument("--format", choices=["csv", "json"], default="csv")
    p.add_argument("--safe-csv", action="store_true",
                   help="CSV: write text cells that start with =, +, - or @ with a leading ' so that a spreadsheet "
                        "shows them instead of running them as formulas (default: exactly as stored, with a warning)")
    p.add_argument("--out", "-o", help="output file (default: stdout); a folder for lm-eval-task")
    p.add_argument("--all-items", action="store_true",
                   help="inspect-samples / lm-eval-task: every active item, not only the accepted BenchFill items")
    p.set_defaults(func=cmd_export)


REGISTRY = [register_import, register_export]
