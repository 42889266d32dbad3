"""``benchloupe fit`` (DualEval joint/static/arena and the arena baselines)."""

from __future__ import annotations

import contextlib
import math

from benchloupe import ranges
from benchloupe.cli.errors import CliError, connect_db, db_path, stored_run
from benchloupe.cli.options import (
    StderrProgress,
    add_config_args,
    add_worker_args,
    config_from_args,
    ranged_argument,
    workers_of,
)
from benchloupe.cli.output import kv, print_json, table
from benchloupe.textsafe import visible


def _ranking(conn, run_id: int, limit: int | None = None):
    from benchloupe.store import runs

    df = runs.run_models(conn, run_id)
    cols = [c for c in ("rank", "name", "family", "theta", "se", "lo", "hi") if c in df.columns]
    df = df[cols].dropna(subset=["rank"]).sort_values("rank")
    if "family" in df.columns and df["family"].notna().any():  # a model with no family says so (issue 10)
        df["family"] = df["family"].fillna("none")
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
    print(f"run #{run_id} {run['kind']} on {visible(run['benchmark'])}: {run['status']}")
    flat = {k: v for k, v in run["metrics"].items() if not isinstance(v, (list, dict)) and not _missing(v)}
    print(kv(flat))
    for n in run["metrics"].get("notes", []) or []:
        print(f"note: {visible(n)}")
    for w in run["metrics"].get("warnings", []) or []:
        print(f"warning: {visible(w)}")
    print(kv({"timings": run["timings"]}))
    comp = run["metrics"].get("compute")
    if isinstance(comp, dict):
        print(f"compute  {comp.get('backend')} on {comp.get('device')}, {comp.get('dtype')} passes, "
              f"{comp.get('optimizer')}: {comp.get('passes_equivalent')} passes-equivalent")
    if ranking and rk is not None and len(rk):
        print("\nTop models:")
        print(table(rk.dropna(axis=1, how="all"), limit=15))
    return 0


def add_external_args(p) -> None:
    p.add_argument("--external", help="external ranking to correlate with: CSV with model (or name) and score "
                                      "columns, or FILE:COLUMN to name the score column")
    p.add_argument("--external-model", metavar="COLUMN", help="the --external file's model-name column")
    p.add_argument("--external-map", metavar="COLUMN|FILE",
                   help="names of --external rows in the workspace: a column of that file, or a CSV whose first two "
                        "columns are (external name, workspace model name)")


def _external(args) -> dict:
    return {"external": args.external, "external_model": args.external_model, "external_map": args.external_map}


def _missing(v) -> bool:
    """A metric that does not apply to this run (None or NaN: e.g. gamma of a static-only fit) is omitted."""
    return v is None or (isinstance(v, float) and v != v)


def _preference_config(args):
    """The ``--bootstrap`` / ``--prior-alpha`` settings of ``fit bt`` on preferences, or None when neither is
    given (the job's defaults). Checked here, before the database is touched, with the options' names."""
    if args.bootstrap is None and args.prior_alpha is None:
        return None
    if args.mode != "bt":
        raise CliError(f"--bootstrap and --prior-alpha are options of `fit bt` on pairwise preferences, not of "
                       f"`fit {args.mode}`")
    from benchloupe.jobs.pairwise import MAX_BOOTSTRAP, PairwiseConfig

    kw = {}
    if args.bootstrap is not None:
        if not (args.bootstrap == 0 or 2 <= args.bootstrap <= MAX_BOOTSTRAP):
            raise CliError(f"--bootstrap must be 0 (no intervals) or 2 to {MAX_BOOTSTRAP:,} replicates, "
                           f"got {args.bootstrap}")
        kw["bootstrap"] = args.bootstrap
    if args.prior_alpha is not None:
        if not (math.isfinite(args.prior_alpha) and args.prior_alpha >= 0):
            raise CliError(f"--prior-alpha must be a finite number >= 0 (pseudo-comparisons per model; 0 = the "
                           f"plain MLE), got {args.prior_alpha}")
        kw["alpha"] = args.prior_alpha
    return PairwiseConfig(**kw)


def cmd_fit(args) -> int:
    from benchloupe import jobs
    from benchloupe.jobs.calibration import JointConfig

    progress = StderrProgress(f"fit {args.mode}", quiet=args.json and False)
    preference = _preference_config(args)
    if args.mode in ("bt", "avg-reward"):
        from benchloupe.jobs.calibration import BaselineConfig

        cfg = config_from_args(args, BaselineConfig) if args.mode == "bt" else BaselineConfig()
        rid = jobs.analysis(args.mode).run(db_path(args), args.benchmark, cfg, arena=args.arena,
                                           reward_model=args.reward_model, progress=progress, seed=args.seed,
                                           preference=preference, **_external(args))
    else:
        cfg = config_from_args(args, JointConfig, mode=args.mode)
        rid = jobs.analysis(args.mode).run(db_path(args), args.benchmark, cfg, arena=args.arena,
                                           reward_model=args.reward_model, heldout=not args.no_heldout,
                                           seed=args.seed, progress=progress, device=args.device,
                                           chance=args.chance, heldout_splits=args.heldout_splits,
                                           **_external(args))
    return report_run(args, rid)


def register_fit(sub, common) -> None:
    p = sub.add_parser(
        "fit", help="DualEval calibration: joint | static | arena fit, or the bt / avg-reward arena baselines",
        description="Fit DualEval (paper 000 §3) on a benchmark, store the run, print metrics and the ranking. "
                    "A joint fit takes the benchmark's static results and arena rewards from --arena (or the "
                    "benchmark itself when it holds both). Defaults are the paper's Appendix B; --variant reference "
                    "gives the public code's settings (reg 1e-3 as means, 10th-percentile ties).")
    common(p)
    from benchloupe.jobs.calibration import JointConfig
    p.add_argument("mode", choices=["joint", "static", "arena", "bt", "avg-reward"])
    p.add_argument("benchmark")
    p.add_argument("--arena", help="benchmark holding the arena rewards (default: the benchmark itself)")
    p.add_argument("--reward-model", help="which reward model's rewards (when the arena set has several)")
    add_external_args(p)
    p.add_argument("--no-heldout", action="store_true", help="skip the held-out 20%% ECE (Appendix E)")
    ranged_argument(p, "--heldout-splits", range=ranges.Range(1, 20, integer=True, unit="split"), default=None,
                    metavar="N", help="seeded 80/20 cell splits the held-out ECE averages (seeds --seed, --seed + 1, "
                                      "...; default: 1 for static, the paper's 3 for joint and arena; "
                                      "3 reproduces Appendix E)")
    ranged_argument(p, "--seed", range=ranges.SEED, default=0,
                    help="seed of the held-out splits and of bt's bootstrap (default: 0)")
    pref = p.add_argument_group("bt on pairwise preferences (battles, AlpacaEval pairs; no rewards)")
    ranged_argument(pref, "--bootstrap", range=ranges.FIELDS["PairwiseConfig.bootstrap"], metavar="N",
                      help="bootstrap replicates over the comparisons for percentile intervals; 0 = none "
                           "(default: 200)")
    ranged_argument(pref, "--prior-alpha", range=ranges.FIELDS["PairwiseConfig.alpha"], metavar="A",
                      help="pseudo-comparisons per model against a reference of strength 1 (half won, half lost): "
                           "keeps all-win/all-loss models finite; 0 = the plain MLE (default: 0.5)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="where the dense passes run: cuda (torch on a GPU), cpu (numpy), or auto (CUDA when present "
                        "and the fit is large; default); the run records device and dtype")
    p.add_argument("--chance", choices=["stated", "estimate", "none"], default="stated",
                   help="static items' chance levels (guessing): stated = as imported, tested against the data (a "
                        "likelihood-ratio test against one estimated asymptote; a warning when they reject it; "
                        "default); estimate = one lower asymptote shared by the items, estimated from the data "
                        "(marginal ML); none = the plain 2PL")
    add_config_args(p, JointConfig, skip=("mode",))
    p.set_defaults(func=cmd_fit)


def _diag_command(name: str, config_attr: str, help_text: str, description: str, *, arena_opt: bool = True,
                  extra=None, precheck=None, reports: bool = False, more_args=None, replicates: bool = False):
    """A diagnostics command. ``reports``: the job fills a ``report`` dict with what the command prints, which
    ``extra(args, run_id, report)`` uses instead of reading it back from the store.  ``replicates``: its analysis
    runs replicates, placed by ``--jobs`` / ``--cluster``."""
    def cmd(args) -> int:
        from benchloupe import jobs
        from benchloupe.jobs import diagnostics

        cls = getattr(diagnostics, config_attr)
        cfg = config_from_args(args, cls)
        if precheck:
            precheck(args, cfg)
        kw = {"arena": args.arena, "reward_model": args.reward_model} if arena_opt else {}
        box: dict = {}
        if reports:
            kw["report"] = box
        with workers_of(args) if replicates else contextlib.nullcontext():
            rid = jobs.analysis(name).run(db_path(args), args.benchmark, cfg, progress=StderrProgress(name), **kw)
        more = (extra(args, rid, box) if reports else extra(args, rid)) if extra else None
        report_run(args, rid, ranking=name == "bootstrap", extra=more)
        if more and len(more["unexpected_cells"]) and not args.json:
            import pandas as pd

            print("\nUnexpected cells (largest |residual| first; triage them in the Anomalies screen):")
            print(table(pd.DataFrame(_first_rows(more["unexpected_cells"], 30))))
        if more and more.get("recovery") and not args.json:
            import pandas as pd

            print("\nSubset recovery (Spearman with the full-data ranking; random: mean and 95% over draws):")
            print(table(pd.DataFrame(more["recovery"])))
        if more and more.get("protocol") and not args.json:
            _print_protocol(more["protocol"])
        if more and more.get("estimate_table") and not args.json:
            from benchloupe.cli.estimate import print_validation

            print_validation(more)
        if more and more.get("windows") and not args.json:
            import pandas as pd

            print("\nPer-model window tests (shift = mean residual on items before the cutoff minus after):")
            print(table(pd.DataFrame(more["windows"]), limit=40))
        return 0

    def register(sub, common) -> None:
        p = sub.add_parser(name, help=help_text, description=description)
        common(p)
        from benchloupe.jobs import diagnostics
        p.add_argument("benchmark")
        if arena_opt:
            p.add_argument("--arena", help="benchmark holding arena rewards for a joint fit")
            p.add_argument("--reward-model", help="which reward model's rewards (when the arena set has several)")
        add_config_args(p, getattr(diagnostics, config_attr))
        if more_args:
            more_args(p)
        if replicates:
            add_worker_args(p)
        p.set_defaults(func=cmd)

    return register


def _flag_rows(args, run_id: int):
    from benchloupe.store import curation
    from benchloupe.store.db import connect

    conn = connect(db_path(args))
    try:
        rows = curation.flag_cells(conn, run_id, "anomaly", ("source", "residual", "expected_p", "observed"))
    finally:
        conn.close()
    return {"unexpected_cells": rows}


def _first_rows(cells, n: int) -> list[dict]:
    """The first ``n`` unexpected cells as dicts (a list of them, or the job's Columns)."""
    if isinstance(cells, list):
        return cells[:n]
    import numpy as np

    return cells.take(np.arange(min(n, len(cells)))).records()


def _anomaly_rows(args, run_id: int, report: dict):
    """The unexpected cells (as the job reported them: the flags it stored, not read back) and, after
    ``--protocol yes``, the whole protocol table (issue 23)."""
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    out = {"unexpected_cells": report["unexpected_cells"]}
    conn = connect(db_path(args))
    try:
        tab = runs.load_artifact(conn, run_id, "protocol_table")
    finally:
        conn.close()
    if tab is not None and len(tab):
        out["protocol"] = [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}
                           for r in tab.to_dict("records")]
    return out


def _print_protocol(rows: list[dict]) -> None:
    import pandas as pd

    df = pd.DataFrame(rows)
    df["rate"] = df["rate"].map(lambda r: f"{r:.1%}")
    for c in ("auroc", "auprc", "item_auroc", "ceiling_auroc", "ceiling_auprc", "ceiling_noise", "below_ceiling"):
        if c in df:
            df[c] = df[c].map(lambda v: "-" if v is None or v != v else f"{v:.4f}")
    df = df.rename(columns={"p_model": "residual", "item_auroc": "item AUROC", "ceiling_auroc": "ceiling AUROC",
                            "ceiling_auprc": "ceiling AUPRC", "ceiling_noise": "noise",
                            "below_ceiling": "below ceiling", "auroc": "AUROC",
                            "auprc": "AUPRC"})
    print("\nSynthetic contamination protocol (paper 000 §4.3, mean of 5 seeds; residual: guessing = with the items' "
          "chance level, 2pl = without; ceiling = the same protocol on data simulated from this fit (from a fit "
          "with the estimated asymptote where the data reject the stated chance), the best of its true "
          "probabilities and the detector's fit redone on the simulated data; noise = two Monte Carlo standard "
          "errors of a row's difference from it; not a bound where a warning above says the detector beats it):")
    print(table(df))


def _recovery_rows(args, run_id: int):
    """The recovery table as printed: Spearman per strategy and fraction; the random baseline's band over its
    draws, their number and the random mean's standard error; the chosen strategy's margin over the random mean,
    marked when it is within noise (issue 34.5)."""
    from benchloupe.jobs.diagnostics import NOISE_Z, random_se
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    conn = connect(db_path(args))
    try:
        summ = runs.load_artifact(conn, run_id, "recovery_summary")
        strategy = (runs.get_run(conn, run_id)["config"] or {}).get("strategy", "targeted")
    finally:
        conn.close()
    if summ is None or not len(summ):
        return {"unexpected_cells": [], "recovery": []}
    piv = summ.pivot(index="fraction", columns="strategy", values="spearman_mean")
    rnd = summ[summ["strategy"] == "random"].set_index("fraction")
    se = random_se(summ)
    rows = []
    for f in piv.index:
        row = {"fraction": f"{f:.1%}", **{k: round(float(v), 4) for k, v in piv.loc[f].items()}}
        if f in rnd.index:
            row["random 95%"] = f"[{rnd.loc[f, 'spearman_lo']:.4f}, {rnd.loc[f, 'spearman_hi']:.4f}]"
            if "draws" in rnd:
                row["draws"] = int(rnd.loc[f, "draws"])
            if len(se):
                row["random SE"] = round(float(se[f]), 4)
                if strategy in piv.columns:
                    m = float(piv.loc[f, strategy] - rnd.loc[f, "spearman_mean"])
                    noise = abs(m) < NOISE_Z * float(se[f]) and round(m, 4) != 0
                    row[f"{strategy} - random"] = f"{m:+.4f}" + (" within noise" if noise else "")
        rows.append(row)
    return {"unexpected_cells": [], "recovery": rows}


MIN_ITEMS_LEFT = 2  # the fewest active items a later fit or coverage run can work with (paper 003 needs two)


def _check_retirement(args, cfg) -> None:
    """Refuse a ``--retire-lowest`` that would leave fewer than MIN_ITEMS_LEFT active items (issue 10)."""
    if not cfg.retire_lowest:
        return
    if cfg.retire_lowest < 0:
        raise CliError(f"--retire-lowest must be a positive number of items, got {cfg.retire_lowest}")
    from benchloupe.store import read

    conn = connect_db(args)
    try:
        active = sum(len(read.items(conn, b, status="active")) for b in {args.benchmark, args.arena} if b)
    finally:
        conn.close()
    most = max(0, active - MIN_ITEMS_LEFT)
    if cfg.retire_lowest > most:
        raise CliError(f"--retire-lowest {cfg.retire_lowest} would leave {max(active - cfg.retire_lowest, 0)} of "
                       f"{active} active items; at most {most} may go so that {MIN_ITEMS_LEFT} remain to fit")


def _compress_rows(args, run_id: int):
    """What compress prints after its summary: the recovery table, or for --for estimate / --validate the
    selection and the cross-validated table."""
    from benchloupe.cli.estimate import validation_rows

    out = validation_rows(args, run_id)
    return out if out is not None else _recovery_rows(args, run_id)


register_compress = _diag_command(
    "compress", "CompressConfig", "Fisher-information scores, subset recovery, top-Fisher export, retirement",
    "Paper 000 §4.2: per-item Fisher information (static a^2 p(1-p) averaged over models; arena trace formula over "
    "decisive pairs), the subset-recovery experiment (fractions 2.5%-100%: targeted selection, top Fisher, top "
    "sharpness, difficulty-matched, random, random 2PL+BT; random with 95% intervals over draws) and, on request, "
    "the --strategy subset (default: targeted, information spread over the --target models) exported as a new "
    "benchmark and the least informative items retired. --for estimate --k K selects K items for predicting a new "
    "model's full accuracy instead (`benchloupe estimate`), --validate 10,25,50,100 cross-validates every selection "
    "x estimator over held-out models (docs/ESTIMATE.md).", extra=_compress_rows, precheck=_check_retirement,
    more_args=lambda p: p.add_argument("--for", dest="cfg_purpose", choices=("ranking", "estimate"),
                                       help="ranking (default): subsets for rank recovery; estimate: --k items for "
                                            "predicting a new model's accuracy (same as --purpose)"),
    replicates=True)

register_anomalies = _diag_command(
    "anomalies", "AnomalyConfig", "residual anomaly (contamination) candidates, with the synthetic protocol on request",
    "Paper 000 §4.3: standardised static residuals and averaged arena residuals; cells above 3.5 sigma become "
    "anomaly flags for triage. --protocol yes adds the synthetic contamination experiment: AUROC/AUPRC at every "
    "injection rate for the clean-reference and the contaminated-fit detector, with the guessing-aware and the 2PL "
    "residual when items carry a chance level, each beside the oracle ceiling of this benchmark (docs/DUALEVAL.md).",
    extra=_anomaly_rows, reports=True, replicates=True)
register_screen = _diag_command(
    "screen", "ScreenConfig", "screen a newly imported model against a frozen clean fit",
    "Paper 000 §4.3, operational setting: fit the new model's ability with items frozen at a clean run's "
    "parameters and list its unexpected cells.", arena_opt=False, extra=_flag_rows)
register_bootstrap = _diag_command(
    "bootstrap", "BootstrapConfig", "question-level cluster bootstrap: ability SEs, 95%% and rank intervals",
    "Paper 000 Appendix D: B replicates resampling items within each source, rewards re-standardised; the "
    "replicates run on every core (--jobs) or a Dask cluster (--cluster), with the same numbers on any.",
    replicates=True)


def cmd_evaluate(args) -> int:
    from benchloupe import jobs
    from benchloupe.jobs.calibration import EvaluateConfig

    cfg = config_from_args(args, EvaluateConfig)
    rid = jobs.analysis("evaluate").run(db_path(args), args.benchmark, cfg, arena=args.arena,
                                        reward_model=args.reward_model, progress=StderrProgress("evaluate"),
                                        **_external(args))
    run, tab = stored_run(args, rid, "comparison")
    if args.json:
        print_json({"run_id": rid, "kind": "evaluate", "benchmark": run["benchmark"], "metrics": run["metrics"],
                    "timings": run["timings"], "table": tab})
        return 0
    print(f"run #{rid} evaluate on {visible(run['benchmark'])}: {run['metrics']['splits']} question splits, "
          f"{run['metrics']['holdout']:.0%} held out (paper 000 Table 2; mean, sd over splits)")
    show = tab.rename(columns={"method": "Method", "pair_acc": "Pair Acc.", "static_rho": "Static rho",
                               "arena_rho": "Arena rho", "external_rho": "Public rho"})
    print(table(show))
    if run["metrics"].get("pair_ablation"):
        import pandas as pd

        print("\nPair-treatment ablation (Appendix I, Table 5; one held-out pair set):")
        print(table(pd.DataFrame(run["metrics"]["pair_ablation"])))
    for key, title in (("cross_reward_models", "Cross-reward-model agreement (Appendix F)"),
                       ("reward_vs_human", "Reward-model agreement with human preferences (Appendix C)")):
        if run["metrics"].get(key):
            import pandas as pd

            print(f"\n{title}:")
            print(table(pd.DataFrame(run["metrics"][key])))
    for w in run["metrics"].get("warnings", []) or []:
        print(f"warning: {visible(w)}")
    print(kv({"timings": run["timings"]}))
    return 0


def register_evaluate(sub, common) -> None:
    p = sub.add_parser(
        "evaluate", help="Table 2 held-out comparison: DualEval vs static 2PL vs arena BT vs average reward",
        description="Paper 000 Table 2: over 3 random question splits with 20% of the questions held out, train "
                    "DualEval (joint), the static-only 2PL, arena Bradley-Terry and average reward on the rest and "
                    "report held-out decisive-pair accuracy, Static rho (vs the full-data static 2PL), Arena rho "
                    "(vs the full-data arena BT) and, with --external, Public rho.")
    common(p)
    from benchloupe.jobs.calibration import EvaluateConfig
    p.add_argument("benchmark")
    p.add_argument("--arena", help="benchmark holding the arena rewards (default: the benchmark itself)")
    p.add_argument("--reward-model", help="which reward model's rewards (when the arena set has several)")
    add_external_args(p)
    add_config_args(p, EvaluateConfig)
    p.set_defaults(func=cmd_evaluate)


def _window_rows(args, run_id: int):
    from benchloupe.store import runs
    from benchloupe.store.db import connect

    conn = connect(db_path(args))
    try:
        tab = runs.load_artifact(conn, run_id, "windows")
    finally:
        conn.close()
    cols = [c for c in ("model", "shift", "ci_low", "ci_high", "p_perm", "p_holm", "shift_loo", "p_perm_loo",
                        "n_pre", "n_post", "flagged") if tab is not None and c in tab.columns]
    return {"unexpected_cells": [], "windows": [] if tab is None else tab[cols].to_dict("records")}


register_contamination = _diag_command(
    "contamination", "ContaminationConfig", "contamination windows: residual shift before vs after each cutoff",
    "Items carry a date (item metadata 'date'), models a cutoff (models file column 'cutoff'); without those keys "
    "the one date-valued metadata key of each side is used (and named), else the run lists the keys found. Per "
    "model: the "
    "mean residual (observed rate - predicted p) on items dated on or before its cutoff minus after it, with a "
    "bootstrap 95% interval, a permutation p (Holm over models) and the same with item parameters fitted without "
    "that model. Significant shifts become anomaly flags (payload source 'contamination_window').",
    extra=_window_rows)
