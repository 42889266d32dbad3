"""``benchloupe estimate``: the full-benchmark accuracy of partly evaluated models from a frozen calibration, with
a 95 % interval (issue 34; benchloupe.jobs.estimate)."""

from __future__ import annotations

from benchloupe import ranges
from benchloupe.cli.errors import connect_db, db_path
from benchloupe.cli.options import StderrProgress, ranged_argument
from benchloupe.cli.output import kv, print_json, table
from benchloupe.textsafe import visible

RUN_RANGE = ranges.count(1, ranges.INT64_MAX, "run id", special=(0, "the latest static or joint fit"))
LEVEL_RANGE = ranges.Range(0.5, 1, hi_open=True, unit="interval level")


def cmd_estimate(args) -> int:
    from benchloupe.jobs import estimate as job
    from benchloupe.store import runs

    cfg = job.EstimateConfig(run=args.run or 0, models=",".join(args.model or []), level=args.level or 0.95)
    rid = job.run_estimate(db_path(args), args.benchmark, cfg, progress=StderrProgress("estimate"))
    conn = connect_db(args)
    try:
        run = runs.get_run(conn, rid)
        rows = job.estimate_rows(conn, rid)
    finally:
        conn.close()
    if args.json:
        print_json({"run_id": rid, "kind": "estimate", "benchmark": run["benchmark"], "metrics": run["metrics"],
                    "timings": run["timings"], "estimates": rows})
        return 0
    m = run["metrics"]
    print(f"run #{rid} estimate on {visible(run['benchmark'])}: {m['models']} model(s), frozen calibration run "
          f"#{m['calibration_run']} ({m['n_items']} items); estimated accuracy on all of them, "
          f"{100 * m['level']:.0f} % interval (ability uncertainty + the unseen items), observed = the items seen")
    print(kv({k: m[k] for k in ("chance_mode", "misfit_tau2", "interval_scale", "reference_models")}))
    for w in m.get("warnings", []) or []:
        print(f"warning: {visible(w)}")
    shown = rows.assign(estimate=[job.describe(r) for _, r in rows.iterrows()],
                        observed=[f"{100 * v:.1f} % on {int(k)}" for v, k in zip(rows["observed"], rows["seen"])])
    print(table(shown[["name", "estimate", "observed"]], max_width=60, limit=200))
    if len(rows) > 200:
        print(f"... {len(rows) - 200} more (--json for all)")
    return 0


def register_estimate(sub, common) -> None:
    p = sub.add_parser("estimate", help="full-benchmark accuracy of partly evaluated models, with a 95%% interval",
                       description="Issue 34: every model with results on only part of the benchmark's active items "
                                   "(or each --model) gets its predicted accuracy on all of them, from the frozen "
                                   "static calibration (the latest static or joint fit, or --run): EAP ability with "
                                   "the items' chance levels, the seen items as observed and the unseen ones as "
                                   "expected, and an interval carrying the ability's uncertainty and the unseen "
                                   "items' sampling. Stored as a run (docs/ESTIMATE.md).")
    common(p)
    p.add_argument("benchmark")
    p.add_argument("--model", action="append", metavar="M", help="a model to estimate (repeat for several); "
                                                                 "default: every partly evaluated model")
    ranged_argument(p, "--run", range=RUN_RANGE, help="the calibration run (default: the latest static or joint fit)")
    ranged_argument(p, "--level", range=LEVEL_RANGE, help="interval level (default 0.95)")
    p.set_defaults(func=cmd_estimate)
