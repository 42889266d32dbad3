"""``benchloupe estimate``: the full-benchmark accuracy of partly evaluated models from a frozen calibration, with
a 95 % interval (issue 34; benchloupe.jobs.estimate)."""

from __future__ import annotations

from benchloupe import ranges
from benchloupe.cli.errors import connect_db, db_path
from benchloupe.cli.options import StderrProgress, ranged_argument
from benchloupe.cli.output import kv, print_json, table
from benchloupe.textsafe import visible
from benchloupe.words import estimate_text

RUN_RANGE = ranges.FIELDS["EstimateConfig.run"]  # the Runs screen's form reads the same ranges
LEVEL_RANGE = ranges.FIELDS["EstimateConfig.level"]


SE_RANGE = ranges.Range(0, 0.5, lo_open=True, hi_open=True, unit="sd of the predicted accuracy; 0.01 = about +-2 points")
N_RANGE = ranges.count(1, 10**9, "items")


def cmd_adaptive(args) -> int:
    from benchloupe.jobs import estimate as job
    from benchloupe.store import runs

    cfg = job.AdaptiveConfig(target_se=args.target_se if args.target_se is not None else 0.01,
                             max_items=args.max_items or 0)
    rid = job.run_adaptive(db_path(args), args.benchmark, cfg, progress=StderrProgress("estimate"))
    conn = connect_db(args)
    try:
        run = runs.get_run(conn, rid)
    finally:
        conn.close()
    m = run["metrics"]
    if args.json:
        print_json({"run_id": rid, "kind": run["kind"], "benchmark": run["benchmark"], "metrics": m})
        return 0
    print(f"run #{rid} adaptive testing simulated on {visible(run['benchmark'])}: {m['models']} held-out models "
          f"(5 folds), one most-informative item at a time until the predicted accuracy's sd <= {m['target_se']}")
    print(kv({"items needed (median)": m["items_median"], "items needed (90th percentile)": m["items_p90"],
              "reached the target": f"{100 * m['reached_share']:.1f} %", "MAE (points)": m["mae_points"],
              "90th-percentile error (points)": m["p90_error_points"], "95 % interval coverage": m["coverage"],
              "MAE of as many random items (points)": m["random_same_k_mae_points"],
              "interval stretch (range over folds)": f"{m['stretch_min']:.2f}-{m['stretch_max']:.2f}"}))
    return 0


def cmd_estimate(args) -> int:
    from benchloupe.jobs import estimate as job
    from benchloupe.store import runs

    if args.adaptive:
        return cmd_adaptive(args)
    if args.target_se is not None or args.max_items is not None:
        from benchloupe.cli.errors import UsageError

        raise UsageError("--target-se and --max-items go with --adaptive (the simulated adaptive test)")
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
    p.add_argument("--adaptive", action="store_true",
                   help="simulate computerized adaptive testing over held-out models (5 folds) instead: items "
                        "needed for the target precision")
    ranged_argument(p, "--target-se", range=SE_RANGE, help="with --adaptive: stop at this sd of the predicted "
                                                           "accuracy (default 0.01, about +-2 points)")
    ranged_argument(p, "--max-items", range=N_RANGE, help="with --adaptive: at most this many items per model")
    p.set_defaults(func=cmd_estimate)


def cmd_next_items(args) -> int:
    from benchloupe.jobs import estimate as job

    out = job.next_items(db_path(args), args.benchmark, args.model, args.n or 20, run=args.run or 0,
                         export_name=args.export_name or "")
    if args.json:
        print_json(out)
        return 0
    import pandas as pd

    shown = estimate_text(out["estimate"], out["estimate_lo"], out["estimate_hi"], out["seen"], out["n_items"])
    print(f"{visible(out['model'])} on {visible(args.benchmark)}: {shown} (calibration run "
          f"#{out['calibration_run']}); the next {len(out['items'])} items to run, most informative at its current "
          "ability first:")
    print(table(pd.DataFrame(out["items"]), max_width=60))
    if out.get("exported_benchmark"):
        print(f"exported as benchmark {visible(out['exported_benchmark'])} (`benchloupe export items "
              f"{visible(out['exported_benchmark'])}` writes them for the harness)")
    return 0


def register_next_items(sub, common) -> None:
    p = sub.add_parser("next-items", help="the next items to run for a partly evaluated model (adaptive testing)",
                       description="Issue 34: the unseen items with the most information about the model's ability "
                                   "at its current estimate (frozen calibration), listed and, with --export-name, "
                                   "exported as a new benchmark for the harness.")
    common(p)
    p.add_argument("benchmark")
    p.add_argument("--model", required=True, metavar="M")
    ranged_argument(p, "--n", range=N_RANGE, help="how many items (default 20)")
    ranged_argument(p, "--run", range=RUN_RANGE, help="the calibration run (default: the latest static or joint fit)")
    p.add_argument("--export-name", metavar="NAME", help="write the items as a new benchmark")
    p.set_defaults(func=cmd_next_items)


def cmd_compare(args) -> int:
    from benchloupe.jobs import estimate as job

    out = job.compare_models(db_path(args), args.benchmark, args.a, args.b)
    if args.json:
        print_json(out)
        return 0
    import pandas as pd

    print(f"{visible(args.a)} vs {visible(args.b)} on {visible(args.benchmark)}: {out['common_items']} items both "
          f"answered")
    print(kv({"accuracy A": round(out["accuracy_a"], 4), "accuracy B": round(out["accuracy_b"], 4),
              "A - B (95 % interval)": f"{100 * out['difference']:+.1f} points [{100 * out['difference_lo']:+.1f}, "
                                       f"{100 * out['difference_hi']:+.1f}]",
              "A right, B wrong": out["a_only"], "A wrong, B right": out["b_only"],
              "exact McNemar p": round(out["mcnemar_p"], 5)}))
    gb = out.get("group_bootstrap")
    if gb:
        print(f"paired bootstrap clustered by item group ({gb['groups']} groups, {gb['replicates']} replicates): A - B "
              f"[{100 * gb['difference_lo']:+.1f}, {100 * gb['difference_hi']:+.1f}] points, p = {gb['p_two_sided']:.4f}")
    te = out.get("through_estimate")
    if te:
        print(f"note: {te['note']}")
        print(f"estimated full accuracy: A {100 * te['estimate_a']:.1f} % ({te['seen_a']} of {te['n_items']} items), "
              f"B {100 * te['estimate_b']:.1f} % ({te['seen_b']} of {te['n_items']}); A - B "
              f"{100 * te['difference']:+.1f} points [{100 * te['difference_lo']:+.1f}, {100 * te['difference_hi']:+.1f}]")
    if out["differing_items"]:
        print("\nItems where they differ (most informative at their abilities first):")
        print(table(pd.DataFrame(out["differing_items"]), max_width=60, limit=30))
    return 0


def register_compare(sub, common) -> None:
    p = sub.add_parser("compare", help="is A really better than B: exact McNemar and the paired difference",
                       description="Issue 34: on the items both models answered, the exact McNemar test, the paired "
                                   "difference in accuracy with its 95% interval and the items where they differ, "
                                   "sorted by information at their abilities; a partly evaluated model also "
                                   "compares through its estimate, and says so.")
    common(p)
    p.add_argument("benchmark")
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B")
    p.set_defaults(func=cmd_compare)


def validation_rows(args, run_id: int) -> dict | None:
    """For a ``compress --for estimate`` / ``--validate`` run: its selected items and its cross-validated table
    (as the command prints and ``--json`` carries them); None for any other compress run."""
    from benchloupe.store import runs

    conn = connect_db(args)
    try:
        run = runs.get_run(conn, run_id)
        if (run["metrics"] or {}).get("purpose") != "estimate":
            return None
        tab = runs.load_artifact(conn, run_id, "estimate_validation")
        items = runs.run_items(conn, run_id)
    finally:
        conn.close()
    out: dict = {"unexpected_cells": [], "estimate_table": [] if tab is None else tab.to_dict("records")}
    if "selected" in items:
        sel = items[items["selected"].astype(bool)]
        out["selected_items"] = [{"key": k, "weight": round(float(w), 5)} for k, w in zip(sel["key"], sel["weight"])]
    return out


def print_validation(more: dict) -> None:
    import pandas as pd

    if more.get("selected_items"):
        keys = [visible(str(r["key"])) for r in more["selected_items"]]
        print(f"\nSelected for estimation ({len(keys)} items, cluster-size weights): " + ", ".join(keys[:40])
              + (" ..." if len(keys) > 40 else ""))
    rows = more.get("estimate_table") or []
    if not rows:
        return
    df = pd.DataFrame(rows)
    cell = df.assign(v=[f"{m:.2f} / {p:.2f}" for m, p in zip(df["mae"], df["p90"])])
    wide = cell.pivot_table(index=["k", "selection"], columns="estimator", values="v", aggfunc="first", sort=False)
    cols = [c for c in ("mean", "irt", "pirt", "gpirt", "ours") if c in wide.columns]
    wide = wide[cols].reset_index()
    ours = df[df["estimator"] == "ours"].set_index(["k", "selection"])
    wide["ours coverage"] = [f"{ours.loc[(k, s), 'coverage']:.3f}" for k, s in zip(wide["k"], wide["selection"])]
    wide["ours width"] = [f"{ours.loc[(k, s), 'width']:.1f}" for k, s in zip(wide["k"], wide["selection"])]
    print("\nCross-validated over held-out models (5 folds): MAE / 90th-percentile error of the predicted full "
          "accuracy, in points; coverage and mean width of ours' 95 % interval:")
    print(table(wide, max_width=60))
