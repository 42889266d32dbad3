"""``benchloupe coverage`` and ``benchloupe calibrate`` (paper 003)."""

from __future__ import annotations

from benchloupe import ranges
from benchloupe.cli.errors import CliError, db_path, stored_run
from benchloupe.cli.options import (
    StderrProgress,
    add_config_args,
    add_worker_args,
    config_from_args,
    ranged_argument,
    workers_of,
)
from benchloupe.cli.output import kv, print_json, table


def cmd_coverage(args) -> int:
    from benchloupe import jobs
    from benchloupe.jobs.coverage import CoverageConfig

    cfg = config_from_args(args, CoverageConfig)
    with workers_of(args):  # the C.6 uncertainty draws are replicates (issue 36)
        rid = jobs.analysis("coverage").run(db_path(args), args.benchmark, cfg, progress=StderrProgress("coverage"),
                                            device=args.device)
    run, gaps, ecdf = stored_run(args, rid, "gaps", "ecdf")
    m = run["metrics"]
    if args.json:
        print_json({"run_id": rid, "benchmark": args.benchmark, "metrics": m, "timings": run["timings"],
                    "gaps": gaps.head(args.gaps), "ecdf": ecdf if args.ecdf else None})
        return 0
    print(f"coverage run #{rid} on {args.benchmark}" + (f" (group {cfg.group})" if cfg.group else ""))
    print(f"difficulties: {m.get('difficulty_source', '1PL fit')}")
    comp = m.get("compute")
    if isinstance(comp, dict) and "uncertainty" in m:
        print(f"uncertainty draws computed with {comp.get('backend')} on {comp.get('device')}, {comp.get('dtype')}")
    keys = ["n_items", "n_models", "target", "ddm", "ddm_sd", "max_gap", "max_gap_sd", "max_gap_ci",
            "max_gap_trusted", "uniform_baseline_max_gap", "baseline", "max_gap_ratio", "k", "topk_sum",
            "topk_sum_sd", "ability_range", "lattice", "n_levels", "sum_score_levels", "ddm_floor", "max_gap_floor",
            "undetectable_width", "b2_bound", "model_information", "item_information", "model_inversion_rate",
            "item_inversion_rate", "c3_passed", "diagnostics_passed"]
    print(kv({k: _fmt(m[k]) for k in keys if k in m}))
    print(f"\nundetectable width (Theorem 2.3): an improvement narrower than {m['max_gap']:.3g} can be invisible for "
          f"any number of rollouts; score gaps below {m.get('b2_bound', float('nan')):.3g} may be rank flips "
          f"(Theorem B.2, delta {m.get('delta', 0.05):g}, L {m.get('lipschitz', 1.0):g})")
    for w in m.get("warnings", []):
        print(f"warning: {w}")
    imp = m.get("improvement_test")
    if isinstance(imp, dict):
        for label in ("original", "all_items"):
            r = imp.get(label)
            if isinstance(r, dict):
                print(f"E.2 improvement {imp['pre']} -> {imp['post']} on {label.replace('_', ' ')} ({r['n_items']} "
                      f"items): gain {r['gain']:+.4f}, one-sided p {r['p_value']:.4g} ({r['n_permutations']} "
                      f"permutations)")
    if "robustness" in m:
        print("\nrobustness (paper 003 C.3, C.5):")
        for line in _robustness_lines(m["robustness"]):
            print(f"  {line}")
    print(f"\nLargest gaps (normalised difficulty; BenchFill targets the midpoint with `benchloupe fill "
          f"{args.benchmark} --gap N`):")
    show = gaps.head(args.gaps).copy()
    show.insert(0, "gap", range(1, len(show) + 1))
    cols = [c for c in ("gap", "lo", "hi", "width", "ci_lo", "ci_hi", "midpoint", "status") if c in show]
    print(table(show[cols]))
    return 0


def _robustness_lines(rob: dict) -> list[str]:
    out = []
    loo = rob.get("loo")
    if isinstance(loo, dict):
        p = ", ".join(f"{x:.2f}" for x in loo.get("topk_gap_persistence", []))
        out.append(f"leave-one-out ({loo['refits']} refits, {loo['method']}): Pearson mean {loo['pearson_mean']:.4f} "
                   f"min {loo['pearson_min']:.4f}, Spearman mean {loo['spearman_mean']:.4f} min "
                   f"{loo['spearman_min']:.4f}; DDM {loo['ddm_range'][0]:.4f}-{loo['ddm_range'][1]:.4f}, max gap "
                   f"{loo['max_gap_range'][0]:.4f}-{loo['max_gap_range'][1]:.4f} (same place in "
                   f"{loo['max_gap_same_place']:.0%}); top gaps still top-k in: {p}")
    bic = rob.get("bic")
    if isinstance(bic, dict):
        base = bic.get("bic_1pl")
        deltas = ", ".join(f"{k[4:]} {v - base:+.0f}" for k, v in bic.items() if k.startswith("bic_") and k != "bic_1pl")
        out.append(f"BIC (N = {bic['n_obs']:.0f} trials) selects {bic['selected']}; vs 1PL: {deltas}")
        if bic.get("warning"):
            out.append(f"warning: {bic['warning']}")
    pri = rob.get("priors")
    if isinstance(pri, dict):
        for name, v in pri.items():
            if isinstance(v, dict):
                flag = "" if v.get("converged", True) else " (not converged)"
                out.append(f"prior {name}: mu {v['mu']:.3f} sigma {v['sigma']:.3f}, DDM {v['ddm']:.4f}, max gap "
                           f"{v['max_gap']:.4f}, Spearman {v['spearman']:.4f}, max |dz| {v['max_abs_dz']:.4f}{flag}")
    return out


def _fmt(v):
    if isinstance(v, list):
        return "[" + ", ".join(f"{x:.4g}" if isinstance(x, float) else str(x) for x in v) + "]"
    return v


def register_coverage(sub, common) -> None:
    p = sub.add_parser("coverage", help="difficulty coverage: 1PL difficulties, DDM, max gap, top-k gaps, diagnostics",
                       description="Paper 003: fit the 1PL (MAP, N(0,1) priors; guessing from item chance levels), "
                                   "then DDM (W1 to the same-size uniform), the maximum gap with end points, the "
                                   "top-k gap sum, the C.3 response-matrix diagnostics with pass/fail and the C.6 "
                                   "posterior uncertainty. Stores a run whose top-k gaps become gap flags.")
    common(p)
    from benchloupe.jobs.coverage import CoverageConfig
    p.add_argument("benchmark")
    ranged_argument(p, "--gaps", range=ranges.count(1, 1_000_000, "gaps"), default=10,
                    help="how many gaps to list (default: 10)")
    p.add_argument("--ecdf", action="store_true", help="include the ECDF points in --json output")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="where the C.6 uncertainty draws' metrics run: cuda (torch on a GPU), cpu (numpy), or auto "
                        "(CUDA when present and the draws are large; default); the run records device and dtype")
    add_config_args(p, CoverageConfig)
    add_worker_args(p)
    p.set_defaults(func=cmd_coverage)


def cmd_calibrate(args) -> int:
    from benchloupe import jobs
    from benchloupe.jobs.coverage import CalibrateConfig

    if args.cfg_k is not None and args.cfg_k < 1:
        raise CliError(f"--k {args.cfg_k}: keep at least one item (leave --k out to keep half the benchmark)")
    cfg = config_from_args(args, CalibrateConfig)
    rid = jobs.analysis("calibrate").run(db_path(args), args.benchmark, cfg, name=args.name)
    run, sweep = stored_run(args, rid, "sweep")
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
