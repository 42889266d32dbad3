"""``benchloupe fit`` (DualEval joint/static/arena and the arena baselines)."""

from __future__ import annotations

from benchloupe.tui.cli import db_path
from benchloupe.tui.cliutil import StderrProgress, add_config_args, config_from_args
from benchloupe.tui.output import kv, print_json, table


def _ranking(conn, run_id: int, limit: int | None = None):
    from benchloupe.store import runs

    df = runs.run_models(conn, run_id)
    cols = [c for c in ("rank", "name", "family", "theta", "se", "lo", "hi") if c in df.columns]
    df = df[cols].dropna(subset=["rank"]).sort_values("rank")
    return df.head(limit) if limit else df


def report_run(args, run_id: int, *, ranking: bool = True, extra: dict | None = None) -> int:
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    conn = connect(db_path(args))
    try:
        run = runs.get_run(conn, run_id)
        rk = _ranking(conn, run_id) if ranking else None
    finally:
        conn.close()
    payload = {"run_id": run_id, "kind": run["kind"], "benchmark": run["benchmark"], "status": run["status"],
               "metrics": run["metrics"], "timings": run["timings"], **(extra or {})}
    if ranking:
        payload["ranking"] = rk
    if args.json:
        print_json(payload)
        return 0
    print(f"run #{run_id} {run['kind']} on {run['benchmark']}: {run['status']}")
    flat = {k: v for k, v in run["metrics"].items() if not isinstance(v, (list, dict))}
    print(kv(flat))
    for w in run["metrics"].get("warnings", []) or []:
        print(f"warning: {w}")
    print(kv({"timings": run["timings"]}))
    if ranking and rk is not None and len(rk):
        print("\nTop models:")
        print(table(rk, limit=15))
    return 0


def cmd_fit(args) -> int:
    from benchloupe.engine import jobs
    from benchloupe.engine.joint import JointConfig

    progress = StderrProgress(f"fit {args.mode}", quiet=args.json and False)
    if args.mode in ("bt", "avg-reward"):
        from benchloupe.engine.jobs.calibration import BaselineConfig

        cfg = config_from_args(args, BaselineConfig) if args.mode == "bt" else BaselineConfig()
        rid = jobs.ANALYSES[args.mode].run(db_path(args), args.benchmark, cfg, arena=args.arena,
                                           reward_model=args.reward_model, external=args.external, progress=progress)
    else:
        cfg = config_from_args(args, JointConfig, mode=args.mode)
        rid = jobs.ANALYSES[args.mode].run(db_path(args), args.benchmark, cfg, arena=args.arena,
                                           reward_model=args.reward_model, external=args.external,
                                           heldout=not args.no_heldout, seed=args.seed, progress=progress)
    return report_run(args, rid)


def register_fit(sub, common) -> None:
    from benchloupe.engine.joint import JointConfig

    p = sub.add_parser(
        "fit", help="DualEval calibration: joint | static | arena fit, or the bt / avg-reward arena baselines",
        description="Fit DualEval (paper 000 §3) on a benchmark, store the run, print metrics and the ranking. "
                    "A joint fit takes the benchmark's static results and arena rewards from --arena (or the "
                    "benchmark itself when it holds both). Defaults are the paper's Appendix B; --variant reference "
                    "gives the public code's settings (reg 1e-3 as means, 10th-percentile ties).")
    common(p)
    p.add_argument("mode", choices=["joint", "static", "arena", "bt", "avg-reward"])
    p.add_argument("benchmark")
    p.add_argument("--arena", help="benchmark holding the arena rewards (default: the benchmark itself)")
    p.add_argument("--reward-model", help="which reward model's rewards (when the arena set has several)")
    p.add_argument("--external", help="CSV model,score of an external ranking to correlate with")
    p.add_argument("--no-heldout", action="store_true", help="skip the held-out 20%% ECE (Appendix E)")
    p.add_argument("--seed", type=int, default=0, help="seed of the held-out splits (default: 0)")
    add_config_args(p, JointConfig, skip=("mode",))
    p.set_defaults(func=cmd_fit)
