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
