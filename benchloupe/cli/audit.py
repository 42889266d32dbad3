"""``benchloupe audit neartie`` (paper 002)."""

from __future__ import annotations

import sys

from benchloupe import ranges
from benchloupe.cli.errors import CliError, db_path, stderr, stored_run, stored_table
from benchloupe.cli.options import (
    StderrProgress,
    add_config_args,
    add_worker_args,
    config_from_args,
    ranged_argument,
    workers_of,
)
from benchloupe.cli.output import data_stream, kv, print_json, table, table_rows

TUPLE_FIELDS = ("dimensions", "gap_curve", "fraction_sensitivity")
OWN_FLAGS = ("drop_small_families", "family_from", "protocol")


def _floats(text: str | None, what: str) -> tuple:
    if not text:
        return ()
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise CliError(f"{what}: give comma-separated numbers, e.g. 0.25,0.5,1,2,5") from None


# flags of `audit neartie` beside the AuditConfig fields (cfg_*), with their defaults: `audit robustness` reads
# stored runs, so any of them given there would change nothing and is refused
NEARTIE_FLAGS = {"family_from": "name", "drop_small_families": False, "protocol": "primary", "compare": None,
                 "gap_curve": None, "fractions": None, "k_grid": None, "device": "auto",
                 "jobs": None, "cluster": None}


def _refuse(flag: str, applies_to: str, here: str, why: str) -> None:
    raise CliError(f"--{flag.replace('_', '-')} applies to `audit {applies_to}`, not `audit {here}` ({why}); drop it")


def cmd_audit(args) -> int:
    from benchloupe import jobs
    from benchloupe.jobs import EngineError
    from benchloupe.jobs.audit import STDOUT, AuditConfig, check_report_path

    if args.kind == "robustness":
        return cmd_robustness(args)
    if args.kind == "items":
        from benchloupe.cli.items import cmd_audit_items

        return cmd_audit_items(args)
    if len(args.benchmarks) != 1:
        raise CliError(f"audit neartie takes one benchmark, got {len(args.benchmarks)}; "
                       "`audit robustness B1 B2 ...` combines several")
    if args.need is not None:
        _refuse("need", "robustness", "neartie", "it counts benchmarks across stored runs")
    args.benchmark = args.benchmarks[0]
    fixed = {"family_from": args.family_from, "protocol": args.protocol,
             "drop_small_families": bool(args.drop_small_families)}
    if args.gap_curve:
        fixed["gap_curve"] = _floats(args.gap_curve, "--gap-curve")  # percentage points, as the engine takes
    if args.fractions:
        fixed["fraction_sensitivity"] = _floats(args.fractions, "--fractions")
    if args.k_grid:
        fixed["dimensions"] = tuple(int(x) for x in _floats(args.k_grid, "--k-grid"))
    cfg = config_from_args(args, AuditConfig, **fixed)
    try:
        report = check_report_path(args.report)  # before anything runs or is stored
    except EngineError as exc:
        raise CliError(str(exc)) from None
    to_stdout = report == STDOUT
    if to_stdout and args.json:
        raise CliError("--report - and --json both write to standard output: drop one, or give --report FILE")
    with workers_of(args):
        rid = jobs.analysis("neartie").run(db_path(args), args.benchmark, cfg, report=report, compare=args.compare,
                                           progress=StderrProgress("audit"), device=args.device)
    run, text = stored_run(args, rid, "report")
    metrics = run["metrics"]
    t1 = metrics["table1"]
    where = None if report is None else "standard output" if to_stdout else str(report)
    if args.json:
        print_json({"run_id": rid, "table1": t1, "split_verdict": metrics.get("split_verdict"), "summary": metrics,
                    "report": where, "timings": run["timings"]})
        return 0
    if to_stdout:  # the report alone on standard output (a file or a pipe gets its exact bytes); the rest to stderr
        data_stream().write(text)
        sys.stdout.flush()
    say = stderr if to_stdout else print
    say(f"near-tie audit run #{rid} on {args.benchmark}  (Table 1 row)")
    say(kv(t1))
    say(f"families: {metrics['sources']['families']}; item groups: {metrics['sources']['groups']}")
    comp = metrics.get("compute")
    if isinstance(comp, dict):
        f32 = "; randomized SVD power iterations in float32" if comp.get("power_iterations") == "float32" else ""
        say(f"compute: {comp.get('backend')} on {comp.get('device')}, {comp.get('dtype')}{f32}")
    if "split_decisions" in metrics:
        say(f"owner split: {metrics['split_decisions']} decisions, {metrics['split_ties']} exact cost ties drawn, "
            f"{metrics['split_knife_edges']} knife edges (relative cost difference < 1e-12)")
    if metrics.get("split_verdict"):
        say(f"split stability: {metrics['split_verdict']}")
    say("\nFolds:")
    folds = stored_table(args, rid, "folds")
    cols = [c for c in ("audit_half", "k", "tau_b", "anchors", "close_cross_pairs", "close_cross_reversals",
                        "close_cross_rate", "random_median") if c in folds.columns]
    say(table_rows(cols, folds.rows(cols)))
    if where:
        say(f"\nreport written to {where} (also stored with run #{rid})")
    else:
        say(f"\nreport stored with run #{rid}: `benchloupe export run-artifact --run {rid} --name report`, "
            "or --report FILE (- for standard output) to write it")
    return 0


def cmd_robustness(args) -> int:
    """``audit robustness B1 B2 ...``: the D.2 pass rule across benchmarks (paper 002 Table 9, eqs. 59-61)."""
    from benchloupe.jobs import EngineError
    from benchloupe.jobs.audit import STDOUT, robustness_across

    why = "it reads each benchmark's latest --protocol full run"
    for dest, value in vars(args).items():
        if dest.startswith("cfg_") and dest != "cfg_significance" and value is not None:
            _refuse(dest[4:], "neartie", "robustness", why)
    for dest, default in NEARTIE_FLAGS.items():
        if getattr(args, dest) != default:
            _refuse(dest, "neartie", "robustness", why)
    to_stdout = args.report == STDOUT
    if to_stdout and args.json:
        raise CliError("--report - and --json both write to standard output: drop one, or give --report FILE")
    try:
        out = robustness_across(db_path(args), list(args.benchmarks), need=3 if args.need is None else args.need,
                                alpha=0.05 if args.cfg_significance is None else args.cfg_significance,
                                report=args.report)
    except EngineError as exc:
        raise CliError(str(exc)) from None
    t = out["table"]
    if args.json:
        print_json({"runs": out["runs"], "need": out["need"], "alpha": out["alpha"], "report": args.report,
                    "specifications": t.to_dict("records"), "passing": int(t["passes"].sum())})
        return 0
    if to_stdout:
        data_stream().write(out["markdown"])
        sys.stdout.flush()
    say = stderr if to_stdout else print
    say("population robustness across benchmarks (paper 002 D.2, Table 9): latest --protocol full run of "
        + ", ".join(f"{b} (#{r})" for b, r in out["runs"].items()))
    shown = t.assign(rule=t["passes"].map({True: "pass", False: "fail"})).drop(columns="passes")
    say(table(shown))
    say(f"\n{int(t['passes'].sum())} of {len(t)} specifications pass: >= {out['need']} benchmarks with positive "
        f"excess (G_dir) and >= {out['need']} with p <= {out['alpha']:g} (G_sig); stars mark p <= {out['alpha']:g}.")
    if len(out["runs"]) != 5 or out["need"] != 3:
        say(f"the paper's rule is >= 3 of its 5 benchmarks; here {len(out['runs'])} benchmarks, need {out['need']}")
    if args.report and not to_stdout:
        say(f"report written to {args.report}")
    return 0


def register_audit(sub, common) -> None:
    p = sub.add_parser("audit", help="family-DIF near-tie audit: `audit neartie BENCHMARK`, "
                                     "`audit robustness B1 B2 ...`; broken items: `audit items BENCHMARK`",
                       description="Paper 002: owner-disjoint folds, spectral MIRT with one-SE dimension selection, "
                                   "residual family DIF, three purification rounds, low-DIF anchors, near-tie "
                                   "reversals against 1,000 matched-random controls. `audit neartie BENCHMARK` prints "
                                   "the Table 1 row, stores every near-tie pair for triage and the Markdown report "
                                   "with the run. `audit robustness B1 B2 ...` applies the D.2 pass rule (Table 9, "
                                   "eqs. 59-61) to each benchmark's latest `--protocol full` run. "
                                   "`audit items BENCHMARK` finds broken items (mis-keyed with the key the chosen "
                                   "options suggest, backwards, dead, solved, misfitting by S-X2, near-duplicate) "
                                   "and puts them in the item triage queue (`flags --kind item`).")
    common(p)
    from benchloupe.jobs.audit import AuditConfig
    p.add_argument("kind", choices=["neartie", "robustness", "items"])
    p.add_argument("benchmarks", nargs="+", metavar="BENCHMARK", help="one benchmark (neartie) or several (robustness)")
    ranged_argument(p, "--fdr", range=ranges.PROBABILITY, default=0.05, metavar="Q",
                    help="items: the false-discovery rate of every item test (Benjamini-Hochberg; default 0.05)")
    ranged_argument(p, "--permutations", range=ranges.count(0, 10**6, "permutations"), default=999,
                    help="items: permutation replicates per test (default 999; fewer on very large benchmarks)")
    ranged_argument(p, "--top-k", range=ranges.count(1, 10**6, "models"), default=25,
                    help="items: the strongest models an item must separate, and of the saturation index (default 25)")
    ranged_argument(p, "--seed", range=ranges.SEED, default=0,
                    help="items: the permutations' seed (default 0)")
    p.add_argument("--flag-saturated", action="store_true",
                   help="items: also flag items every one of the top-k models solves")
    p.add_argument("--report", help="also write the Markdown report to this file, or to standard output with - (the "
                                    "other lines then go to standard error); it is always stored with the run")
    ranged_argument(p, "--need", range=ranges.count(1, 1000, "benchmarks"), default=None,
                   help="robustness: benchmarks that must be positive and significant per variant (paper: 3 of 5)")
    p.add_argument("--family-from", choices=["name", "column", "arch"], default="name",
                   help="model families from the paper's name rules (default), the stored family column, or the "
                        "leaderboard architecture")
    p.add_argument("--drop-small-families", action="store_true",
                   help="leave out families below --min-family-models (as the paper does) instead of refusing")
    p.add_argument("--protocol", choices=["primary", "full"], default="primary",
                   help="full: also the paper's robustness protocol (D.1-D.3, B.1, B.2) and secondary analyses")
    p.add_argument("--compare", metavar="BENCHMARK",
                   help="exact-common-model check (B.7, Table 10) against BENCHMARK's latest near-tie run")
    ranged_argument(p, "--gap-curve", range=ranges.number_list(ranges.FIELDS["AuditConfig.gap_curve"]),
                    help="secondary: gap thresholds in points, e.g. 0.25,0.5,1,2,5 (Table 7)")
    ranged_argument(p, "--fractions", range=ranges.number_list(ranges.FIELDS["AuditConfig.fraction_sensitivity"]),
                    help="secondary: anchor fractions, e.g. 0.3,0.7 (Table 8)")
    ranged_argument(p, "--k-grid", range=ranges.number_list(ranges.FIELDS["AuditConfig.dimensions"]),
                    help="dimension grid (default: 1,2,4,...,256)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="neartie: where control scoring, the DIF Newton passes and the spectral products run: cuda "
                        "(torch on a GPU, float64), cpu (numpy), or auto (CUDA when present and the matrix is large; "
                        "default); the run records device and dtype")
    add_config_args(p, AuditConfig, skip=TUPLE_FIELDS + OWN_FLAGS)
    add_worker_args(p)
    for action in p._actions:
        if action.dest == "cfg_split_seeds":  # its default (None) depends on --protocol
            action.metavar = "N"
            action.help = ("beyond the paper: the primary audit again under N other owner splits (population seeds "
                           "family seed + 1..N), Table 1 per split and a stable/fragile verdict; default: 20 with "
                           "--protocol full, else 0")
    p.set_defaults(func=cmd_audit)
