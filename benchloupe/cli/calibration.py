"""``benchloupe fit`` (DualEval joint/static/arena and the arena baselines)."""

from __future__ import annotations

from benchloupe.cli.errors import db_path
from benchloupe.cli.options import StderrProgress, add_config_args, config_from_args
from benchloupe.cli.output import kv, print_json, table


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
    comp = run["metrics"].get("compute")
    if isinstance(comp, dict):
        print(f"compute  {comp.get('backend')} on {comp.get('device')}, {comp.get('dtype')} passes, "
              f"{comp.get('optimizer')}: {comp.get('passes_equivalent')} passes-equivalent")
    if ranking and rk is not None and len(rk):
        print("\nTop models:")
        print(table(rk, limit=15))
    return 0


def cmd_fit(args) -> int:
    from benchloupe import jobs
    from benchloupe.engine.joint import JointConfig

    progress = StderrProgress(f"fit {args.mode}", quiet=args.json and False)
    if args.mode in ("bt", "avg-reward"):
        from benchloupe.jobs.calibration import BaselineConfig

        cfg = config_from_args(args, BaselineConfig) if args.mode == "bt" else BaselineConfig()
        rid = jobs.ANALYSES[args.mode].run(db_path(args), args.benchmark, cfg, arena=args.arena,
                                           reward_model=args.reward_model, external=args.external, progress=progress)
    else:
        cfg = config_from_args(args, JointConfig, mode=args.mode)
        rid = jobs.ANALYSES[args.mode].run(db_path(args), args.benchmark, cfg, arena=args.arena,
                                           reward_model=args.reward_model, external=args.external,
                                           heldout=not args.no_heldout, seed=args.seed, progress=progress,
                                           device=args.device)
    return report_run(args, rid)


def register_fit(sub, common) -> None:
    p = sub.add_parser(
        "fit", help="DualEval calibration: joint | static | arena fit, or the bt / avg-reward arena baselines",
        description="Fit DualEval (paper 000 §3) on a benchmark, store the run, print metrics and the ranking. "
                    "A joint fit takes the benchmark's static results and arena rewards from --arena (or the "
                    "benchmark itself when it holds both). Defaults are the paper's Appendix B; --variant reference "
                    "gives the public code's settings (reg 1e-3 as means, 10th-percentile ties).")
    common(p)
    from benchloupe.engine.joint import JointConfig
    p.add_argument("mode", choices=["joint", "static", "arena", "bt", "avg-reward"])
    p.add_argument("benchmark")
    p.add_argument("--arena", help="benchmark holding the arena rewards (default: the benchmark itself)")
    p.add_argument("--reward-model", help="which reward model's rewards (when the arena set has several)")
    p.add_argument("--external", help="external ranking to correlate with: CSV with model (or name) and score "
                                      "columns, or FILE:COLUMN to name the score column")
    p.add_argument("--no-heldout", action="store_true", help="skip the held-out 20%% ECE (Appendix E)")
    p.add_argument("--seed", type=int, default=0, help="seed of the held-out splits (default: 0)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="where the dense passes run: cuda (torch on a GPU), cpu (numpy), or auto (CUDA when present "
                        "and the fit is large; default); the run records device and dtype")
    add_config_args(p, JointConfig, skip=("mode",))
    p.set_defaults(func=cmd_fit)


def _diag_command(name: str, config_attr: str, help_text: str, description: str, *, arena_opt: bool = True,
                  extra=None):
    def cmd(args) -> int:
        from benchloupe import jobs
        from benchloupe.jobs import diagnostics

        cls = getattr(diagnostics, config_attr)
        cfg = config_from_args(args, cls)
        kw = {"arena": args.arena} if arena_opt else {}
        rid = jobs.ANALYSES[name].run(db_path(args), args.benchmark, cfg, progress=StderrProgress(name), **kw)
        more = extra(args, rid) if extra else None
        report_run(args, rid, ranking=name == "bootstrap", extra=more)
        if more and more["unexpected_cells"] and not args.json:
            import pandas as pd

            print("\nUnexpected cells (largest |residual| first; triage them in the Anomalies screen):")
            print(table(pd.DataFrame(more["unexpected_cells"]), limit=30))
        return 0

    def register(sub, common) -> None:
        p = sub.add_parser(name, help=help_text, description=description)
        common(p)
        from benchloupe.jobs import diagnostics
        p.add_argument("benchmark")
        if arena_opt:
            p.add_argument("--arena", help="benchmark holding arena rewards for a joint fit")
        add_config_args(p, getattr(diagnostics, config_attr))
        p.set_defaults(func=cmd)

    return register


def _flag_rows(args, run_id: int):
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    conn = connect(db_path(args))
    try:
        fl = curation.flags(conn, run_id=run_id, kind="anomaly")
    finally:
        conn.close()
    if fl.empty:
        return {"unexpected_cells": []}
    rows = [{"model": r.model, "item": r.item_key, **{k: r.payload[k] for k in ("source", "residual", "expected_p",
                                                                               "observed")}}
            for r in fl.itertuples()]
    return {"unexpected_cells": rows}


register_compress = _diag_command(
    "compress", "CompressConfig", "Fisher-information scores, subset recovery, top-Fisher export, retirement",
    "Paper 000 §4.2: per-item Fisher information (static a^2 p(1-p) averaged over models; arena trace formula over "
    "decisive pairs), the subset-recovery experiment (fractions 2.5%%-100%%, five strategies) and, on request, a "
    "top-Fisher subset exported as a new benchmark and the least informative items retired.")
register_anomalies = _diag_command(
    "anomalies", "AnomalyConfig", "residual anomaly (contamination) candidates, with the synthetic protocol on request",
    "Paper 000 §4.3: standardised static residuals and averaged arena residuals; cells above 3.5 sigma become "
    "anomaly flags for triage. --protocol yes adds the synthetic contamination experiment (AUROC/AUPRC).",
    extra=_flag_rows)
register_screen = _diag_command(
    "screen", "ScreenConfig", "screen a newly imported model against a frozen clean fit",
    "Paper 000 §4.3, operational setting: fit the new model's ability with items frozen at a clean run's "
    "parameters and list its unexpected cells.", arena_opt=False, extra=_flag_rows)
register_bootstrap = _diag_command(
    "bootstrap", "BootstrapConfig", "question-level cluster bootstrap: ability SEs, 95% and rank intervals",
    "Paper 000 Appendix D: B replicates resampling items within each source, rewards re-standardised.")
