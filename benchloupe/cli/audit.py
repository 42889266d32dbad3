"""``benchloupe audit neartie`` (paper 002)."""

from __future__ import annotations

from benchloupe.cli.errors import CliError, db_path
from benchloupe.cli.options import StderrProgress, add_config_args, config_from_args
from benchloupe.cli.output import kv, print_json, table

TUPLE_FIELDS = ("dimensions", "gap_curve", "fraction_sensitivity")


def _floats(text: str | None, what: str) -> tuple:
    if not text:
        return ()
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise CliError(f"{what}: give comma-separated numbers, e.g. 0.25,0.5,1,2,5") from None


def cmd_audit(args) -> int:
    from benchloupe import jobs
    from benchloupe.engine.neartie import AuditConfig
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    fixed = {}
    if args.gap_curve:
        fixed["gap_curve"] = tuple(x / 100 for x in _floats(args.gap_curve, "--gap-curve"))
    if args.fractions:
        fixed["fraction_sensitivity"] = _floats(args.fractions, "--fractions")
    if args.k_grid:
        fixed["dimensions"] = tuple(int(x) for x in _floats(args.k_grid, "--k-grid"))
    cfg = config_from_args(args, AuditConfig, **fixed)
    report = None if args.report == "-" else args.report
    rid = jobs.ANALYSES["neartie"].run(db_path(args), args.benchmark, cfg, report=report or None,
                                       progress=StderrProgress("audit"))
    if args.report is None:
        report = f"neartie-{args.benchmark.replace('/', '_')}-run{rid}.md"
        conn = connect(db_path(args))
        try:
            text = runs.load_artifact(conn, rid, "report")
        finally:
            conn.close()
        with open(report, "w", encoding="utf-8") as fh:
            fh.write(text)
    conn = connect(db_path(args))
    try:
        run = runs.get_run(conn, rid)
        folds = runs.load_artifact(conn, rid, "folds")
    finally:
        conn.close()
    t1 = run["metrics"]["table1"]
    if args.json:
        print_json({"run_id": rid, "table1": t1, "summary": run["metrics"], "report": report, "timings": run["timings"]})
        return 0
    print(f"near-tie audit run #{rid} on {args.benchmark}  (Table 1 row)")
    print(kv(t1))
    print("\nFolds:")
    cols = [c for c in ("audit_half", "k", "tau_b", "anchors", "close_cross_pairs", "close_cross_reversals",
                        "close_cross_rate", "random_median") if c in folds.columns]
    print(table(folds[cols]))
    if report:
        print(f"\nreport written to {report}")
    return 0


def register_audit(sub, common) -> None:
    p = sub.add_parser("audit", help="family-DIF near-tie audit: `audit neartie BENCHMARK`",
                       description="Paper 002: owner-disjoint folds, spectral MIRT with one-SE dimension selection, "
                                   "residual family DIF, three purification rounds, low-DIF anchors, near-tie "
                                   "reversals against 1,000 matched-random controls. Prints the Table 1 row, "
                                   "writes a Markdown report and stores every near-tie pair for triage.")
    common(p)
    from benchloupe.engine.neartie import AuditConfig
    p.add_argument("kind", choices=["neartie"])
    p.add_argument("benchmark")
    p.add_argument("--report", help="Markdown report path (default: neartie-BENCHMARK-runN.md; '-' for none)")
    p.add_argument("--gap-curve", help="secondary: gap thresholds in points, e.g. 0.25,0.5,1,2,5 (Table 7)")
    p.add_argument("--fractions", help="secondary: anchor fractions, e.g. 0.3,0.7 (Table 8)")
    p.add_argument("--k-grid", help="dimension grid (default: 1,2,4,...,256)")
    add_config_args(p, AuditConfig, skip=TUPLE_FIELDS)
    p.set_defaults(func=cmd_audit)
