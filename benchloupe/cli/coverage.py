"""``benchloupe coverage`` and ``benchloupe calibrate`` (paper 003)."""

from __future__ import annotations

from benchloupe.cli.errors import CliError, db_path
from benchloupe.cli.options import StderrProgress, add_config_args, config_from_args
from benchloupe.cli.output import kv, print_json, table


def cmd_coverage(args) -> int:
    from benchloupe import jobs
    from benchloupe.jobs.coverage import CoverageConfig
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    cfg = config_from_args(args, CoverageConfig)
    rid = jobs.ANALYSES["coverage"].run(db_path(args), args.benchmark, cfg, progress=StderrProgress("coverage"))
    conn = connect(db_path(args))
    try:
        run = runs.get_run(conn, rid)
        gaps = runs.load_artifact(conn, rid, "gaps")
        ecdf = runs.load_artifact(conn, rid, "ecdf")
    finally:
        conn.close()
    m = run["metrics"]
    if args.json:
        print_json({"run_id": rid, "benchmark": args.benchmark, "metrics": m, "timings": run["timings"],
                    "gaps": gaps.head(args.gaps), "ecdf": ecdf if args.ecdf else None})
        return 0
    print(f"coverage run #{rid} on {args.benchmark}" + (f" (group {cfg.group})" if cfg.group else ""))
    keys = ["n_items", "n_models", "target", "ddm", "ddm_sd", "max_gap", "max_gap_sd", "uniform_baseline_max_gap",
            "max_gap_ratio", "k", "topk_sum", "topk_sum_sd", "model_information", "item_information",
            "model_inversion_rate", "item_inversion_rate", "diagnostics_passed"]
    print(kv({k: m[k] for k in keys if k in m}))
    print(f"\nLargest gaps (normalised difficulty; BenchFill targets the midpoint with `benchloupe fill "
          f"{args.benchmark} --gap N`):")
    show = gaps.head(args.gaps).copy()
    show.insert(0, "gap", range(1, len(show) + 1))
    print(table(show[["gap", "lo", "hi", "width", "midpoint"]]))
    return 0


def register_coverage(sub, common) -> None:
    p = sub.add_parser("coverage", help="difficulty coverage: 1PL difficulties, DDM, max gap, top-k gaps, diagnostics",
                       description="Paper 003: fit the 1PL (MAP, N(0,1) priors; guessing from item chance levels), "
                                   "then DDM (W1 to the same-size uniform), the maximum gap with end points, the "
                                   "top-k gap sum, the C.3 response-matrix diagnostics with pass/fail and the C.6 "
                                   "posterior uncertainty. Stores a run whose top-k gaps become gap flags.")
    common(p)
    from benchloupe.jobs.coverage import CoverageConfig
    p.add_argument("benchmark")
    p.add_argument("--gaps", type=int, default=10, help="how many gaps to list (default: 10)")
    p.add_argument("--ecdf", action="store_true", help="include the ECDF points in --json output")
    add_config_args(p, CoverageConfig)
    p.set_defaults(func=cmd_coverage)


def cmd_calibrate(args) -> int:
    from benchloupe import jobs
    from benchloupe.jobs.coverage import CalibrateConfig
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    if args.cfg_k is not None and args.cfg_k < 1:
        raise CliError(f"--k {args.cfg_k}: keep at least one item (leave --k out to keep half the benchmark)")
    cfg = config_from_args(args, CalibrateConfig)
    rid = jobs.ANALYSES["calibrate"].run(db_path(args), args.benchmark, cfg, name=args.name)
    conn = connect(db_path(args))
    try:
        run = runs.get_run(conn, rid)
        sweep = runs.load_artifact(conn, rid, "sweep")
    finally:
        conn.close()
    if args.json:
        print_json({"run_id": rid, "metrics": run["metrics"], "sweep": sweep})
        return 0
    print(f"calibration run #{rid} on {args.benchmark}")
    print(kv(run["metrics"]))
    print("\nW1 to the target after Algorithm 1, by subset size:")
    print(table(sweep))
    return 0


def register_calibrate(sub, common) -> None:
    p = sub.add_parser("calibrate", help="Algorithm 1 quantile-matching calibration; --name exports the subset",
                       description="Paper 003 Appendix D: keep k items matched to the target's quantiles, using the "
                                   "latest coverage run's difficulties. With --name the subset becomes a new "
                                   "benchmark (items and results copied, origin 'derived').")
    common(p)
    from benchloupe.jobs.coverage import CalibrateConfig
    p.add_argument("benchmark")
    p.add_argument("--name", help="export the calibrated subset as this new benchmark")
    add_config_args(p, CalibrateConfig)
    p.set_defaults(func=cmd_calibrate)
