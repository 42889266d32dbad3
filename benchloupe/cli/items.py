"""``benchloupe audit items BENCHMARK`` (issue 33): broken items found and put in the triage queue."""

from __future__ import annotations

from benchloupe.cli.errors import CliError, db_path
from benchloupe.cli.options import StderrProgress
from benchloupe.cli.output import print_json
from benchloupe.words import count

# `audit` flags that belong to `audit neartie`: given with `audit items` they would change nothing
NEARTIE_ONLY = {"report": None, "need": None, "family_from": "name", "drop_small_families": False,
                "protocol": "primary", "compare": None, "gap_curve": None, "fractions": None, "k_grid": None,
                "device": "auto"}


def _pct(v) -> str:
    return "-" if v is None or v != v else f"{v:.3f}"


def cmd_audit_items(args) -> int:
    from benchloupe.jobs.items import ItemAuditConfig, run_items_audit
    from benchloupe.store import curation, runs
    from benchloupe.store.db import connect

    if len(args.benchmarks) != 1:
        raise CliError(f"audit items takes one benchmark, got {len(args.benchmarks)}")
    for dest, default in NEARTIE_ONLY.items():
        if getattr(args, dest, default) != default:
            raise CliError(f"--{dest.replace('_', '-')} applies to `audit neartie`, not `audit items`; drop it")
    for dest, value in vars(args).items():
        if dest.startswith("cfg_") and value is not None:
            raise CliError(f"--{dest[4:].replace('_', '-')} applies to `audit neartie`, not `audit items`; drop it")
    cfg = ItemAuditConfig(alpha=args.fdr, n_perm=args.permutations, top_k=args.top_k, seed=args.seed,
                          flag_saturated=args.flag_saturated)
    benchmark = args.benchmarks[0]
    rid = run_items_audit(db_path(args), benchmark, cfg, progress=StderrProgress("audit items"))
    conn = connect(db_path(args))
    try:
        run = runs.get_run(conn, rid)
        flags = curation.flags(conn, run_id=rid, kind="item")
    finally:
        conn.close()
    m = run["metrics"]
    limit = getattr(args, "limit", None) or 20
    if args.json:
        print_json({"run_id": rid, "metrics": m, "flags": flags[["id", "item_key", "reason", "score", "state"]]
                    .assign(headline=[p.get("headline", "") for p in flags["payload"]]) if len(flags) else [],
                    "timings": run["timings"]})
        return 0
    reasons = ", ".join(f"{k} {v}" for k, v in m["reasons"].items() if v) or "none"
    print(f"item audit run #{rid} on {benchmark}: {count(m['items'], 'item')} x {count(m['models'], 'model')}, "
          f"{m['flagged']} flagged at q <= {m['alpha']:g} ({reasons})")
    for f in flags.head(limit).itertuples():
        print(f"  flag {f.id}  {f.item_key}  {', '.join(f.payload['reasons'])}: {f.payload['headline']}")
    if len(flags) > limit:
        print(f"  ... {len(flags) - limit} more: `benchloupe flags {benchmark} --kind item`")
    rel = m["reliability"]
    a = rel["all"]
    line = f"reliability: alpha {_pct(a['alpha'])} (SEM {_pct(a['sem'])} points), marginal {_pct(a['marginal'])}"
    if "without_flagged" in rel:
        w = rel["without_flagged"]
        line += (f"; without the {count(w['items_removed'], 'flagged item')}: alpha {_pct(w['alpha'])}, "
                 f"marginal {_pct(w['marginal'])}")
    print(line)
    sat = m["saturation"]
    print(f"saturation: {sat['index'] * 100:.1f} % of items solved by all of the top {sat['top_n']} models"
          if sat["index"] == sat["index"] else "saturation: -")
    if sat["trend"]:
        print("  by release date: " + ", ".join(f"{t['date']:.1f}: {t['index'] * 100:.0f} %" for t in sat["trend"]))
    if len(flags):
        print(f"triage: `benchloupe flags {benchmark} --kind item`; decide with --set ID confirmed|dismissed, "
              "--fix-key ID LABEL (re-scores from the stored options), --retire ID")
    return 0
